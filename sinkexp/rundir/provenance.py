"""What meta.json records about where and with what a run ran: the time, the source tree's commit,
the package versions and the device's name; `opening_meta` defines meta.json's fields, for training
and `sinkexp measure` alike (docs/rundir.md lists them).
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import torch

from sinkexp.rundir.files import SCHEMA_VERSION, utc_now

SOURCE_ROOT = Path(__file__).resolve().parents[2]  # the checkout holding sinkexp/ and configs/


def opening_meta(
    digest: str,
    requested: str,
    device: torch.device,
    *,
    identity: dict,
    device_extra: dict | None = None,
    versions_extra: dict | None = None,
    fields: dict | None = None,
    notes: dict | None = None,
    argv: list[str] | None = None,
) -> dict:
    """meta.json as a run opens it: the schema version and config hash `digest`, then `identity`
    (what the run is: training's seed; measure's command, model, dtype), the device (`requested`,
    the resolved `device`, its name, torch's threads, and `device_extra`: training's precision), the
    versions (with `versions_extra`: measure's transformers), git, `argv` (default sys.argv: this
    process's command line), the times (end_time and wall_time_s: None until RunClaim.end), then
    the caller's `fields` (training's steps_per_s, resumed_from_step, replica) and `notes` (launch's
    threads, allocator, denormals, followed). A field given twice is a ValueError: nothing overwrites another."""
    device_fields = {
        "requested": requested,
        "resolved": str(device),
        "name": device_name(device),
        "torch_threads": torch.get_num_threads(),
    }
    parts = [
        {"schema_version": SCHEMA_VERSION, "config_hash": digest},
        identity,
        {
            "device": merged(device_fields, device_extra or {}, where="meta.json's device"),
            "versions": merged(versions(), versions_extra or {}, where="meta.json's versions"),
            "git": git_state(),
            "argv": list(sys.argv if argv is None else argv),
            "start_time": utc_now(),
            "end_time": None,
            "wall_time_s": None,
        },
        fields or {},
        notes or {},
    ]
    return merged(*parts, where="meta.json")


def merged(*parts: dict, where: str) -> dict:
    """The dicts' entries in order; ValueError naming a key that two of them give."""
    out: dict = {}
    for part in parts:
        clash = sorted(set(out) & set(part))
        if clash:
            raise ValueError(f"{where} field {', '.join(clash)} given twice (rundir/provenance.py: opening_meta)")
        out.update(part)
    return out


def git_state(root: Path = SOURCE_ROOT) -> dict:
    """Commit of the checkout at `root` and whether its code (sinkexp/, configs/) has uncommitted
    changes; None for both outside a git checkout."""
    try:
        commit = git(root, "rev-parse", "HEAD")
        dirty = git(root, "status", "--porcelain", "--", "sinkexp", "configs") != ""
        return {"commit": commit, "dirty": dirty}
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10, check=True
    ).stdout.strip()


def versions() -> dict:
    found = {"python": platform.python_version()}
    for package in ("torch", "sinkexp", "hydra-core", "omegaconf", "pandas"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = None
    return found


def device_name(device: torch.device) -> str:
    """The GPU's name, or the CPU's model (from /proc/cpuinfo on Linux) and its usable cores."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    try:
        with open("/proc/cpuinfo") as info:
            model = next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
    except (OSError, StopIteration):
        model = platform.processor() or platform.machine()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{model}, {cores} cores"


def numerics() -> dict:
    """The process's float32 matmul settings and whether kernels must be deterministic
    (devices.configure sets them from `precision` and the device), with cuBLAS's workspace setting."""
    return {
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "cuda_matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "cublas_workspace_config": os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
    }
