"""The run directory (rundir/lifecycle.py): a finished run is never touched, a killed run resumes to the
same tables as an uninterrupted one, a different config is refused."""

import os
import pickle
import warnings
from types import SimpleNamespace

import pytest
import torch
from conftest import QUICK

from sinkexp.config.identity import config_hash
from sinkexp.jobs.runner import run
from sinkexp.rundir import files
from sinkexp.rundir import lifecycle as rundir_lifecycle
from sinkexp.rundir.lifecycle import RunDirError
from sinkexp.rundir.reading import run_status
from sinkexp.train.loop import Trainer


def read(run_dir, name):
    return (run_dir / name).read_bytes()


@pytest.mark.parametrize(
    "schedule",
    [
        (),
        ("train.warmup=8", "train.schedule=cosine"),
        ("train.checkpoint_steps=log", "train.data_chunk=4", "eval.at_checkpoints=true"),
    ],
    ids=["constant", "cosine", "log checkpoints"],
)
def test_killed_run_resumes_to_the_same_tables(make_config, tmp_path, kill_at_step, schedule):
    cfg = make_config(*QUICK, "model.n_heads=2", *schedule)
    run(cfg, tmp_path / "whole")

    kill_at_step(Trainer, 25)
    with pytest.raises(KeyboardInterrupt):
        run(cfg, tmp_path / "split")
    assert (tmp_path / "split/FAILED").read_text().startswith("Interrupted: stopped by Ctrl-C at step 24\n")
    assert not (tmp_path / "split/DONE").exists()
    kill_at_step(Trainer, None)
    run(cfg, tmp_path / "split")  # resumes from the step-20 checkpoint
    assert (tmp_path / "split/DONE").exists() and not (tmp_path / "split/FAILED").exists()
    for name in (files.METRICS_CSV, files.LOSSES, files.SUMMARY):
        assert read(tmp_path / "split", name) == read(tmp_path / "whole", name), name


def test_a_stop_during_the_step_0_evaluation_names_step_0(make_config, tmp_path, monkeypatch):
    """Ctrl-C or SIGTERM after metrics.csv is written but before the step-0 evaluation returns (its
    losses.csv still to come): FAILED names step 0, as at any later step, and the rerun starts over."""
    cfg = make_config(*QUICK)
    original = rundir_lifecycle.RunDir.evaluated

    def evaluated(self, rows, losses, step):
        original(self, rows, losses, step)
        raise KeyboardInterrupt

    monkeypatch.setattr(rundir_lifecycle.RunDir, "evaluated", evaluated)
    with pytest.raises(KeyboardInterrupt):
        run(cfg, tmp_path)
    assert (tmp_path / files.FAILED).read_text().startswith("Interrupted: stopped by Ctrl-C at step 0\n")
    monkeypatch.setattr(rundir_lifecycle.RunDir, "evaluated", original)
    run(cfg, tmp_path)
    assert (tmp_path / "DONE").exists() and not (tmp_path / files.FAILED).exists()


def test_a_requeue_signal_checkpoints_where_the_run_is_and_resumes_to_the_same_tables(
    make_config, tmp_path, monkeypatch
):
    """The scheduler's pre-timeout signal (machine/preemption.py) at step 13 of 4-step data chunks: the run
    trains on to step 14 (no data drawn ahead), checkpoints there, stops neither FAILED nor DONE, and
    its resumed run ends with an uninterrupted run's tables and kept checkpoints."""
    from sinkexp.machine import preemption

    cfg = make_config(*QUICK, "train.data_chunk=4", "train.keep_checkpoints=true")
    run(cfg, tmp_path / "whole")
    original, calls = Trainer.train_step, {"n": 0}

    def train_step(self):
        calls["n"] += 1
        if calls["n"] == 13:
            monkeypatch.setattr(preemption, "_request", (10, None))  # what the signal handler records
        return original(self)

    monkeypatch.setattr(Trainer, "train_step", train_step)
    monkeypatch.setattr(preemption, "_handlers", {10: None})  # submitit's handler, which requeues
    with pytest.raises(preemption.Requeue, match="step 14"):
        run(cfg, tmp_path / "split")
    assert run_status(tmp_path / "split").status == "interrupted"
    assert torch.load(tmp_path / "split" / files.CHECKPOINT, weights_only=True)["trainer"]["step"] == 14
    monkeypatch.setattr(preemption, "_request", None)
    monkeypatch.setattr(Trainer, "train_step", original)
    run(cfg, tmp_path / "split")
    for name in (files.METRICS_CSV, files.LOSSES, files.SUMMARY):
        assert read(tmp_path / "split", name) == read(tmp_path / "whole", name), name
    kept = [
        sorted(str(p.relative_to(tmp_path / which)) for p in (tmp_path / which).glob("checkpoints/*"))
        for which in ("split", "whole")
    ]
    assert kept[0] == kept[1] == [files.kept_checkpoint(step) for step in (10, 20, 30)]


