"""A run interrupted through the command line: a full disk, two sweeps at once, SIGTERM, SIGUSR2 and a
submitit requeue each end with one line, and the rerun resumes to the tables an uninterrupted run writes."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
from conftest import QUICK
from helpers import sinkexp

# 400 steps drawn 4 at a time, checkpointed every 100: a stop signal lands between checkpoints
CHUNKED = (
    "device=cpu",
    "train.steps=400",
    "eval.every=50",
    "train.checkpoint_every=100",
    "train.data_chunk=4",
    "train.batch_size=16",
    "eval.batch_size=32",
    "threads=1",
)


def test_a_full_disk_ends_with_one_line_and_the_run_resumes_once_there_is_room(tmp_path, monkeypatch):
    """ENOSPC while the step-20 checkpoint is written: one line naming the file and what to do, exit 1,
    the step-10 checkpoint untouched; run again with room, the run resumes to an uninterrupted run's tables."""
    import errno

    real, written = Path.write_bytes, []

    def full_at_the_second_checkpoint(self, data):
        if self.name.startswith(".checkpoint.pt."):
            written.append(self.name)
            if len(written) == 2:
                raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, data)

    monkeypatch.setattr(Path, "write_bytes", full_at_the_second_checkpoint)
    args = (*QUICK, "threads=1")  # bit-equality needs one thread count; the default follows the machine's load
    result = sinkexp("train", *args, "hydra.run.dir=full", cwd=tmp_path)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1, result.stderr
    assert lines[0].startswith(
        f"sinkexp: error: cannot write {tmp_path / 'full/checkpoint.pt'}: no space left on the "
        "device (ENOSPC); free space on it; then the same command resumes it from its last checkpoint (FAILED written)"
    )
    assert torch.load(tmp_path / "full/checkpoint.pt", weights_only=False)["trainer"]["step"] == 10
    assert not list((tmp_path / "full").glob(".checkpoint.pt.*"))  # no temporary file left
    monkeypatch.undo()
    resumed = sinkexp("train", *args, "hydra.run.dir=full", cwd=tmp_path)
    assert resumed.returncode == 0  # the console says where it resumed (train.log says it too)
    assert f"{tmp_path / 'full'}: resuming from its checkpoint at step 10 of 30\n" in resumed.stdout
    assert sinkexp("train", *args, "hydra.run.dir=whole", cwd=tmp_path).returncode == 0
    for name in ("metrics.csv", "losses.csv", "summary.json"):
        assert (tmp_path / "full" / name).read_bytes() == (tmp_path / "whole" / name).read_bytes(), name


