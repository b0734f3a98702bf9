"""A run directory as files: names, atomic writes, the lock and who holds it. Reading a run back
(settings, tables, its status, whether it is whole) is rundir/reading.py's; DONE's manifest is
rundir/manifest.py's. Neither imports torch or model
code (docs/rundir.md is their contract). What may happen to a directory while a run trains (config hash,
checkpoint, resume) is rundir/lifecycle.py's job, built on these writers and on the lock here (`take_lock`
while a process trains the run, `wait_for_lock` for a command whose run another process trains,
`lock_holder` for a reader asking whether a run is running).

Every write is atomic (a temporary file in the same folder, then os.replace), so a run killed at
any moment leaves either the old file or the new one, and a write that fails (a full disk, a
read-only file system, ...) is a RunFileError naming the file, its cause and what to do (rundir/faults.py).
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import json
import math
import os
import platform
import shutil
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from sinkexp.rundir.faults import run_file_error

if TYPE_CHECKING:
    import pandas as pd

SCHEMA_VERSION = 1
CONFIG, META, METRICS_CSV, LOSSES, SUMMARY = "config.yaml", "meta.json", "metrics.csv", "losses.csv", "summary.json"
CHECKPOINT, DONE, FAILED, ATTENTION = "checkpoint.pt", "DONE", "FAILED", "attention.npz"
LOCK = ".lock"  # held by the process that trains the run (files.take_lock)
KEPT = "checkpoints"  # checkpoints/step_<N>.pt with train.keep_checkpoints
MASSIVE = "massive.csv"  # a measure run's layerwise massive-activation profile (hf/record.py)
PROBED = 20  # tries, 5 ms apart, before a lock held by a reader's probe counts as another process's


def kept_checkpoint(step: int) -> str:
    return f"{KEPT}/step_{step:06d}.pt"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


UMASK = _umask()


class RunDirError(RuntimeError):
    """The run directory holds something this run must not overwrite."""


class RunBusy(RunDirError):
    """Another live process holds the run directory's lock."""


