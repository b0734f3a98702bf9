"""What every run directory's life shares, training's and `sinkexp measure`'s (rundir/claim.py):
the lock, a finished run left alone, FAILED and DONE never together, and meta.json's fields,
defined once (rundir/provenance.py: opening_meta) so that nothing a caller adds overwrites one."""

import contextlib
import errno
import io
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
from conftest import QUICK

from sinkexp.evaluate.tables import LOSS_COLUMNS, METRIC_COLUMNS
from sinkexp.jobs.runner import run
from sinkexp.rundir import files, lifecycle, provenance
from sinkexp.rundir.claim import RunClaim, left_behind, mark_failed, resumes
from sinkexp.rundir.files import RunDirError
from sinkexp.rundir.provenance import SOURCE_ROOT, git_state, opening_meta
from sinkexp.rundir.reading import run_status
from sinkexp.train.loop import Trainer

CPU = torch.device("cpu")


def test_a_claim_without_training_goes_from_the_lock_to_done(tmp_path):
    """What `sinkexp measure` runs through: FAILED of an earlier try cleared, config.yaml and meta.json
    opened, DONE last with the closing meta.json, and then the run left alone."""
    path = tmp_path / "m"
    path.mkdir()
    (path / files.FAILED).write_text("RuntimeError: an earlier try\n")
    claim = RunClaim(path, "abcd1234", fix="dir or name")
    assert claim.take() is None
    with pytest.raises(files.RunBusy, match=f"pid {os.getpid()}"):  # one process at a time
        RunClaim(path, "abcd1234").take()
    meta = opening_meta("abcd1234", "cpu", CPU, identity={"command": "measure"})
    claim.begin({"command": "measure", "step": 0}, meta)
    assert not (path / files.FAILED).exists() and run_status(path).status == "running"
    assert (path / files.CONFIG).read_text() == "command: measure\nstep: 0\n"
    assert files.read_json(path / files.META)["end_time"] is None
    with pytest.raises(ValueError, match="meta.json has no field steps to close"):
        claim.end(1.0, steps=3)
    assert not (path / files.DONE).exists()
    files.write_json(path / files.SUMMARY, {"step": 0})  # the caller's tables, whole (reading.damage)
    files.write_csv(
        path / files.METRICS_CSV, pd.DataFrame([[0, 0, 0, "text", "sink_attn", 0.5]], columns=METRIC_COLUMNS)
    )
    files.write_csv(path / files.LOSSES, pd.DataFrame([[0, "eval/text", 1.0]], columns=LOSS_COLUMNS))
    claim.end(1.23456)
    claim.close()
    meta = files.read_json(path / files.META)
    assert run_status(path).status == "done" and meta["wall_time_s"] == 1.235 and meta["end_time"] is not None
    assert RunClaim(path, "abcd1234").take() == {"step": 0}  # finished: its summary, nothing touched
    with pytest.raises(RunDirError, match="holds a finished run of another config .*choose another dir or name"):
        RunClaim(path, "ffff0000", fix="dir or name").take()
    claim.fail(RuntimeError("late"))  # a finished run is never marked failed
    assert not (path / files.FAILED).exists()


def test_meta_json_fields_are_defined_once_and_nothing_overwrites_one():
    meta = opening_meta(
        "h", "auto", CPU, identity={"seed": 3}, fields={"replica": 1}, notes={"threads": "1"}, argv=["sinkexp", "x"]
    )
    standard = ["schema_version", "config_hash", "device", "versions", "git", "argv", "start_time", "end_time"]
    assert list(meta) == [*standard[:2], "seed", *standard[2:], "wall_time_s", "replica", "threads"]
    assert meta["argv"] == ["sinkexp", "x"] and meta["seed"] == 3 and meta["threads"] == "1"
    assert meta["device"]["requested"] == "auto" and meta["device"]["resolved"] == "cpu"
    assert opening_meta("h", "cpu", CPU, identity={})["argv"] == sys.argv  # by default, this process's command
    for clash, field in (
        ({"notes": {"start_time": "x"}}, "meta.json field start_time"),
        ({"identity": {"argv": []}}, "meta.json field argv"),
        ({"identity": {"seed": 0}, "fields": {"seed": 1}}, "meta.json field seed"),
        ({"versions_extra": {"torch": "0"}}, "meta.json's versions field torch"),
        ({"device_extra": {"name": "mine"}}, "meta.json's device field name"),
    ):
        with pytest.raises(ValueError, match=f"{field} given twice"):
            opening_meta("h", "cpu", CPU, **{"identity": {}, **clash})


