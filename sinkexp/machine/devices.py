"""Where a job trains, and the process settings a run there needs.

- `device_kind(requested)`: `cpu` or `cuda`, what a run's identity holds (identity.config_hash): CUDA's
  generators draw other numbers than the CPU's, so a run trained on either is a different run.
- `resolve_device(requested)`: the torch device of `device=...` (cuda -> cuda:0). `device=auto`
  says in one line when an NVIDIA GPU is present but torch cannot use it (a CPU build of torch, a
  driver older than torch's CUDA), instead of falling back to the CPU silently.
- `configure(device, precision)`: a job's device (torch.cuda.set_device, so that nothing opens a
  context on GPU 0 for a job on GPU 1), its float32 matmuls, and deterministic kernels on CUDA.
- `job_device`, `visible_gpus`, `worker_gpus`, `workers_per_gpu`: pure functions that place a
  sweep's jobs and reproduce's pool workers on every GPU the process may see.

Nothing here changes what a CPU run computes: deterministic mode is switched on for CUDA runs only.
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
import warnings
from pathlib import Path

import torch

from sinkexp.errors import ConfigError

# cuBLAS is deterministic run to run only with a fixed workspace per stream (NVIDIA cuBLAS docs,
# "Results reproducibility"), and torch's deterministic mode refuses every cuBLAS call without one of
# these settings. torch reads the variable once, at the process's first cuBLAS call, so it is set on
# import, before any run; a value the user set is kept (configure refuses one that is not deterministic).
CUBLAS_WORKSPACE = "CUBLAS_WORKSPACE_CONFIG"
DETERMINISTIC_WORKSPACES = (":4096:8", ":16:8")
os.environ.setdefault(CUBLAS_WORKSPACE, DETERMINISTIC_WORKSPACES[0])

NVIDIA_DRIVER = Path("/proc/driver/nvidia/version")  # present where the NVIDIA kernel driver is loaded
# a CUDA context with torch's kernels, per process (about 0.5 GiB; CUDA loads modules lazily)
CONTEXT_BYTES = 2**29


@functools.lru_cache(maxsize=1)
def cuda_status() -> tuple[bool, str | None]:
    """(torch can use a GPU, why not where an NVIDIA GPU is present but unusable; else None).

    Asked once per process: torch says why CUDA failed to initialise (a warning) only at its first look."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        usable = torch.cuda.is_available()
    if usable or not (shutil.which("nvidia-smi") or NVIDIA_DRIVER.exists()):
        return usable, None
    if torch.version.cuda is None:
        return False, f"torch {torch.__version__} is a CPU build"
    said = [str(w.message).strip().splitlines()[0] for w in caught if "CUDA" in str(w.message)]
    return False, said[0] if said else f"torch {torch.__version__} (CUDA {torch.version.cuda}) finds no usable GPU"


def device_kind(requested: str) -> str:
    """`cuda` or `cpu`: the kind of device `device=requested` trains on here (auto: CUDA where usable)."""
    if requested == "auto":
        return "cuda" if cuda_status()[0] else "cpu"
    return "cuda" if requested.startswith("cuda") else "cpu"


_said: set[str] = set()


def _say_once(line: str) -> None:
    if line not in _said:
        _said.add(line)
        print(line, file=sys.stderr, flush=True)


def resolve_device(requested: str) -> torch.device:
    """The torch device for `device=...`, with an explicit index on CUDA (cuda -> the current device)."""
    usable, why = cuda_status()
    if requested == "auto":
        if why:
            _say_once(
                f"sinkexp: device=auto: an NVIDIA GPU is present but unusable ({why}); training on the CPU. "
                "Install the CUDA torch scripts/setup.sh chooses (in a fresh .venv) or update the driver; "
                "device=cpu silences this"
            )
        requested = "cuda" if usable else "cpu"
    device = torch.device(requested)
    if device.type == "cuda":
        if not usable:
            raise ConfigError(
                f"device={requested} is not available ({why or 'torch sees no CUDA device'}); choose one of: auto, cpu"
            )
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ConfigError(
                f"device={requested} is not available; choose one of: auto, cpu, "
                + ", ".join(f"cuda:{i}" for i in range(torch.cuda.device_count()))
            )
        if device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
    return device


