"""The run directory: the only interface between training and reporting (SPEC section 2).

Every file is written atomically (a temporary file in the same folder, then os.replace), so a run
killed at any moment leaves either the old file or the new one. `DONE` is written last; a failed
run writes `FAILED` with the error instead; a run with neither is incomplete (and resumable when it
has a checkpoint).
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import torch

SCHEMA_VERSION = 1
CONFIG, META, METRICS, LOSSES, SUMMARY = "config.yaml", "meta.json", "metrics.csv", "losses.csv", "summary.json"
CHECKPOINT, DONE, FAILED, ATTENTION = "checkpoint.pt", "DONE", "FAILED", "attention.npz"


def _atomic(path: Path, write) -> None:
    """Call write(temp_path), then move the temporary file over `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text(path: Path, text: str) -> None:
    _atomic(path, lambda tmp: Path(tmp).write_text(text))


def write_json(path: Path, obj) -> None:
    write_text(path, json.dumps(obj, indent=2) + "\n")


def write_csv(path: Path, frame: pd.DataFrame) -> None:
    _atomic(path, lambda tmp: frame.to_csv(tmp, index=False))


def write_arrays(path: Path, arrays: dict) -> None:
    def write(tmp):
        with open(tmp, "wb") as handle:   # a file object, so numpy does not append ".npz" to the name
            np.savez(handle, **arrays)
    _atomic(path, write)


def save_checkpoint(path: Path, state: dict) -> None:
    _atomic(path, lambda tmp: torch.save(state, tmp))


def read_json(path: Path) -> dict:
    return json.loads(Path(path).read_text())


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def git_state() -> dict:
    """Commit and dirty flag of the sinkexp source tree (None outside a git checkout)."""
    source = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(["git", "-C", str(source), "rev-parse", "HEAD"], capture_output=True,
                                text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(source), "status", "--porcelain", "--", "sinkexp", "configs"],
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip() != ""
        return {"commit": commit, "dirty": dirty}
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}


def versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    found = {"python": platform.python_version()}
    for package in ("torch", "sinkexp", "hydra-core", "omegaconf", "pandas"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = None
    return found


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return platform.processor() or platform.machine()


def start_meta(*, seed: int, config_hash: str, requested_device: str, device: torch.device) -> dict:
    return {"schema_version": SCHEMA_VERSION, "config_hash": config_hash, "seed": seed,
            "device": {"requested": requested_device, "resolved": str(device), "name": device_name(device),
                       "torch_threads": torch.get_num_threads()},
            "versions": versions(), "git": git_state(), "argv": sys.argv,
            "start_time": utc_now(), "end_time": None, "wall_time_s": None, "steps_per_s": None}
