"""A run's identity: the config hash that names its directory, and the resolvers Hydra's patterns call.

`config_hash` covers every setting that changes a run's result: not the UNHASHED_KEYS, nor a
LATER_KEYS key at its earlier value (config/schema.py), so that earlier runs keep their names; a CUDA
run's hash also covers its device kind. `register_resolvers` registers what configs/config.yaml's
directory patterns call (the hash, the process's UTC time, the sweep name) and the presets' values
that follow another key (config/follow.py).
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone

from omegaconf import DictConfig, OmegaConf

from sinkexp.config import follow
from sinkexp.config.schema import LATER_KEYS, UNHASHED_KEYS, Config, to_dict
from sinkexp.config.validate import from_dictconfig
from sinkexp.machine.devices import device_kind
from sinkexp.tasks import TASKS
from sinkexp.tasks.base import data_digest

# Keys renamed after run directories existed: they are hashed under their first name.
RENAMED_KEYS = {"attn.sigmoid_bias": "attn.bias"}


def config_hash(cfg: Config, kind: str | None = None) -> str:
    """Eight hex digits over every setting that changes the result (not the UNHASHED_KEYS); a CUDA run's (`kind`,
    default: what cfg.device trains on here) also over its device kind, so CPU runs keep their names."""
    settings = to_dict(cfg)
    if (kind or device_kind(cfg.device)) == "cuda":  # CUDA's generators draw other numbers than the CPU's
        settings["device_kind"] = "cuda"
    files = {
        f"task.{key}": data_digest(f"task.{key}", getattr(cfg.task, key))
        for key in getattr(TASKS[cfg.task.name], "data_files", ())
        if getattr(cfg.task, key)
    }
    if files:  # a data file's content is part of the run: an edited file is a new run
        settings["data_files"] = files
    for key in (*UNHASHED_KEYS, *LATER_KEYS, *RENAMED_KEYS):
        *parents, leaf = key.split(".")
        node = settings
        for parent in parents:
            node = node[parent]
        if leaf not in node:  # a key only some tasks have (task.sampler)
            continue
        if key in RENAMED_KEYS:
            node[RENAMED_KEYS[key].rsplit(".", 1)[-1]] = node.pop(leaf)
        elif key in UNHASHED_KEYS or node[leaf] == LATER_KEYS[key]:
            del node[leaf]
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:8]


def register_resolvers() -> None:
    """The resolvers configs/config.yaml's directory patterns use, and the presets' values that follow
    another key (config/follow.py); idempotent (one timestamp per process)."""
    if OmegaConf.has_resolver("sinkexp_utc_now"):
        return
    started = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    hashes: dict[str, str] = {}  # Hydra resolves the pattern several times per job

    def hash_of(*, _root_: DictConfig) -> str:
        plain = json.dumps(
            {
                key: OmegaConf.to_container(_root_[key], resolve=True)
                if OmegaConf.is_config(_root_[key])
                else _root_[key]
                for key in _root_
                if key != "hydra"
            },
            sort_keys=True,
            default=str,
        )
        if plain not in hashes:
            hashes[plain] = config_hash(from_dictconfig(_root_, check=False))  # validated by the plan already
        return hashes[plain]

    resolvers = {
        "sinkexp_utc_now": lambda: started,
        "sinkexp_sweep_name": lambda name: name if name else started,
        "sinkexp_config_hash": hash_of,
        **follow.RESOLVERS,
    }
    for name, resolver in resolvers.items():
        OmegaConf.register_new_resolver(name, resolver)
