"""`sinkexp report DIR --list` (report/listing.py): a line per run from its files, with its status
(rundir/reading.py's run_status: the words of report and runs.csv) and the reason below, nothing written."""

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from conftest import QUICK

from sinkexp.jobs.runner import run
from sinkexp.report.listing import last_step, listing
from sinkexp.report.runs import collect, main
from sinkexp.rundir import files as rundir_files
from sinkexp.rundir import manifest
from sinkexp.train.loop import Diverged


def test_each_run_is_one_line_with_its_status_settings_step_and_hash(tmp_path, make_config):
    run(make_config(*QUICK, "attn=relu", "seed=1", "model.n_layers=2"), tmp_path / "a")
    shutil.copytree(tmp_path / "a", tmp_path / "b")  # a copy killed before step 30: logged up to step 25
    (tmp_path / "b" / rundir_files.DONE).unlink()
    losses = (tmp_path / "b" / rundir_files.LOSSES).read_text().splitlines()
    (tmp_path / "b" / rundir_files.LOSSES).write_text("\n".join(r for r in losses if not r.startswith("30,")) + "\n")
    digest = rundir_files.read_json(tmp_path / "a" / rundir_files.META)["config_hash"]
    header, done, stopped, why = (line.split() for line in listing(tmp_path, width=200))
    assert header == ["status", "task", "attn", "depth", "seed", "step", "hash", "run"]
    assert done == ["done", "trigger", "relu", "L2", "1", "30", digest, "a"]
    assert stopped == ["interrupted", "trigger", "relu", "L2", "1", "25", digest, "b"]
    assert " ".join(why) == "no DONE or FAILED: killed, or stopped for a requeue"


def test_a_measured_run_lists_its_model_and_a_long_folder_is_cut_to_the_width(tmp_path):
    run_dir = tmp_path / "measures" / ("m" * 80)
    rundir_files.write_text(
        run_dir / rundir_files.CONFIG,
        "command: measure\nmodel: /models/x\nstep: -1\nmeasured:\n  model_type: gpt2\n  n_layers: 3\n",
    )
    rundir_files.write_json(run_dir / rundir_files.META, {"config_hash": "0123abcd"})
    manifest.seal(run_dir)
    lines = listing(tmp_path, width=70)
    assert max(map(len, lines)) <= 70 and len(lines) == 2
    assert lines[1].split()[:7] == ["done", "measure", "gpt2", "L3", "-", "?", "0123abcd"]
    assert lines[1].endswith("m" * 10) and "..." in lines[1]


def test_the_last_step_is_read_from_the_table_end(tmp_path):
    table = tmp_path / "losses.csv"
    table.write_text("step,split,loss\n" + "".join(f"{step},train,0.{step}\n" for step in range(0, 5000, 5)))
    assert last_step(table) == "4995"
    table.write_text("step,split,loss\n")
    assert last_step(table) == "-" and last_step(tmp_path / "none.csv") == "-"


def test_the_list_option_prints_and_writes_nothing(tmp_path, make_config, capsys):
    run(make_config(*QUICK), tmp_path / "r")
    assert main([str(tmp_path), "--list"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 and out[1].startswith("done") and not (tmp_path / "report").exists()


def test_an_empty_folder_is_one_line_and_exit_2_for_the_list_and_the_report(tmp_path, capsys):
    for argv in ([str(tmp_path), "--list"], [str(tmp_path)]):
        assert main(argv) == 2
        out, err = capsys.readouterr()
        assert out == "" and err == f"sinkexp: error: no run directories (with config.yaml) below {tmp_path}\n"
    assert list(tmp_path.iterdir()) == []


def test_running_killed_failed_and_damaged_runs_are_four_statuses_everywhere(tmp_path, make_config):
    """A run training now (a live process holds its lock), one killed (its files as a SIGKILL after its
    last checkpoint leaves them), one failed (diverged) and one damaged: --list, report's runs.csv and
    the statuses agree, and the failed run's reason is the line it ended with."""
    run(make_config(*QUICK), tmp_path / "damaged")
    shutil.copytree(tmp_path / "damaged", tmp_path / "killed")
    for name in (rundir_files.DONE, rundir_files.SUMMARY):
        (tmp_path / "killed" / name).unlink()
    metrics = tmp_path / "damaged" / rundir_files.METRICS_CSV
    metrics.write_bytes(metrics.read_bytes()[:-7])
    with pytest.raises(Diverged) as err:
        run(make_config(*QUICK, "train.lr=1e6"), tmp_path / "failed")
    diverged = f"Diverged: {err.value}"
    env = {**os.environ, "TQDM_DISABLE": "1"}
    training = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sinkexp",
            "train",
            *(o for o in QUICK if not o.startswith("train.steps=")),
            "train.steps=1000000",
            f"hydra.run.dir={tmp_path / 'running'}",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,  # read only if it ends early
    )
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "running" / rundir_files.METRICS_CSV).exists() and time.monotonic() < deadline:
            assert training.poll() is None, training.communicate()[1].decode()
            time.sleep(0.05)
        lines = listing(tmp_path, width=400)
        runs, _ = collect(tmp_path)
    finally:
        training.send_signal(signal.SIGKILL)
        training.wait()
    statuses = {line.split()[-1]: line.split()[0] for line in lines[1:] if not line.startswith("  ")}
    expected = {"damaged": "damaged", "failed": "failed", "killed": "interrupted", "running": "running"}
    assert statuses == expected and dict(zip(runs["run"], runs["status"])) == expected
    reasons = dict(zip(runs["run"], runs["reason"]))
    assert f"  {diverged.splitlines()[0]}" in lines and reasons["failed"] == diverged.splitlines()[0]
    assert reasons["damaged"] == "metrics.csv (size differs)" and "  metrics.csv (size differs)" in lines
    assert reasons["running"] == f"pid {training.pid} on {os.uname().nodename}"
    assert collect(tmp_path)[0].set_index("run").loc["running", "status"] == "interrupted"  # killed now
