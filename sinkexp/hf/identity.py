"""A `sinkexp measure` run's identity: the hash of what it measured, its directory's name, the
checkpoint's step, and what its config.yaml records. The settings themselves are typed in
config/settings.py (MeasureConfig); nothing here touches a model.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from pathlib import Path

from sinkexp.config.settings import MeasureConfig

UNHASHED = ("step", "device", "dir", "name")  # a label and bookkeeping: the same measurement


def checkpoint_step(cfg: MeasureConfig, model_config) -> int:
    """The measured checkpoint's training step: step=, else a revision stepN (Pythia's), else an
    exported sinkexp run's step (config.json's `sinkexp` entry), else -1 (unknown)."""
    if cfg.step is not None:
        return cfg.step
    found = re.fullmatch(r"step(\d+)", cfg.revision or "")
    if found:
        return int(found.group(1))
    exported = getattr(model_config, "sinkexp", None)
    return int(exported["step"]) if isinstance(exported, dict) and "step" in exported else -1


def measure_hash(cfg: MeasureConfig, model_digest: str, text_digest: str) -> str:
    """Eight hex digits over what changes the measurement: the model's files (model_digest), the
    text's content, and every setting but UNHASHED; `chunk` only where it splits the sequences."""
    settings = {key: value for key, value in dataclasses.asdict(cfg).items() if key not in UNHASHED}
    settings.update(
        model=model_digest,
        text=text_digest,
        revision=None,
        chunk=cfg.chunk if cfg.chunk is not None and cfg.chunk < cfg.n else None,
    )
    for key, default in (("perturb", False), ("skip", 0), ("init", None)):  # keys added later: the runs
        if settings[key] == default:  # measured before them keep their hashes
            del settings[key]
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:8]


def run_dir(cfg: MeasureConfig, multirun: bool, digest: str, started: str) -> Path:
    """One run: dir=, or outputs/runs/measure/<model>/<UTC time>-<hash>; a sweep's run:
    <dir= or outputs/sweeps/<name or UTC time>>/measure/<model>/<revision or main>[_<key=value>...]-<hash>,
    with each measured setting that is not the default (e.g. main_bos=false_n=16-<hash>)."""
    local = Path(cfg.model).expanduser()
    model = safe(local.resolve().name if local.exists() else cfg.model.rstrip("/").replace("/", "--"))
    if not multirun:
        return Path(cfg.dir or f"outputs/runs/measure/{model}/{started}-{digest}").absolute()
    name = "_".join([cfg.revision or "main", *changed_settings(cfg)])
    return sweep_folder(cfg, started) / "measure" / model / f"{safe(name)}-{digest}"


def sweep_folder(cfg: MeasureConfig, started: str) -> Path:
    """A measure sweep's folder: dir=, or outputs/sweeps/<name or UTC time>."""
    return Path(cfg.dir or f"outputs/sweeps/{cfg.name or started}").absolute()


# what sweep folder names show (when not default)
NAMED = ("text", "n", "seq_len", "bos", "dtype", "perturb", "skip", "init")


def changed_settings(cfg: MeasureConfig) -> list[str]:
    """key=value for each of NAMED that differs from the default (a text file by its file name)."""
    default = MeasureConfig()
    changed = [key for key in NAMED if getattr(cfg, key) != getattr(default, key)]
    value = {key: str(getattr(cfg, key)).lower() if key == "perturb" else getattr(cfg, key) for key in changed}
    return [f"{key}={Path(cfg.text).name if key == 'text' else value[key]}" for key in changed]


def safe(name: str) -> str:
    """A folder name: characters other than letters, digits and . = - _ become _."""
    return re.sub(r"[^\w.=-]", "_", name)


def as_written(cfg: MeasureConfig, step: int, model_config) -> dict:
    """config.yaml of a measure run: its settings (not dir and name: bookkeeping), the checkpoint's
    step (rundir.reading.last_step reads it) and what was measured."""
    settings = {key: value for key, value in dataclasses.asdict(cfg).items() if key not in ("dir", "name")}
    return {
        "command": "measure",
        **settings,
        "step": step,
        "measured": {
            "model_type": model_config.model_type,
            "n_layers": model_config.num_hidden_layers,
            "n_heads": model_config.num_attention_heads,
            "vocab_size": model_config.vocab_size,
        },
    }
