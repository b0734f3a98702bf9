"""From settings to a checked dataclass: the one way every command's settings are typed.

A dataclass is the schema; its values merge into `OmegaConf.structured(schema)` and `to_object` gives
the dataclass back (lingua's `args.py` does the same in seven lines). `train`'s composed config goes
through `merged` (config/validate.py), measure's, intervene's and export's through `typed`
(config/settings.py), so each command refuses alike, in one line naming the key: an unknown key with
the closest one and the valid ones beside it, a value its type cannot take (`n=2.5`: a whole number;
`perturb=maybe`: true or false). A whole number written as a float (`train.steps=1e3`, `n=1e2`: Hydra
reads 1000.0) is the integer it is, for the keys the schema types as integers. No torch here.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import typing
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigKeyError

from sinkexp.config.schema import Config, task_of
from sinkexp.errors import ConfigError, omegaconf_message, unknown_key
from sinkexp.tasks import TASKS

WHOLE = "a whole number (e.g. 1000 or 1e3)"


def typed(schema: type, values: dict[str, Any]):
    """An instance of the dataclass `schema` holding `values` ({key: Python value}), checked by type;
    ConfigError naming the key."""
    fields = {field.name: field for field in dataclasses.fields(schema)}
    for key in values:
        meant = [name for name, field in fields.items() if key in field.metadata.get("instead_of", ())]
        if key not in fields and meant:  # another command's key for one of ours (train's hydra.run.dir: dir)
            raise unknown_key(key, fields, "", meant=meant[0])
    ints = integer_keys(schema)
    values = {key: whole_number(key, value) if key in ints else value for key, value in values.items()}
    return merged(OmegaConf.structured(schema), values, "")


def merged(schema: DictConfig, values: dict, section: str):
    """`values` merged into the typed `schema` (a structured config), as its dataclass; ConfigError
    naming the key: an unknown one (`+train.foo=1`, which Hydra adds) with the valid keys beside it."""
    try:
        return OmegaConf.to_object(OmegaConf.merge(schema, values))
    except ConfigKeyError as err:  # the key's place: its section's keys are the valid ones
        key = ".".join(filter(None, (section, err.full_key)))
        parent = key.rpartition(".")[0]
        inner = parent.removeprefix(section).lstrip(".")
        node = OmegaConf.select(schema, inner, default=None) if inner else schema
        if not OmegaConf.is_dict(node):  # a section the schema does not have: the key among the top level's
            node, parent = schema, section
        raise unknown_key(key, [str(k) for k in node.keys()], parent) from None
    except Exception as err:  # omegaconf's ValidationError carries the full key
        raise ConfigError(omegaconf_message(err)) from None


def whole_number(key: str, value: Any, given: str | None = None) -> Any:
    """`value` as an integer where it is a whole float (1e3 -> 1000); ConfigError for a float that is
    not whole (`given`: the value as the user wrote it, for the message); any other value as it is."""
    if not isinstance(value, float):
        return value
    if not (math.isfinite(value) and value.is_integer()):
        raise ConfigError(f"{key}={given if given is not None else value} is not valid; it must be {WHOLE}")
    return int(value)


@functools.cache
def integer_keys(schema: type, prefix: str = "") -> frozenset[str]:
    """The dotted keys a dataclass types as integers (int or Optional[int]), its sections' included."""
    hints, keys = typing.get_type_hints(schema), set()
    for field in dataclasses.fields(schema):
        kind = hints[field.name]
        if dataclasses.is_dataclass(kind):
            keys |= integer_keys(kind, f"{prefix}{field.name}.")
        elif kind is int or int in typing.get_args(kind):
            keys.add(prefix + field.name)
    return frozenset(keys)


@functools.cache
def train_integer_keys() -> frozenset[str]:
    """`sinkexp train`'s integer keys: the root schema's and task.* of every task's."""
    return integer_keys(Config).union(*(integer_keys(task.Config, "task.") for task in TASKS.values()))


def defaults_of(schema) -> dict[str, object]:
    """A dataclass's fields -> their defaults."""
    return {
        f.name: f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
        for f in dataclasses.fields(schema)
    }


@functools.cache
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
