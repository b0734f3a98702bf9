"""Config keys, their defaults and the config groups' options, read from the schema
(sinkexp/config/schema.py's dataclasses) and the option files of configs/, without torch, so that a
paper's declaration is checked in well under a second (declare.py)."""

from __future__ import annotations

from sinkexp.config.schema import GROUPS, group_options
from sinkexp.config.typed import config_keys
from sinkexp.errors import choices_error, closest

GRID_GROUPS = tuple(group for group in GROUPS if group != "experiment")  # what a paper's grid may choose
DEFAULT_TASK = "trigger"  # configs/config.yaml's default


def key_problem(key: str, value, task: str) -> str:
    """'' when `key` is a config key of `task` (or a config group and `value` one of its options)
    and `value` fits the key's type; else what is wrong, naming the key and what is valid."""
    if key in GRID_GROUPS:
        options = group_options()[key]
        valid = value is None or value in options
        return "" if valid else str(choices_error(key, value, options))
    keys = config_keys(task)
    if key not in keys:
        parent = key.rpartition(".")[0]
        valid = sorted(k for k in keys if k.rpartition(".")[0] == parent)
        where = f"under {parent!r}" if parent else "at the top level"
        return f"{key}: unknown key for task={task}{closest(key, keys)}; valid keys {where}: {', '.join(valid)}"
    default = keys[key]
    kinds = [
        lambda x: isinstance(x, bool),
        lambda x: isinstance(x, (int, float)) and not isinstance(x, bool),
        lambda x: isinstance(x, str),
    ]
    fits = value is None or default is None or any(kind(value) and kind(default) for kind in kinds)
    return "" if fits else f"{key}={value!r} does not fit the key (its default is {default!r})"