def configure(device: torch.device, precision: str) -> None:
    """This process's settings for a run on `device`.

    precision: `exact` keeps float32 matmuls in full fp32 (TF32 off, as the Kempner source forces;
    torch's own default leaves cuDNN's TF32 on), `tf32` lets NVIDIA GPUs from Ampere on round matmul
    inputs to TF32 (10-bit mantissa). The CPU computes fp32 either way. Neither reaches the fused
    attention kernel's float32 products (docs/rundir.md).

    On CUDA, deterministic kernels (torch.use_deterministic_algorithms), so that a resumed run
    repeats an uninterrupted one: it keeps the memory-efficient attention backward from splitting
    keys across blocks (accumulated with atomics; ATen's attention_backward.cu) and cuDNN's attention
    out of SDPA's choice. Off on the CPU, where the kernels sinkexp uses are deterministic already.
    """
    tf32 = precision == "tf32"
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    torch.backends.cudnn.allow_tf32 = tf32
    cuda = device.type == "cuda"
    if cuda:
        if os.environ.get(CUBLAS_WORKSPACE) not in DETERMINISTIC_WORKSPACES:
            raise ConfigError(
                f"{CUBLAS_WORKSPACE}={os.environ.get(CUBLAS_WORKSPACE)} makes cuBLAS nondeterministic; "
                f"unset it or choose one of: {', '.join(DETERMINISTIC_WORKSPACES)}"
            )
        torch.cuda.set_device(device)  # before this job's first allocation: no context on another GPU
    if torch.are_deterministic_algorithms_enabled() != cuda:
        # the setter imports torch._inductor (2 s on a CPU): called only to change the setting
        torch.use_deterministic_algorithms(cuda)


def usable_gpus() -> int:
    """How many GPUs this process may use (CUDA_VISIBLE_DEVICES applied by CUDA itself)."""
    return torch.cuda.device_count() if cuda_status()[0] else 0


def job_device(requested: str, job_num: int, gpus: int) -> str:
    """The device job `job_num` of a sweep trains on: with several GPUs an unindexed request (auto,
    cuda) takes GPU job_num mod gpus, so the sweep's jobs spread over all of them; an indexed one
    (cuda:1), cpu and a single GPU are left as asked."""
    if requested not in ("auto", "cuda") or gpus < 2:
        return requested
    return f"cuda:{job_num % gpus}"


def visible_gpus(env: str | None, count: int) -> list[str]:
    """The GPUs this process may use, each named as CUDA_VISIBLE_DEVICES names it for a child
    process: the first `count` entries of `env` (indices, UUIDs or MIG ids; CUDA stops at the first
    invalid entry, and torch's count says how many it kept), else the indices 0 .. count-1."""
    if env is None:
        return [str(i) for i in range(count)]
    return [entry.strip() for entry in env.split(",") if entry.strip()][:count]


def workers_per_gpu(free_bytes: int, job_bytes: int, cores: int, gpus: int) -> int:
    """How many pool workers share one GPU: as many as its free memory holds (each job's floor,
    memory.bytes_needed, plus its CUDA context), at most the cores per GPU (each worker's Python thread
    launches its kernels, and tiny models are bound by launches), at least one."""
    by_memory = free_bytes // (job_bytes + CONTEXT_BYTES)
    return max(1, min(by_memory, cores // max(1, gpus)))


def worker_gpus(gpus: list[str], workers: int) -> list[str]:
    """The GPU of each of `workers` pool workers, in turn, so that the first len(gpus) workers take
    different GPUs (a pool with fewer jobs than workers still uses them all)."""
    return [gpus[w % len(gpus)] for w in range(workers)] if gpus else []


def pin_worker(gpus: list[str], counter) -> None:
    """In a new pool worker: take the next GPU of `gpus` (a multiprocessing Value counts the
    workers) as its only visible one, before CUDA starts in the process."""
    if not gpus:
        return
    with counter.get_lock():
        index = counter.value
        counter.value += 1
    os.environ["CUDA_VISIBLE_DEVICES"] = gpus[index % len(gpus)]