def test_finished_run_is_left_untouched_and_other_configs_refused(make_config, tmp_path):
    cfg = make_config(*QUICK)
    run(cfg, tmp_path)
    stamps = {p: p.stat().st_mtime_ns for p in tmp_path.iterdir()}
    run(cfg, tmp_path)
    assert {p: p.stat().st_mtime_ns for p in tmp_path.iterdir()} == stamps
    with pytest.raises(RunDirError, match="another config"):
        run(make_config(*QUICK, "seed=1"), tmp_path)
    assert {p: p.stat().st_mtime_ns for p in tmp_path.iterdir()} == stamps


def test_a_checkpoint_of_another_config_is_refused(make_config, tmp_path):
    run(make_config(*QUICK, "train.steps=10"), tmp_path)
    (tmp_path / files.DONE).unlink()  # as if killed after its last checkpoint
    with pytest.raises(RunDirError, match="holds a run of another config"):  # meta.json says so first
        run(make_config(*QUICK, "train.steps=10", "seed=1"), tmp_path)
    (tmp_path / files.META).unlink()
    with pytest.raises(RunDirError, match="belongs to another config"):
        run(make_config(*QUICK, "train.steps=10", "seed=1"), tmp_path)
    assert not (tmp_path / files.FAILED).exists()  # a refused directory is not marked


def test_open_says_what_a_directory_allows(make_config, tmp_path):
    cfg = make_config(*QUICK)
    fresh = rundir_lifecycle.RunDir(tmp_path / "new", cfg)
    assert fresh.open() is None and fresh.state is None and fresh.resume_step == 0
    run(cfg, tmp_path / "done")
    assert rundir_lifecycle.RunDir(tmp_path / "done", cfg).open() == files.read_json(tmp_path / "done" / files.SUMMARY)
    assert [run_status(tmp_path / name).status for name in ("new", "done")] == ["running", "done"]  # new: held
    fresh.close()
    assert run_status(tmp_path / "new").status == "interrupted"


def test_hash_ignores_bookkeeping_and_keeps_earlier_names(make_config):
    base = config_hash(make_config())
    assert base == "96365c1e"  # the trigger default's hash since the first release: run names stay valid
    assert (
        config_hash(
            make_config(
                "device=cpu", "name=x", "threads=1", "train.replicas=4", "train.compile=true", "train.data_chunk=1"
            )
        )
        == base
    )
    assert config_hash(make_config("train.data_chunk=8")) != base  # another data stream
    assert config_hash(make_config("precision=exact")) == base
    assert config_hash(make_config("precision=tf32")) != base  # another computation on a GPU
    assert config_hash(make_config("seed=1")) != base
    assert config_hash(make_config("task.p_trigger=0.3")) != base
    # attn.sigmoid_bias was attn.bias: hashed under the first name, so sigmoid runs keep their names
    assert config_hash(make_config("attn=sigmoid")) == "29e4407f"
    assert config_hash(make_config("attn=sigmoid", "attn.sigmoid_bias=-1.0")) == "d5423262"  # was attn.bias=-1.0


def test_replica_directories_are_the_pattern_resolved_with_each_seed(tmp_path):
    from omegaconf import OmegaConf

    full = OmegaConf.create(
        {
            "seed": 0,
            "hydra": {
                "run": {"dir": str(tmp_path / "r/s${seed}")},
                "sweep": {"dir": str(tmp_path / "w"), "subdir": "x/s${seed}"},
            },
        }
    )
    seeds = [SimpleNamespace(seed=seed) for seed in (3, 4, 5)]
    assert rundir_lifecycle.job_run_dirs(full, False, seeds[:2]) == [tmp_path / "r/s3", tmp_path / "r/s4"]
    assert rundir_lifecycle.job_run_dirs(full, True, seeds[2:]) == [tmp_path / "w/x/s5"]


