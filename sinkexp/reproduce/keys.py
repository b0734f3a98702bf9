"""Config keys, their defaults and the config groups' options, read from configs/ without torch, so
that a paper's declaration is checked in well under a second (declare.py). A test checks that the
keys read here are exactly the schema's (sinkexp/config.py)."""
from __future__ import annotations

from functools import cache
from importlib.resources import files

from omegaconf import OmegaConf

GROUPS = ("attn", "model", "train", "eval", "task", "scale")   # config groups a grid or override may choose
DEFAULT_TASK = "trigger"                                        # configs/config.yaml's default


def key_problem(key: str, value, task: str) -> str:
    """'' when `key` is a config key of `task` (or a config group and `value` one of its options)
    and `value` fits the key's type; else what is wrong, naming the key and what is valid."""
    groups = group_options()
    if key in GROUPS:
        options = groups[key]
        valid = value is None or value in options
        return "" if valid else f"{key}={value!r} is not valid; choose one of: {', '.join(options)}"
    keys = config_keys(task)
    if key not in keys:
        parent = key.rpartition(".")[0]
        valid = sorted(k for k in keys if k.rpartition(".")[0] == parent)
        where = f"under {parent!r}" if parent else "at the top level"
        return f"{key}: unknown key for task={task}; valid keys {where}: {', '.join(valid)}"
    default = keys[key]
    kinds = [lambda x: isinstance(x, bool), lambda x: isinstance(x, (int, float)) and not isinstance(x, bool),
             lambda x: isinstance(x, str)]
    fits = value is None or default is None or any(kind(value) and kind(default) for kind in kinds)
    return "" if fits else f"{key}={value!r} does not fit the key (its default is {default!r})"


@cache
def group_options() -> dict[str, tuple[str, ...]]:
    """Every config group's options (configs/<group>/*.yaml)."""
    root = files("sinkexp.conf")
    return {group: tuple(sorted(f.name.removesuffix(".yaml") for f in root.joinpath(group).iterdir()
                                if f.name.endswith(".yaml"))) for group in GROUPS}


@cache
def config_keys(task: str) -> dict[str, object]:
    """Every config key of `task` -> its default, read from configs/ (no torch): the top level of
    config.yaml, each group's default file (model/default.yaml's commented list), every attn
    preset's keys, and the task's file. A test
    checks that this equals the schema's keys (sinkexp/config.py)."""
    root = files("sinkexp.conf")
    top = OmegaConf.to_container(OmegaConf.load(root.joinpath("config.yaml")))
    keys = {key: value for key, value in top.items() if key not in ("defaults", "hydra")}
    sections = [("model", "model/default.yaml"), ("train", "train/default.yaml"), ("eval", "eval/default.yaml"),
                ("task", f"task/{task}.yaml")]
    sections += [("attn", f"attn/{name}.yaml") for name in group_options()["attn"]]
    for section, path in sections:
        text = root.joinpath(path).read_text()
        if path == "model/default.yaml":   # sets nothing (a preset comes after the task); lists the defaults commented
            text = "\n".join(line.removeprefix("#   ") for line in text.splitlines() if line.startswith("#   "))
        node = OmegaConf.to_container(OmegaConf.create(text))
        node = node[section] if section == "task" else node   # task files are @package _global_
        for key, value in node.items():
            if not isinstance(value, dict):
                keys.setdefault(f"{section}.{key}", value)
    return keys
