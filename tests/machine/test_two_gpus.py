"""CUDA checks that need two GPUs (skipped otherwise): a sweep spreads its jobs over them, and
device=cuda:1 leaves GPU 0 without a context. scripts/gpu_check.sh runs them beside test_gpu.py."""

import subprocess
import sys

import pytest
import torch

from sinkexp.rundir import files

pytestmark = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")


def test_a_sweep_spreads_over_the_gpus(tmp_path):
    args = [
        "-m",
        "seed=0,1",
        "device=cuda",
        "train.steps=10",
        "eval.every=10",
        "train.batch_size=16",
        "eval.batch_size=32",
        f"hydra.sweep.dir={tmp_path}",
    ]
    done = subprocess.run(
        [sys.executable, "-m", "sinkexp.cli", "train", *args], capture_output=True, text=True, cwd=tmp_path, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    used = sorted(files.read_json(meta)["device"]["resolved"] for meta in tmp_path.rglob(files.META))
    assert used == ["cuda:0", "cuda:1"]


def test_cuda_1_leaves_gpu_0_without_a_context(tmp_path):
    """A run on cuda:1, then NVML's list of the processes on each GPU (no CUDA context needed to ask)."""
    script = f"""
import os, pynvml, torch
from sinkexp.config.compose import compose_config
from sinkexp.jobs.runner import run
run(compose_config("device=cuda:1", "train.steps=10", "eval.every=10", "train.batch_size=16",
                   "eval.batch_size=32"), {str(tmp_path / "run")!r})
pynvml.nvmlInit()
pids = []
for index in range(2):
    handle = pynvml.nvmlDeviceGetHandleByUUID("GPU-" + str(torch.cuda.get_device_properties(index).uuid))
    pids.append([p.pid for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)])
print(os.getpid() in pids[0], os.getpid() in pids[1])
"""
    pytest.importorskip("pynvml")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-2:] == ["False", "True"]