def test_two_concurrent_sweeps_train_each_run_once(tmp_path):
    env = {**os.environ, "TQDM_DISABLE": "1"}
    args = [
        sys.executable,
        "-m",
        "sinkexp.cli",
        "train",
        "-m",
        "seed=0,1,2,3",
        "name=both",
        *(arg for arg in QUICK if not arg.startswith(("train.steps=", "train.checkpoint_every="))),  # given once
        "train.steps=60",
        "train.checkpoint_every=20",
    ]
    first = subprocess.Popen(args, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    second = subprocess.Popen(args, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    outcomes = [process.communicate(timeout=300) for process in (first, second)]
    runs = sorted((tmp_path / "outputs/sweeps/both/trigger/softmax/L1").iterdir())
    assert len(runs) == 4
    for run_dir in runs:
        assert (run_dir / "DONE").exists() and not (run_dir / "FAILED").exists(), run_dir
        log = (run_dir / "train.log").read_text()
        assert log.count("step 0 eval") == 1, log  # trained by one process, from the start once
        metrics = pd.read_csv(run_dir / "metrics.csv")
        assert sorted(metrics["step"].unique()) == list(range(0, 61, 10))
    for process, (_, err) in zip((first, second), outcomes):
        # a run skipped because the other sweep trains it is waited for and counted by how it ended
        assert process.returncode == 0, err


def test_sigterm_stops_a_run_like_ctrl_c(tmp_path):
    import signal
    import time

    env = {**os.environ, "TQDM_DISABLE": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "sinkexp.cli", "train", "hydra.run.dir=term", "device=cpu", "train.steps=100000"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not (tmp_path / "term/metrics.csv").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    checkpointed = (tmp_path / "term/checkpoint.pt").exists()  # the line says truly where the rerun starts
    said = (
        "resumes it from its last checkpoint)"
        if checkpointed
        else "trains it from step 0, as no checkpoint was written yet)"
    )
    assert process.returncode == 143 and err.strip().endswith(said), err
    assert len(err.strip().splitlines()) == 1, err
    assert "stopped by SIGTERM at step " in err and "(FAILED written;" in err, err
    assert (tmp_path / "term/FAILED").read_text().startswith("Interrupted: stopped by SIGTERM at step ")


def test_sigusr2_outside_submitit_stops_at_a_checkpoint_and_the_rerun_resumes_to_the_same_tables(tmp_path):
    """SLURM's `--signal=USR2@N` around a plain `sinkexp train`: the run trains on to the next step
    with no data drawn ahead, checkpoints there and stops with FAILED saying so, and one line after
    the progress bar (closed first: the line is the last on stderr); the same command resumes it."""
    import signal
    import time

    args = CHUNKED
    assert sinkexp("train", "hydra.run.dir=whole", *args, cwd=tmp_path).returncode == 0
    env = {key: value for key, value in os.environ.items() if key != "TQDM_DISABLE"}  # the bar on stderr
    process = subprocess.Popen(
        [sys.executable, "-m", "sinkexp.cli", "train", "hydra.run.dir=usr2", *args],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    log, deadline = tmp_path / "usr2/train.log", time.monotonic() + 120
    while not (log.exists() and "step 0 eval" in log.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGUSR2)
    _, err = process.communicate(timeout=120)
    step = torch.load(tmp_path / "usr2/checkpoint.pt", weights_only=True)["trainer"]["step"]
    assert process.returncode == 128 + signal.SIGUSR2 and 0 < step < 400 and step % 4 == 0, err
    assert err.rstrip("\n").split("\n")[-1] == (
        f"sinkexp: {tmp_path / 'usr2'} stopped by SIGUSR2 at step {step}, a "
        "checkpoint written there (FAILED written; the same command resumes "
        "it from its last checkpoint)"
    )
    assert (tmp_path / "usr2/FAILED").read_text().startswith(f"Interrupted: stopped by SIGUSR2 at step {step},")
    assert sinkexp("train", "hydra.run.dir=usr2", *args, cwd=tmp_path).returncode == 0
    for name in ("metrics.csv", "losses.csv", "summary.json"):
        assert (tmp_path / "usr2" / name).read_bytes() == (tmp_path / "whole" / name).read_bytes(), name


def test_a_submitit_job_signalled_before_its_timeout_requeues_and_resumes_to_the_same_tables(tmp_path):
    """submitit's pre-timeout signal (USR2), sent by hand once the job has evaluated step 0: the job
    checkpoints, submitit_local requeues it, and the resumed run ends with a lone run's tables."""
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    import signal
    import time

    args = CHUNKED
    assert sinkexp("train", "hydra.run.dir=whole", *args, cwd=tmp_path).returncode == 0
    env = {**os.environ, "TQDM_DISABLE": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "sinkexp.cli", "train", "-m", "hydra/launcher=submitit_local", "name=rq", *args],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline, signalled = time.monotonic() + 120, False
    while process.poll() is None and not signalled and time.monotonic() < deadline:
        for log in (tmp_path / "outputs/sweeps/rq").rglob("train.log"):
            holder = (log.parent / ".lock").read_text().split()  # "pid N on HOST": the job's process
            if "step 0 eval" in log.read_text() and holder:
                os.kill(int(holder[1]), signal.SIGUSR2)
                signalled = True
        time.sleep(0.05)
    _, err = process.communicate(timeout=240)
    assert signalled and process.returncode == 0, err
    (run_dir,) = (tmp_path / "outputs/sweeps/rq").rglob("DONE")
    run_dir = run_dir.parent
    resumed = json.loads((run_dir / "meta.json").read_text())["resumed_from_step"]
    assert resumed is not None and 0 < resumed < 400 and resumed % 4 == 0  # at a data-chunk boundary
    assert not (run_dir / "FAILED").exists()
    for name in ("metrics.csv", "losses.csv", "summary.json"):
        assert (run_dir / name).read_bytes() == (tmp_path / "whole" / name).read_bytes(), name


def test_ctrl_c_after_hydra_made_the_folder_says_the_folder_is_left_empty(tmp_path, monkeypatch):
    """A stop between Hydra's run_job making the run's folder and calling the job (a stress test of
    start-up signals once saw "nothing written" said beside that folder): one line that says what
    the folder holds, exit 130, and the same command trains the run."""
    import signal

    import hydra.core.utils

    from sinkexp.machine import preemption

    def stopped(*args, **kwargs):
        monkeypatch.setattr(preemption, "_stopping", signal.SIGINT)
        raise preemption.Interrupted(signal.SIGINT)

    monkeypatch.setattr(hydra.core.utils, "configure_log", stopped)
    result = sinkexp("train", *QUICK, "hydra.run.dir=run", cwd=tmp_path)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 130 and len(lines) == 1, result.stderr
    assert lines[0] == (
        f"sinkexp: {tmp_path / 'run'} stopped by Ctrl-C ({tmp_path / 'run'} left empty; "
        "the same command trains it from step 0, as no checkpoint was written yet)"
    )
    assert list((tmp_path / "run").iterdir()) == []
    monkeypatch.undo()
    assert sinkexp("train", *QUICK, "hydra.run.dir=run", cwd=tmp_path).returncode == 0
