"""Ctrl-C and SIGTERM at any moment of a command's start-up, once or three times: one line on stderr,
exit status 128 + the signal, and a run directory that the same command reruns to the tables of an
uninterrupted run (cli.main and machine/preemption.py's `stop_on_signals`; mid-run stops:
tests/jobs/test_interruptions.py).

The moments are read off what the command writes (its run directory's train.log: the job has
started, inside Hydra's run_job), and for the start-up before that, off the process's own clock
(its imports and its plan: a signal after a second)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import sinkexp

# Long enough (about a second of training) that three signals 50 ms apart land while the job runs.
QUICK = ("train.steps=100", "eval.every=50", "train.checkpoint_every=50", "threads=1", "device=cpu")
ENV = {**os.environ, "TQDM_DISABLE": "1", "PYTHONUNBUFFERED": "1"}
TABLES = ("metrics.csv", "losses.csv")


def interrupted(args: list[str], cwd: Path, when, signum: int, times: int) -> subprocess.CompletedProcess:
    """`sinkexp ARGS` as a process of its own, sent `signum` `times` times (50 ms apart) once `when()`."""
    process = subprocess.Popen(
        [sys.executable, "-m", "sinkexp.cli", *args], cwd=cwd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 120
    while not when() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    if process.poll() is not None:
        pytest.fail(f"the command ended before the moment to signal it: {process.communicate()[1].decode()}")
    for _ in range(times):
        process.send_signal(signum)
        time.sleep(0.05)
    out, err = process.communicate(timeout=120)
    return subprocess.CompletedProcess(args, process.returncode, out.decode(), err.decode())


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    root = tmp_path_factory.mktemp("whole")
    assert sinkexp("train", *QUICK, "hydra.run.dir=run", cwd=root).returncode == 0
    return {name: (root / "run" / name).read_bytes() for name in TABLES}


def after(seconds: float):
    started = time.monotonic()
    return lambda: time.monotonic() - started > seconds


@pytest.mark.parametrize(
    "moment, signum, times",
    [
        ("planning", signal.SIGINT, 1),
        ("planning", signal.SIGTERM, 3),
        ("job started", signal.SIGTERM, 1),
        ("job started", signal.SIGINT, 3),
    ],
    ids=lambda value: getattr(value, "name", str(value)),
)
def test_a_signal_at_start_up_is_one_line_and_the_run_reruns_whole(tmp_path, uninterrupted, moment, signum, times):
    run_dir = tmp_path / "run"
    args = ["train", *QUICK, f"hydra.run.dir={run_dir}"]
    when = after(1.0) if moment == "planning" else (run_dir / "train.log").exists
    stopped = interrupted(args, tmp_path, when, signum, times)
    lines = stopped.stderr.strip().splitlines()
    assert stopped.returncode == 128 + signum and len(lines) == 1, stopped.stderr
    how = "Ctrl-C" if signum == signal.SIGINT else "SIGTERM"
    assert lines[0].startswith("sinkexp: ") and f"stopped by {how}" in lines[0]
    assert not (run_dir / "DONE").exists()
    again = sinkexp(*args, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert {name: (run_dir / name).read_bytes() for name in TABLES} == uninterrupted


def test_ctrl_c_before_the_first_checkpoint_says_the_rerun_starts_at_step_0(tmp_path):
    run_dir = tmp_path / "run"
    args = ["train", "train.steps=100000", "train.checkpoint_every=100000", "eval.every=100000", "threads=1"]
    started = (run_dir / "metrics.csv").exists
    stopped = interrupted([*args, f"hydra.run.dir={run_dir}"], tmp_path, started, signal.SIGINT, 1)
    (line,) = stopped.stderr.strip().splitlines()
    assert stopped.returncode == 130 and not (run_dir / "checkpoint.pt").exists()
    assert line.endswith("no checkpoint was written yet: the same command trains it from step 0)"), line


@pytest.mark.parametrize("moment, signum, times", [("starting", signal.SIGINT, 3), ("measuring", signal.SIGTERM, 1)])
def test_a_signal_during_sinkexp_measure_is_one_line_and_the_rerun_finishes(tmp_path, moment, signum, times):
    pytest.importorskip("transformers")
    from hf_models import tiny

    run_dir = tmp_path / "run"
    args = ["measure", str(tiny("gpt2", tmp_path / "model")), "n=400", "seq_len=32", f"dir={run_dir}"]
    when = after(1.0) if moment == "starting" else (run_dir / "config.yaml").exists
    stopped = interrupted(args, tmp_path, when, signum, times)
    lines = stopped.stderr.strip().splitlines()
    assert stopped.returncode == 128 + signum and len(lines) == 1, stopped.stderr
    assert (run_dir / "FAILED").exists() == (moment == "measuring") and not (run_dir / "DONE").exists()
    again = sinkexp(*args, cwd=tmp_path)
    assert again.returncode == 0 and (run_dir / "DONE").exists(), again.stderr