def test_atomic_writes_leave_the_old_file_when_the_write_fails(tmp_path):
    files.write_text(tmp_path / "a.txt", "old\n")

    def broken(tmp):
        open(tmp, "w").write("half")
        raise OSError("disk full")

    with pytest.raises(OSError):
        files._atomic(tmp_path / "a.txt", broken)
    assert (tmp_path / "a.txt").read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]  # no temporary file left


class Marker:
    """Unpickling this creates a file: what a crafted checkpoint would do with a shell command."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (str(self.path), "w"))


def test_a_crafted_checkpoint_is_never_executed(make_config, tmp_path):
    cfg = make_config(*QUICK)
    marker = tmp_path / "executed"
    torch.save({"config_hash": config_hash(cfg), "trainer": Marker(marker)}, tmp_path / files.CHECKPOINT)
    with pytest.raises(
        RunDirError,
        match="holds objects the safe loader refuses .not executed.: Unsupported global: GLOBAL io.open was not an "
        "allowed global by default; move it away",
    ) as err:
        run(cfg, tmp_path)
    assert not marker.exists()
    assert "\n" not in str(err.value) and str(tmp_path / files.CHECKPOINT) in str(err.value)
    assert not (tmp_path / files.DONE).exists()


class Shell:
    """What a crafted checkpoint would run: a shell command (os.system), here one that writes a file."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


@pytest.mark.parametrize("how", ["torch.save", "pickle.dump"])
def test_a_refused_checkpoint_names_torchs_reason_in_one_line_without_warnings(make_config, tmp_path, how):
    cfg = make_config(*QUICK)
    marker = tmp_path / "executed"
    state = {"config_hash": config_hash(cfg), "trainer": Shell(marker)}
    with open(tmp_path / files.CHECKPOINT, "wb") as handle:
        torch.save(state, handle) if how == "torch.save" else pickle.dump(state, handle)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch's pickle-protocol warning would fail the test
        with pytest.raises(RunDirError) as err:
            run(cfg, tmp_path)
    said = str(err.value)
    reason = {
        "torch.save": "Trying to load unsupported GLOBAL posix.system whose module posix is blocked",
        "pickle.dump": "Unsupported operand 149",
    }[how]
    assert said.startswith(
        f"{tmp_path / files.CHECKPOINT} holds objects the safe loader refuses (not executed): {reason};"
    )
    assert not marker.exists()


def test_a_truncated_checkpoint_is_called_so_in_whole_sentences(make_config, tmp_path):
    cfg = make_config(*QUICK)
    run(cfg, tmp_path / "whole")
    data = (tmp_path / "whole" / files.CHECKPOINT).read_bytes()
    (tmp_path / "cut").mkdir()
    (tmp_path / "cut" / files.CHECKPOINT).write_bytes(data[: len(data) // 2])
    with pytest.raises(RunDirError) as err:
        run(cfg, tmp_path / "cut")
    assert str(err.value) == (
        f"{tmp_path / 'cut' / files.CHECKPOINT} is corrupt or truncated: "
        "PytorchStreamReader failed reading zip archive: failed finding central directory; "
        "move it away and run the same command again to train this run from step 0"
    )


def test_divergence_stops_the_run_with_failed_and_no_done(make_config, tmp_path):
    from sinkexp.train.loop import Diverged

    with pytest.raises(Diverged, match="try a lower train.lr"):
        run(make_config(*QUICK, "train.lr=1e6"), tmp_path)
    assert run_status(tmp_path).status == "failed" and not (tmp_path / files.SUMMARY).exists()
    assert (tmp_path / files.FAILED).read_text().startswith("Diverged: diverged")


def test_json_is_strict(tmp_path):
    import json

    files.write_json(tmp_path / "s.json", {"loss": {"all": float("nan"), "x": 1.0}, "steps": [float("inf")]})
    text = (tmp_path / "s.json").read_text()
    assert "NaN" not in text and "Infinity" not in text
    loaded = json.loads(text, parse_constant=lambda name: pytest.fail(f"non-strict JSON constant {name}"))
    assert loaded["loss"] == {"all": None, "x": 1.0} and loaded["steps"] == [None]
    assert loaded["non_finite"] == {"loss.all": "nan", "steps[0]": "inf"}
