"""The batch every task sampler returns, the per-position loss the regression tasks share, and
the one way a task reads a data file (so that its content, not only its path, names the run)."""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from stat import S_IFBLK, S_IFCHR, S_IFDIR, S_IFIFO, S_IFMT, S_IFSOCK, S_ISREG

from sinkexp.errors import ConfigError
from sinkexp.tasks.lazy import torch


@dataclass
class Batch:
    inputs: torch.Tensor  # (B, T, input_dim) float, or (B, T) long for token tasks
    targets: torch.Tensor  # (B, T, output_dim) float, or (B, T) long
    loss_mask: torch.Tensor  # (B, T) bool: positions that count in the loss
    query_type: torch.Tensor  # (B, T) long: index into the task's query_types, -1 = not a query
    sink: torch.Tensor  # (B,) long: the sink position of each sequence (BOS = 0)


@dataclass
class Dims:
    """A task's sizes, known from its config without building it (for checks before any work)."""

    seq_len: int
    input_dim: int | None  # width of vector inputs (None for token tasks)
    vocab_size: int | None  # number of token ids (None for vector tasks)
    output_dim: int
    structure: int  # numbers in the task's fixed structure (gate, rotation, table)


def direction(d: int, generator: torch.Generator, centred: bool) -> torch.Tensor:
    """A random unit vector in R^d; `centred` projects it off the all-ones direction first.

    Every read of the residual stream passes a LayerNorm, which removes each token's mean over the
    channels, so a direction's component along (1, ..., 1) is invisible to the model: a task that
    decides by <x, u> must draw u with mean 0 over the channels, or part of its decision cannot be
    learned (with u ~ N(0, I_64), cos(u, 1) is ~0.09 by chance).
    """
    u = torch.randn(d, generator=generator)
    if centred:
        u = u - u.mean()
    return u / u.norm()


def mse(pred: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Squared error averaged over the channels: (B, T, C) x2 -> (B, T)."""
    return (pred - targets).pow(2).mean(-1)


# Data files sinkexp ships (sinkexp/data/), named by a word instead of a path in a task's config: the KJV,
# task=lm's corpus, and the text samples `sinkexp measure text=NAME` and the claims on pre-trained
# checkpoints read (scripts/build_texts.py says what each is and its licence)
BUILT_IN = {
    "kjv": "kjv.txt.xz",
    "argparse": "argparse.py.xz",
    "sinkexp-docs": "sinkexp-docs.md.xz",
    "sinkexp-code": "sinkexp-code.py.xz",
}


def data_path(value: str) -> str:
    """The file a data-file setting names: a built-in file's packaged path, or the path itself."""
    if value in BUILT_IN:
        return str(files("sinkexp").joinpath("data", BUILT_IN[value]))
    return value


def read_data_file(key: str, path: str) -> bytes:
    """The bytes of a task's data file (config key `key`: a path or a BUILT_IN name), read once per
    process and file version (path, size, modification time): checking a config, naming its run
    and building the task share it."""
    path = data_path(path)
    try:
        stat = Path(path).stat()
        resolved = str(Path(path).resolve())
    except OSError as err:
        raise ConfigError(f"{key}={path}: cannot be read ({err.__class__.__name__})") from None
    if not S_ISREG(stat.st_mode):  # a named pipe would block the read until killed; a device never ends
        raise ConfigError(f"{key}={path} is {FILE_KINDS.get(S_IFMT(stat.st_mode), 'not a file')}; give a regular file")
    return _read(key, path, resolved, stat.st_size, stat.st_mtime_ns)


FILE_KINDS = {
    S_IFDIR: "a folder",
    S_IFIFO: "a named pipe",
    S_IFSOCK: "a socket",
    S_IFCHR: "a device",
    S_IFBLK: "a device",
}


@functools.lru_cache(maxsize=8)
def _read(key: str, path: str, resolved: str, size: int, mtime_ns: int) -> bytes:
    try:
        return Path(resolved).read_bytes()
    except OSError as err:
        raise ConfigError(f"{key}={path}: cannot be read ({err.__class__.__name__})") from None


def data_digest(key: str, path: str) -> str:
    """SHA-256 of a data file's content (part of the config hash: an edited file is a new run)."""
    return hashlib.sha256(read_data_file(key, path)).hexdigest()