def test_a_training_runs_notes_go_after_its_fields_and_argv_is_the_jobs_own(make_config, tmp_path):
    """launch.run_job's notes: `argv` is the job's command (meta.json's argv), the others come last;
    a note named as another field is refused, not written over it."""
    cfg = make_config(*QUICK)
    notes = {"threads": "1 (a test)", "argv": ["sinkexp", "train", "seed=0"], "allocator": "default"}
    opened = lifecycle.RunDir(tmp_path / "a", cfg, notes=notes)
    assert opened.open() is None
    opened.start(CPU, 0, 1)
    opened.close()
    meta = files.read_json(tmp_path / "a" / files.META)
    assert meta["argv"] == ["sinkexp", "train", "seed=0"] and meta["seed"] == cfg.seed
    assert list(meta)[-5:] == ["steps_per_s", "resumed_from_step", "replica", "threads", "allocator"]
    assert meta["replica"] == {"index": 0, "of": 1} and meta["threads"] == "1 (a test)"
    assert notes["argv"] == ["sinkexp", "train", "seed=0"]  # the caller's notes, shared by its runs, unchanged
    refused = lifecycle.RunDir(tmp_path / "b", cfg, notes={"seed": 7})
    assert refused.open() is None
    with pytest.raises(ValueError, match="meta.json field seed given twice"):
        refused.start(CPU, 0, 1)
    refused.close()
    assert not (tmp_path / "b" / files.META).exists()


def test_waiting_for_a_lock_returns_once_its_holder_lets_go(make_config, tmp_path):
    files.wait_for_lock(tmp_path, lambda holder: pytest.fail("no lock file, nothing to wait for"))
    holder = lifecycle.RunDir(tmp_path, make_config(*QUICK))
    assert holder.open() is None  # this process holds the lock (another open file)
    threading.Timer(0.5, holder.close).start()
    waited, started = [], time.monotonic()
    files.wait_for_lock(tmp_path, waited.append)
    assert waited == [f"pid {os.getpid()} on {platform.node()}"]
    assert time.monotonic() - started >= 0.4
    files.wait_for_lock(tmp_path, lambda holder: pytest.fail("released: nothing to wait for"))


def test_a_directory_in_use_is_skipped_not_trained_twice(make_config, tmp_path):
    cfg = make_config(*QUICK)
    holder = lifecycle.RunDir(tmp_path, cfg)
    assert holder.open() is None  # this process now holds the lock
    with pytest.raises(files.RunBusy, match=f"pid {os.getpid()}"):
        run(cfg, tmp_path)
    assert not (tmp_path / files.FAILED).exists() and not (tmp_path / files.METRICS_CSV).exists()
    holder.close()  # released (as a dead process's lock is)
    run(cfg, tmp_path)
    assert run_status(tmp_path).status == "done"


def test_a_file_system_without_flock_stops_the_run_with_one_line(make_config, tmp_path, monkeypatch):
    def no_flock(fd, operation):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(files.fcntl, "flock", no_flock)
    with pytest.raises(RunDirError, match="cannot lock .*No locks available.*does not support flock") as err:
        run(make_config(*QUICK), tmp_path)
    assert "\n" not in str(err.value)
    assert not (tmp_path / files.METRICS_CSV).exists() and not (tmp_path / files.FAILED).exists()


def test_done_and_failed_never_coexist_and_stale_temporary_files_go(make_config, tmp_path, kill_at_step):
    cfg = make_config(*QUICK)
    kill_at_step(Trainer, 15)
    with pytest.raises(KeyboardInterrupt):
        run(cfg, tmp_path)
    kill_at_step(Trainer, None)
    stale = tmp_path / ".metrics.csv.abc123.tmp"  # a write killed half-way
    stale.write_text("half")
    run(cfg, tmp_path)
    assert not stale.exists()
    assert run_status(tmp_path).status == "done" and not (tmp_path / files.FAILED).exists()
    lifecycle.RunDir(tmp_path, cfg).fail(RuntimeError("late"))  # a finished run is never marked failed
    assert not (tmp_path / files.FAILED).exists()


@pytest.mark.parametrize("precision, matmul, tf32", [("exact", "highest", False), ("tf32", "high", True)])
def test_meta_records_the_float32_matmul_settings_the_run_trained_with(make_config, tmp_path, precision, matmul, tf32):
    before = torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32
    try:
        run(make_config("train.steps=2", "eval.every=2", "eval.batch_size=8", f"precision={precision}"), tmp_path)
    finally:
        torch.set_float32_matmul_precision(before[0])
        torch.backends.cudnn.allow_tf32 = before[1]
    assert files.read_json(tmp_path / files.META)["device"]["precision"] == {
        "float32_matmul_precision": matmul,
        "cuda_matmul_allow_tf32": tf32,
        "cudnn_allow_tf32": tf32,
        "deterministic_algorithms": False,
        "cublas_workspace_config": ":4096:8",
    }  # deterministic on CUDA only


