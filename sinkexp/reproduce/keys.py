"""Config keys, their defaults and the config groups' options, read from the schema
(sinkexp/config/schema.py's dataclasses) and the option files of configs/, without torch, so that a
paper's declaration is checked in well under a second (declare.py)."""

from __future__ import annotations

import dataclasses
from functools import cache

from sinkexp.config.schema import Config, group_options, task_of
from sinkexp.errors import choices_error, closest
from sinkexp.tasks import TASKS

GROUPS = ("attn", "model", "task", "scale")  # config groups a grid or override may choose
DEFAULT_TASK = "trigger"  # configs/config.yaml's default


def key_problem(key: str, value, task: str) -> str:
    """'' when `key` is a config key of `task` (or a config group and `value` one of its options)
    and `value` fits the key's type; else what is wrong, naming the key and what is valid."""
    if key in GROUPS:
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


def defaults_of(schema) -> dict[str, object]:
    """A dataclass's fields -> their defaults."""
    return {
        f.name: f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
        for f in dataclasses.fields(schema)
    }


@cache
def config_keys(task: str) -> dict[str, object]:
    """Every config key of task option `task` -> its default, from the schema: the top level of
    `Config`, its sections' dataclasses, and the task's own dataclass."""
    keys = {}
    for name, default in defaults_of(Config).items():
        if dataclasses.is_dataclass(default):
            keys.update({f"{name}.{key}": value for key, value in defaults_of(default).items()})
        elif name != "task":
            keys[name] = default
    keys.update({f"task.{key}": value for key, value in defaults_of(TASKS[task_of(task)].Config).items()})
    return keys
