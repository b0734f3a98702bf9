"""Preset values that follow the user's override of the key they depend on: one override, one change.

A task or preset file gives such a value as an interpolation of one of the resolvers here, so a
user who changes the key it depends on gets a valid run, while a value the user sets is a plain value
and never changes:

    train.warmup: ${sinkexp_at_most:100,train.steps}         # task=lm: 100 steps, at most the run
    model.pos_into: ${sinkexp_if_positions:first_attn}        # task=damping: stream when nothing is added

`task=lm train.steps=60` then warms up over the run's 60 steps, and `task=damping model.pos=none`
places no positions, where each used to be refused for a default the user never set. The composed
config records the value that ran (config.yaml), and `followed` says what followed, for the run's
meta.json and log. Where the user sets both keys and they conflict, config.validate refuses with one
line naming both. For every run that was valid before, each resolver returns the preset's value, so
no config hash changes (tests/config/test_config.py pins a few).
"""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

ADDED_POSITIONS = ("learned", "sinusoidal")  # model.pos values that add a position vector (model.pos_into places it)


def at_most(preset: int, limit_key: str, *, _root_: DictConfig) -> int:
    """The preset's value, or the value of `limit_key` when that is smaller."""
    return min(preset, OmegaConf.select(_root_, limit_key))


def if_positions(preset: str, *, _root_: DictConfig) -> str:
    """The preset's placement of added positions, or `stream` (which has no effect) when model.pos adds none."""
    return preset if OmegaConf.select(_root_, "model.pos") in ADDED_POSITIONS else "stream"


RESOLVERS = {"sinkexp_at_most": at_most, "sinkexp_if_positions": if_positions}
WHY = {"sinkexp_at_most": "at most {}", "sinkexp_if_positions": "model.pos adds none"}  # for `followed`


def followed(composed: DictConfig) -> dict[str, list[str]]:
    """{"followed": one line per preset value of `composed` that gave way to another key, e.g.
    "train.warmup=60 (the preset's 100, at most train.steps)"}, for meta.json and the log; {} if none did."""
    lines = []

    def walk(node, prefix: str) -> None:
        for key, value in node.items():
            if isinstance(value, dict):
                walk(value, f"{prefix}{key}.")
                continue
            name, _, args = str(value).removeprefix("${").removesuffix("}").partition(":")
            if name in WHY and str(value).startswith("${"):
                preset, *depends = args.split(",")
                now = OmegaConf.select(composed, prefix + key)
                if str(now) != preset:
                    lines.append(f"{prefix}{key}={now} (the preset's {preset}, {WHY[name].format(*depends)})")

    walk(OmegaConf.to_container(composed, resolve=False), "")
    return {"followed": lines} if lines else {}