def test_the_dirty_flag_follows_changes_to_the_code_and_configs_alone(tmp_path):
    """git_state's flag reads sinkexp/ and configs/ of the checkout (outputs/ and notes do not count)."""
    repo, outside = tmp_path / "repo", tmp_path / "outside"

    def git(*args):
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)

    for name in ("sinkexp/a.py", "configs/b.yaml", "notes.md"):
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text("x\n")
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c")
    flags = []
    for name in ("notes.md", "configs/b.yaml", "sinkexp/a.py"):
        (repo / name).write_text("changed\n")
        flags.append(git_state(repo)["dirty"])
        git("checkout", "-q", "--", name)
    assert flags == [False, True, True] and git_state(repo)["dirty"] is False
    outside.mkdir()
    assert git_state(outside) == {"commit": None, "dirty": None}
    assert SOURCE_ROOT / "sinkexp" / "rundir" / "provenance.py" == Path(provenance.__file__).resolve()


def test_a_stop_line_says_what_the_folder_holds_and_where_the_rerun_starts(tmp_path):
    """claim.left_behind and claim.resumes read the folder: FAILED (the notes mark_failed adds) or what
    is there, nothing written only where no folder is; a resume only where a checkpoint exists."""
    stop = KeyboardInterrupt()
    states = {
        "absent": ({}, "nothing written"),
        "empty": ({".": None}, "{} left empty"),
        "lock": ({".lock": "pid 1 on elsewhere\n"}, "{} holds only .lock"),
        "earlier": ({"config.yaml": "x", ".lock": "pid 1 on elsewhere\n"}, "nothing written"),
        "ours": ({"config.yaml": "x", ".lock": f"pid {os.getpid()} on {platform.node()}\n"}, "only {}/.lock written"),
        "finished": ({"config.yaml": "x", "DONE": "x"}, "{} finished (DONE)"),
    }
    for name, (written, said) in states.items():
        if written:
            (tmp_path / name).mkdir()
        for file, text in written.items():
            if text is not None:
                (tmp_path / name / file).write_text(text)
        assert left_behind(stop, [tmp_path / name]) == said.format(tmp_path / name), name
    failed = KeyboardInterrupt()
    mark_failed(tmp_path / "earlier", failed)
    assert left_behind(failed, [tmp_path / "earlier"]) == "FAILED written" and (tmp_path / "earlier/FAILED").exists()
    (tmp_path / "ours" / files.CHECKPOINT).write_bytes(b"")
    assert resumes([tmp_path / "ours"]) == "the same command resumes it from its last checkpoint"
    assert resumes([tmp_path / "earlier"]) == "the same command trains it from step 0, as no checkpoint was written yet"
    assert resumes([tmp_path / "ours", tmp_path / "earlier"]).startswith("the same command resumes each from its last")
    assert resumes([tmp_path / "earlier"], measured=True) == "the same command measures it again"
    assert resumes([tmp_path / "finished"]) == "the same command leaves it untouched, as finished"


@pytest.mark.parametrize("where", ["before the lock", "at the lock"])
def test_a_stop_while_a_run_claims_its_folder_says_what_it_left(tmp_path, monkeypatch, where):
    """Ctrl-C between the folder's mkdir and the lock, or once .lock is written: not 'nothing written'."""
    from sinkexp.commands.overrides import read_sweep
    from sinkexp.jobs.launch import launch
    from sinkexp.jobs.plan import plan
    from sinkexp.machine.preemption import Interrupted
    from sinkexp.rundir import claim as rundir_claim

    run_dir = tmp_path / "run"
    planned = plan(read_sweep([*QUICK, f"hydra.run.dir={run_dir}"], multirun=False))
    real = rundir_claim.take_lock

    def stopped(path):
        if where == "at the lock":
            os.close(real(path))
        raise Interrupted()

    monkeypatch.setattr(rundir_claim, "take_lock", stopped)
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err), pytest.raises(SystemExit) as code:
        launch(planned)
    (line,) = err.getvalue().strip().splitlines()
    said = f"{run_dir} holds only .lock" if where == "at the lock" else f"{run_dir} left empty"
    assert code.value.code == 130 and line == (
        f"sinkexp: {run_dir} stopped by Ctrl-C ({said}; the same command trains it from step 0, as no checkpoint "
        "was written yet)"
    )
    assert [p.name for p in run_dir.iterdir()] == ([".lock"] if where == "at the lock" else [])