def _atomic(path: Path, write) -> None:
    """Call write(temp_path), then move the temporary file over `path`; any OSError becomes a
    RunFileError naming `path` (rundir/faults.py), and the file it would have replaced is untouched."""
    path = Path(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        os.fchmod(fd, 0o666 & ~UMASK)  # mkstemp makes 0600; results are shared as the user's umask allows
        os.close(fd)
        write(tmp)
        os.replace(tmp, path)
    except BaseException as err:
        if tmp is not None:
            with contextlib.suppress(OSError):
                Path(tmp).unlink(missing_ok=True)
        if isinstance(err, OSError):
            raise run_file_error(err, path, "write") from None
        raise


def write_bytes(path: Path, data: bytes) -> None:
    _atomic(path, lambda tmp: Path(tmp).write_bytes(data))


def write_text(path: Path, text: str) -> None:
    _atomic(path, lambda tmp: Path(tmp).write_text(text))


def write_json(path: Path, obj) -> None:
    """Strict JSON: a value that is not finite becomes null, and `non_finite` lists where and what it was."""
    found: dict[str, str] = {}

    def strict(node, where: str):
        if isinstance(node, float) and not math.isfinite(node):
            found[where] = str(node)
            return None
        if isinstance(node, dict):
            return {key: strict(value, f"{where}.{key}" if where else str(key)) for key, value in node.items()}
        if isinstance(node, (list, tuple)):
            return [strict(value, f"{where}[{i}]") for i, value in enumerate(node)]
        return node

    clean = strict(obj, "")
    if found and isinstance(clean, dict):
        clean["non_finite"] = found
    write_text(path, json.dumps(clean, indent=2, allow_nan=False) + "\n")


def write_csv(path: Path, frame: pd.DataFrame) -> None:
    _atomic(path, lambda tmp: frame.to_csv(tmp, index=False))


def write_rows(path: Path, columns: list[str], rows: list[tuple]) -> None:
    """Rows as CSV, byte for byte what pandas' to_csv(index=False) writes for the DataFrame of these
    rows (a run writes its tables without importing pandas): a column that holds a float writes
    its integers as floats, NaN as an empty field, floats as their shortest repr."""
    floats = [any(isinstance(row[i], float) for row in rows) for i in range(len(columns))]

    def cell(value, as_float: bool):
        if as_float:
            value = float(value)
            return "" if value != value else repr(value)
        return value

    def write(tmp):
        with open(tmp, "w", newline="") as handle:
            out = csv.writer(handle, lineterminator="\n")
            out.writerow(columns)
            out.writerows([cell(value, as_float) for value, as_float in zip(row, floats)] for row in rows)

    _atomic(path, write)


def write_arrays(path: Path, arrays: dict) -> None:
    def write(tmp):
        with open(tmp, "wb") as handle:  # a file object, so numpy does not append ".npz" to the name
            np.savez(handle, **arrays)

    _atomic(path, write)


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def read_json(path: Path) -> dict:
    return json.loads(Path(path).read_text())


def finished(path: Path, digest: str | None = None) -> bool:
    """Whether the run in `path` finished (DONE), as the run of config hash `digest` when given:
    the one test of "finished" that the plan, the launchers and reproduce's pool share. Whether it
    is still whole is rundir/reading.py's `run_status` (the manifest)."""
    if not (Path(path) / DONE).exists():
        return False
    try:
        return digest is None or read_json(Path(path) / META).get("config_hash") == digest
    except (OSError, ValueError):
        return False


def copy_finished(source: Path, path: Path) -> None:
    """Copy the finished run in `source` to `path` (which does not exist yet) atomically: a temporary
    sibling (one a killed copy left is replaced), renamed; the lock file stays behind."""
    partial = Path(path).with_name(f".{Path(path).name}.copying")
    shutil.rmtree(partial, ignore_errors=True)
    shutil.copytree(source, partial, ignore=shutil.ignore_patterns(LOCK))
    os.replace(partial, path)


def take_lock(path: Path) -> int:
    """An exclusive flock on <path>/.lock (across nodes as far as the file system's flock goes:
    docs/rundir.md); RunBusy if a live process holds it, RunDirError if the file system cannot lock.
    The file keeps the last holder's pid and host, for the message."""
    try:
        fd = os.open(path / LOCK, os.O_RDWR | os.O_CREAT, 0o666)  # the umask applies
    except OSError as err:
        raise run_file_error(err, path / LOCK, "write") from None
    try:
        for attempt in range(PROBED):  # a reader's probe (lock_holder) holds a shared lock for microseconds
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if attempt == PROBED - 1:
                    raise
                time.sleep(0.005)
    except BlockingIOError:
        holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
        os.close(fd)
        raise RunBusy(f"{path} is being trained by {holder}") from None
    except OSError as err:  # a file system without flock (Lustre mounted noflock, ...)
        os.close(fd)
        raise RunDirError(
            f"cannot lock {path / LOCK} ({err.strerror}): this file system does not support "
            "flock; put the outputs on one that does (hydra.run.dir / hydra.sweep.dir; "
            "docs/rundir.md)"
        ) from None
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {platform.node()}\n".encode(), 0)
    except OSError as err:  # the lock is held, but the file cannot take the holder's name
        os.close(fd)
        raise run_file_error(err, path / LOCK, "write") from None
    return fd


def lock_holder(path: Path, wait=None) -> str | None:
    """Who holds the run's lock now ("pid N on HOST"), or None: no lock file, nobody holds it, or a
    file system that cannot lock. The probe takes a shared lock and lets go at once (take_lock
    retries for it). With `wait`: wait(holder) is called, then the probe blocks until the holder lets go."""
    try:
        fd = os.open(Path(path) / LOCK, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
            if wait is not None:
                wait(holder)
                fcntl.flock(fd, fcntl.LOCK_SH)
            return holder
    except OSError:  # a file system that cannot lock: no holder
        pass
    finally:
        os.close(fd)
    return None


def wait_for_lock(path: Path, waiting=lambda holder: None) -> None:
    """Return once no process holds the run's lock, calling waiting(holder) first if one does
    (holder: "pid N on HOST"). At once for a run without the lock or a file system that cannot lock."""
    lock_holder(path, wait=waiting)
