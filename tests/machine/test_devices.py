"""sinkexp/machine/devices.py on the CPU: where jobs and pool workers go on GPUs (pure functions), what
`device=auto` says of a GPU torch cannot use, and a CPU run's process settings."""

import multiprocessing
import warnings

import pytest
import torch

from sinkexp.errors import ConfigError
from sinkexp.machine import devices
from sinkexp.machine.devices import job_device, visible_gpus, worker_gpus, workers_per_gpu

GiB = 2**30


@pytest.mark.parametrize(
    "requested, job, gpus, expected",
    [
        ("auto", 5, 4, "cuda:1"),  # job 5 of a sweep on 4 GPUs: 5 mod 4
        ("cuda", 6, 4, "cuda:2"),  # unindexed cuda spreads too
        ("auto", 3, 1, "auto"),  # one GPU: nothing to spread over
        ("auto", 3, 0, "auto"),  # no GPU: auto stays auto (the CPU)
        ("cuda:1", 4, 4, "cuda:1"),  # a named GPU is kept
        ("cpu", 4, 4, "cpu"),
    ],
)
def test_a_sweeps_jobs_take_the_gpus_in_turn(requested, job, gpus, expected):
    assert job_device(requested, job, gpus) == expected


def test_every_gpu_of_a_sweep_gets_jobs_and_none_gets_two_more_than_another():
    taken = [job_device("auto", job, 3) for job in range(10)]
    assert sorted(set(taken)) == ["cuda:0", "cuda:1", "cuda:2"]
    assert [taken.count(f"cuda:{i}") for i in range(3)] == [4, 3, 3]


@pytest.mark.parametrize(
    "env, count, expected",
    [
        (None, 3, ["0", "1", "2"]),  # no CUDA_VISIBLE_DEVICES: torch's indices
        ("2,3", 2, ["2", "3"]),  # a SLURM allocation of GPUs 2 and 3
        ("GPU-aa11, GPU-bb22", 2, ["GPU-aa11", "GPU-bb22"]),  # UUIDs, spaces dropped
        ("4,7,-1,5", 2, ["4", "7"]),  # CUDA stops at the first invalid entry
        ("", 0, []),  # every GPU hidden
    ],
)
def test_the_visible_gpus_are_named_as_cuda_visible_devices_names_them(env, count, expected):
    assert visible_gpus(env, count) == expected


@pytest.mark.parametrize(
    "free, job, cores, gpus, expected",
    [
        (80 * GiB, 3.5 * GiB, 64, 2, 20),  # memory decides: 80 / (3.5 + 0.5 context)
        (80 * GiB, 3.5 * GiB, 16, 2, 8),  # cores decide: 16 cores over 2 GPUs
        (2 * GiB, 3.5 * GiB, 16, 2, 1),  # too little memory for one: still one worker (the job checks itself)
        (24 * GiB, 0, 1, 4, 1),  # fewer cores than GPUs: one each
    ],
)
def test_workers_per_gpu_come_from_free_memory_capped_by_cores(free, job, cores, gpus, expected):
    assert workers_per_gpu(int(free), int(job), cores, gpus) == expected


def test_pool_workers_take_different_gpus_first():
    assert worker_gpus(["2", "3"], 5) == ["2", "3", "2", "3", "2"]
    assert worker_gpus([], 4) == []


def test_each_new_pool_worker_sees_only_the_next_gpu(monkeypatch):
    counter = multiprocessing.get_context("spawn").Value("i", 0)
    seen = []
    for _ in range(3):
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        devices.pin_worker(["GPU-a", "GPU-b"], counter)
        seen.append(devices.os.environ["CUDA_VISIBLE_DEVICES"])
    assert seen == ["GPU-a", "GPU-b", "GPU-a"]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    devices.pin_worker([], counter)  # a pool on the CPU: nothing set
    assert "CUDA_VISIBLE_DEVICES" not in devices.os.environ


@pytest.fixture
def gpu_present_but_unusable(monkeypatch):
    """An NVIDIA driver on the machine (nvidia-smi on PATH) that torch's CUDA cannot use."""

    def is_available():
        warnings.warn(
            "CUDA initialization: The NVIDIA driver on your system is too old (found version 11040). "
            "Please update your GPU driver\nsecond line"
        )
        return False

    monkeypatch.setattr(torch.cuda, "is_available", is_available)
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(devices.shutil, "which", lambda name: "/usr/bin/nvidia-smi" if name == "nvidia-smi" else None)
    monkeypatch.setattr(devices, "_said", set())
    devices.cuda_status.cache_clear()
    yield
    devices.cuda_status.cache_clear()


def test_auto_says_in_one_line_why_a_present_gpu_is_not_used(gpu_present_but_unusable, capsys):
    assert devices.resolve_device("auto") == torch.device("cpu")
    assert devices.resolve_device("auto") == torch.device("cpu")
    err = capsys.readouterr().err
    assert err.count("\n") == 1  # said once per process, on one line
    assert "device=auto" in err and "NVIDIA driver on your system is too old" in err and "second line" not in err
    assert "scripts/setup.sh" in err and "device=cpu" in err


def test_cuda_asked_of_an_unusable_gpu_is_refused_with_the_reason(gpu_present_but_unusable):
    with pytest.raises(ConfigError, match="device=cuda is not available .*driver on your system is too old"):
        devices.resolve_device("cuda")


def test_a_cpu_build_of_torch_beside_a_gpu_is_named(gpu_present_but_unusable, monkeypatch, capsys):
    monkeypatch.setattr(torch.version, "cuda", None)
    devices.cuda_status.cache_clear()
    devices.resolve_device("auto")
    assert "is a CPU build" in capsys.readouterr().err


def test_auto_is_silent_where_there_is_no_gpu(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(devices.shutil, "which", lambda name: None)
    monkeypatch.setattr(devices, "NVIDIA_DRIVER", devices.Path("/nonexistent/nvidia/version"))
    devices.cuda_status.cache_clear()
    try:
        assert devices.resolve_device("auto") == torch.device("cpu") and devices.device_kind("auto") == "cpu"
    finally:
        devices.cuda_status.cache_clear()
    assert capsys.readouterr().err == ""


def test_a_cpu_run_keeps_torchs_defaults():
    """configure on the CPU: no deterministic mode (CPU runs compute exactly what they did), exact fp32."""
    devices.configure(torch.device("cpu"), "exact")
    assert not torch.are_deterministic_algorithms_enabled()
    assert torch.get_float32_matmul_precision() == "highest" and not torch.backends.cudnn.allow_tf32
    devices.configure(torch.device("cpu"), "tf32")
    assert torch.get_float32_matmul_precision() == "high" and torch.backends.cudnn.allow_tf32
    devices.configure(torch.device("cpu"), "exact")


def test_cublas_gets_a_deterministic_workspace_before_any_run():
    assert devices.os.environ[devices.CUBLAS_WORKSPACE] in devices.DETERMINISTIC_WORKSPACES


def test_device_kinds():
    assert [devices.device_kind(d) for d in ("cpu", "cuda", "cuda:3")] == ["cpu", "cuda", "cuda"]
