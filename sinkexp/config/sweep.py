"""A command's KEY=VALUE overrides as the command layer read them, once (commands/overrides.py):
what jobs/plan.py composes and checks, with no override string read again below the command.

    sweep = read_sweep(["task=trigger", "attn=softmax,relu"], multirun=True)   # the command layer
    sweep.choices      # (("task", ("task=trigger",)), ("attn", ("attn=softmax", "attn=relu")))
    sweep.jobs()       # [["task=trigger", "attn=softmax"], ["task=trigger", "attn=relu"]]

A sweep of one job is `sinkexp train` without -m. Nothing here parses: the lines are Hydra's,
as the command layer read them.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

# Each key (as Hydra's get_key_element spells it: +experiment, ~key) with the KEY=VALUE line of
# each of its values: one, or a sweep's, in the order given.
Choices = tuple[tuple[str, tuple[str, ...]], ...]


def is_hydra_key(key: str) -> bool:
    """Whether an override's key or group is Hydra's own (hydra.sweep.dir, hydra/launcher)."""
    return key.startswith(("hydra.", "hydra/"))


def combinations(*given: Choices) -> list[list[str]]:
    """Every combination of the values, as Hydra's basic sweeper makes them: the keys in the order
    first given, a key given again taking the later values in its first place."""
    merged: dict[str, tuple[str, ...]] = {}
    for choices in given:
        merged.update(choices)
    return [list(combination) for combination in itertools.product(*merged.values())]


@dataclass(frozen=True)
class Sweep:
    """A command's overrides, read: `experiment=` as Hydra spells it, whole numbers as integers and
    a pack's first values appended (commands/overrides.py), split as plan() composes them."""

    overrides: tuple[str, ...]  # every override as read (the plan's)
    multirun: bool
    master: tuple[str, ...]  # the overrides without sweeps: the config composed first
    own: tuple[str, ...]  # sinkexp's keys (not Hydra's): the overrides a job of no sweep has
    choices: Choices  # the values of each of sinkexp's keys, a sweep's each a job's
    hydra: tuple[str, ...]  # Hydra's own overrides (hydra.*, hydra/*), every job's
    hydra_keys: tuple[str, ...]  # the hydra.* keys given (not groups), checked in every job's config
    master_hydra_keys: tuple[str, ...]  # of those, the keys not swept, checked in the master

    def jobs(self, grid: Choices = ()) -> list[list[str]]:
        """Each job's own overrides: the config's own sweeper params (`grid`: an experiment's)
        first, the command line's after, a key in both taking the command line's values."""
        return combinations(grid, self.choices)

    @property
    def size(self) -> int:
        """How many jobs the command line's values make (a config's sweeper params left out)."""
        return math.prod(len(lines) for _, lines in self.choices)
