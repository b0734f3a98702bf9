"""An experiment of a paper: fixed overrides, a grid, and its sizes at each scale (declare.py).

    Experiment(name="one_layer", overrides={"task": "trigger"},
               grid={"attn": ("softmax", "relu"), "seed": (0, 1, 2)}, cpu={"train.steps": 1000},
               reach={"train.steps": 4000})

Grids are Python values, expanded as Hydra sweeps in the order given. `cpu` holds the sizes the
experiment runs at with `scale=cpu` (the default); `reach` changes them at `scale=reach` (the
smallest sizes at which its phenomenon forms on 2 CPU cores); `scale=paper` drops both, so the
config group `scale` is the one switch between CPU sizes and configs/task_scale/'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import PurePath

from sinkexp.config.arguments import override_value
from sinkexp.hf.shipped import SHIPPED
from sinkexp.reproduce.keys import DEFAULT_TASK, GRID_GROUPS

INIT = "init"  # a Checkpoint's `untrained`: its architecture at random initialisation (measure's init=)
TRAINED, UNTRAINED = "trained", "untrained"  # below a checkpoint's folder: its measurements and the untrained ones


@dataclass(frozen=True, kw_only=True)
class Experiment:
    name: str  # its folder under outputs/reproduce/<paper>/
    overrides: dict = field(default_factory=dict)  # fixed settings, e.g. {"task": "damping"}
    grid: dict = field(default_factory=dict)  # swept key -> values, e.g. {"seed": (0, 1, 2)}
    cpu: dict = field(default_factory=dict)  # sizes at scale=cpu (sinkexp's choice), e.g. {"train.steps": 500}
    # At scale=reach: changes to the CPU sizes that let the experiment's phenomenon form on 2 CPU cores
    # (sinkexp's; a tuple replaces a grid's values, e.g. fewer draws); none: the CPU sizes.
    reach: dict = field(default_factory=dict)

    @property
    def task(self) -> str:
        return self.overrides.get("task", DEFAULT_TASK)

    def values(self, key: str) -> tuple | None:
        """The values this experiment's runs take for `key` (None: the config's default)."""
        group = key.removesuffix(".name")
        for name in (key, group) if key.endswith(".name") and group in GRID_GROUPS else (key,):
            if name in self.grid:
                return tuple(self.grid[name])
            if name in self.overrides:
                return (self.overrides[name],)
        return None

    def at(self, scale: str) -> tuple[dict, dict]:
        """(its sizes, its grid) at `scale`: the CPU sizes at cpu, with the reach changes at reach,
        none at another scale (configs/task_scale/ sets those)."""
        if scale == "cpu":
            return self.cpu, self.grid
        if scale == "reach":
            swept = {k: v for k, v in self.reach.items() if isinstance(v, tuple)}
            return ({**self.cpu, **{k: v for k, v in self.reach.items() if k not in swept}}, {**self.grid, **swept})
        return {}, self.grid

    def argv(self, scale: str = "cpu", pack: tuple[str, ...] = ()) -> list[str]:
        """Its Hydra overrides at `scale`: the fixed ones, the sizes, the grid as sweeps, except the
        grid keys in `pack`, whose values go into one `pack={key: [values]}` (each job then trains
        its combinations of them in one process: sinkexp/train/replicas.py)."""
        sizes, grid = self.at(scale)
        packed = {k: v for k, v in grid.items() if k in pack}
        return (
            [f"{k}={override_value(v)}" for k, v in {**self.overrides, **sizes}.items()]
            + [f"{k}={','.join(map(override_value, v))}" for k, v in grid.items() if k not in packed]
            + ["pack={" + ",".join(f"{k}:[{','.join(map(override_value, v))}]" for k, v in packed.items()) + "}"]
            * bool(packed)
        )

    @property
    def runs(self) -> int:
        return math.prod(len(v) for v in self.grid.values())


@dataclass(frozen=True, kw_only=True)
class Checkpoint:
    """A named open checkpoint a paper reports on, measured (`sinkexp measure`), not trained: one
    run, or one per draw (a text and a window of it), which needs the model's weights on this machine
    (reproduce/checkpoints.py). `untrained` names the same model's untrained revision where one is
    published (Pythia's step0), or INIT: the architecture at transformers' own random initialisation,
    seeded with `seed`, so that a claim on it can be checked for whether it could have failed. A
    checkpoint sinkexp ships (hf/shipped.py) is judged at scale=pretrained only (reproduce/scales.py)."""

    name: str  # its folder under outputs/reproduce/<paper>/
    model: str  # the hub id, e.g. "openai-community/gpt2-xl", or a shipped name ("smollm2-135m")
    revision: str | None = None
    untrained: str | None = None  # the revision of the untrained model, if published; INIT: at random init
    seed: int = 0  # with untrained=INIT: the seed of the random initialisation
    settings: dict = field(default_factory=dict)  # `sinkexp measure` keys (n, seq_len, bos, dtype, ...)
    # measure keys that vary from run to run, one run each (e.g. {"text": "kjv", "skip": 6400}); none: one run
    draws: tuple[dict, ...] = ()
    grid: dict = field(default_factory=dict)  # none: the claims' `where` selects nothing
    overrides: dict = field(default_factory=dict)
    cpu: dict = field(default_factory=dict)
    reach: dict = field(default_factory=dict)
    task: str = "checkpoint"

    def values(self, key: str) -> tuple | None:
        return None

    def argv(self, scale: str = "cpu", pack: tuple[str, ...] = ()) -> list[str]:
        return []

    @property
    def shipped(self) -> bool:
        return self.model in SHIPPED

    @property
    def runs(self) -> int:
        return max(1, len(self.draws))

    def measured(self) -> list[tuple[str, dict]]:
        """(its run's folder below the checkpoint's, its measure settings) for each run: TRAINED, or
        TRAINED/<text>@<skip> for each draw (the run's label in claims.csv)."""
        if not self.draws:
            return [(TRAINED, dict(self.settings))]
        return [(f"{TRAINED}/{draw_label(draw)}", {**self.settings, **draw}) for draw in self.draws]


def draw_label(draw: dict) -> str:
    """A draw's name: its text (a built-in name or a file's name) and the tokens it skips, e.g. kjv@6400."""
    return f"{PurePath(str(draw.get('text', 'kjv'))).name}@{draw.get('skip', 0)}"
