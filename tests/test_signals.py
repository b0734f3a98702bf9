"""Ctrl-C and SIGTERM at any moment of a command's start-up, once or three times: one line on stderr,
exit status 128 + the signal, and a run directory that the same command reruns to the tables of an
uninterrupted run (cli.main and machine/preemption.py's `stop_on_signals`; mid-run stops:
tests/jobs/test_interruptions.py).

The moments are read off what the command writes (its run directory's train.log: the job has
started, inside Hydra's run_job), and for the start-up before that, off the process's own clock
(its imports and its plan: a signal after a second). The sampled start-up test sends one signal at
moments from the entry's first instruction (sinkexp/__main__.py) on, and counts tracebacks, ignored
signals and lines the directory contradicts (a fast sample; the many-moment one is slow)."""

import collections
import os
import random
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
    process = subprocess.Popen([*console(), *args], cwd=cwd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
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
    assert line.endswith("the same command trains it from step 0, as no checkpoint was written yet)"), line


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


def console() -> list[str]:
    """The console script beside this Python (scripts/setup.sh installs it), else `python -m sinkexp`:
    both enter at sinkexp/__main__.py."""
    script = Path(sys.executable).with_name("sinkexp")
    return [str(script)] if script.exists() else [sys.executable, "-m", "sinkexp"]


def signalled_at(delay: float, signum: int, cwd: Path) -> tuple[str, str]:
    """`sinkexp train` sent `signum` `delay` seconds after it starts: (how it ended, its stderr). It
    starts with the two signals held (blocked, inherited), so that one sent before the entry's first
    instruction (the interpreter's own start-up, not sinkexp's) arrives at it, as the entry holds them
    itself from there. How: `one line` (128 + signum, one `sinkexp: ... stopped by` line, true to the
    run directory), `traceback`, `ignored` (it went on to exit 0), `died silently` (the default action), or
    `ended first` (the command ended before the moment: no signal sent)."""
    run_dir = cwd / "run"
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        process = subprocess.Popen(
            [*console(), "train", *QUICK, f"hydra.run.dir={run_dir}"],
            cwd=cwd,
            env=ENV,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
    time.sleep(delay)
    if process.poll() is not None:
        return "ended first", process.communicate()[1]
    process.send_signal(signum)
    err = process.communicate(timeout=120)[1]
    lines = err.strip().splitlines()
    if "Traceback" in err or len(lines) > 1:
        return "traceback", err
    if process.returncode < 0:
        return "died silently", err
    if process.returncode != 128 + signum or not lines or "stopped by" not in lines[0]:
        return "ignored", err
    return ("one line" if true_to(lines[0], run_dir) else "untrue"), err


def true_to(line: str, run_dir: Path) -> bool:
    """Whether a stop line says what the run directory holds: FAILED only where written, nothing
    written only where no folder is, an empty folder or a lone .lock as such (claim.left_behind)."""
    names = sorted(p.name for p in run_dir.iterdir()) if run_dir.is_dir() else None
    if "(nothing written" in line:
        return names is None
    if "FAILED written" in line:
        return names is not None and "FAILED" in names
    if "left empty" in line:
        return names == []
    if "holds only .lock" in line:
        return names == [".lock"]
    return False


def sampled_start_up(moments: list[float], tmp_path: Path) -> collections.Counter:
    outcomes, said = collections.Counter(), {}
    for n, delay in enumerate(moments):
        signum = (signal.SIGTERM, signal.SIGINT)[n % 2]
        how, err = signalled_at(delay, signum, tmp_path / f"s{n}")
        outcomes[how] += 1
        said.setdefault(how, f"{signum.name} at {delay:.3f} s: {err}")
    landed = len(moments) - outcomes.pop("ended first", 0)
    assert outcomes == {"one line": landed} and landed >= len(moments) // 2, said
    return outcomes


def test_a_signal_at_sampled_moments_of_start_up_is_one_true_line(tmp_path):
    """From the entry's first instruction through the imports (where the signal once gave a traceback
    or a silent exit) to the plan: eight moments, SIGTERM and SIGINT in turn."""
    for n in range(8):
        (tmp_path / f"s{n}").mkdir()
    sampled_start_up([0.0, 0.005, 0.02, 0.05, 0.1, 0.18, 0.3, 0.5], tmp_path)


@pytest.mark.slow
def test_a_signal_at_many_moments_of_start_up_is_one_true_line(tmp_path):
    """60 moments drawn over an uninterrupted command's wall time (start-up, the plan, the job, its
    tables and the process's end, which cli.main ends without the interpreter's teardown)."""
    started = time.monotonic()
    whole = subprocess.run(
        [*console(), "train", *QUICK, "hydra.run.dir=whole"], cwd=tmp_path, env=ENV, capture_output=True
    )
    assert whole.returncode == 0, whole.stderr
    moments = sorted(random.Random(72).uniform(0, time.monotonic() - started) for _ in range(60))
    for n in range(len(moments)):
        (tmp_path / f"s{n}").mkdir()
    sampled_start_up(moments, tmp_path)
