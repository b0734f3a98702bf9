"""What a claim measures on one finished run: a final metric, an extreme over heads or layers, a
loss ratio, or a causal intervention's effect.

Each constructor returns a Measure (declare.py) that names the metrics it reads, so a paper file
with a misspelt metric is refused on import. A value a run does not have (a query type the task
lacks, a layer the model lacks) raises MissingValue: the claim is then **not run**, with that problem
as its why, never judged on a NaN that would read as a scientific result. Interventions load the model (torch) only when
a claim asks for them, once per run however many claims read them.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from sinkexp.evaluate.tables import final_values
from sinkexp.reproduce.claims import Measure
from sinkexp.rundir.files import ATTENTION, finished
from sinkexp.rundir.reading import RunFiles, collect, setting


class MissingValue(LookupError):
    """The run has no such value; the message says which."""


@dataclass
class FinishedRun:
    """One finished run as a claim sees it: its settings (dotted keys), final values and files."""

    path: Path
    settings: dict
    finals: pd.DataFrame  # final values: layer, query_type, metric, value (mean over heads)
    experiment: str = ""  # the experiment (folder below the paper) the run belongs to
    analyses: dict = field(default_factory=dict, repr=False)  # (analysis, args) -> its result
    untrained: bool = False  # this view is the run at step 0 (its `initial`)

    @property
    def label(self) -> str:
        """s<seed>/t<structure seed>: the draw, which pairs and groups runs across settings."""
        return (
            "/".join(
                f"{'s' if key == 'seed' else 't'}{self.settings[key]}" for key in DRAW_KEYS if key in self.settings
            )
            or "run"
        )  # a measured checkpoint: no seed

    def setting(self, key: str):
        return setting(self.settings, key)

    @cached_property
    def files(self) -> RunFiles:
        return RunFiles(self.path)

    @property
    def metrics(self) -> pd.DataFrame:  # every evaluated step, per head (metrics.csv, read once); step 0 untrained
        m = self.files.metrics
        return m[m["step"] == 0] if self.untrained else m

    @cached_property
    def initial(self) -> "FinishedRun":
        """The same run untrained: its step-0 evaluation (every run writes one) and its model
        rebuilt from the seed, for measuring whether a claim's criterion could have failed."""
        if self.settings.get("command") == "measure":  # a checkpoint: its untrained revision, if measured
            return self.untrained_checkpoint()
        m, losses = self.files.metrics, self.files.losses
        if m is None or losses is None or not (m["step"] == 0).any():
            raise MissingValue(f"{self.label} has no step-0 evaluation in its tables")
        start = final_values(m[m["step"] == 0], losses[losses["step"] == 0])
        return FinishedRun(self.path, self.settings, start, self.experiment, untrained=True)

    def untrained_checkpoint(self) -> "FinishedRun":
        """The measured untrained revision beside a checkpoint's run (reproduce/checkpoints.py)."""
        folder = self.path.parent / "untrained"
        if not finished(folder):
            raise MissingValue(f"no untrained revision of {self.settings.get('model')} was measured")
        table, finals = collect(folder)
        return FinishedRun(folder, table.iloc[0].to_dict(), finals, self.experiment)  # its own run, read as it is

    def attention(self) -> dict:
        """The attention maps averaged over the held-out batch, per layer ({"layer0": (H, T, T)}):
        attention.npz for the trained run, computed from the rebuilt model for its step 0."""
        if self.untrained:
            # lazy: pulls in torch (~2.4 s); --list and the declarations load measures.py without it
            from sinkexp.evaluate.evaluator import mean_attention

            return mean_attention(self.loaded.model, self.loaded.batch)
        with np.load(self.path / ATTENTION) as maps:
            return {name: maps[name] for name in maps.files}

    @cached_property
    def provenance(self) -> dict[str, str]:
        """What produced the run (meta.json): its commit (+dirty), sinkexp and torch, device, threads."""
        meta = self.files.meta or {}
        git, versions, device = meta.get("git") or {}, meta.get("versions") or {}, meta.get("device") or {}
        commit = (git.get("commit") or "unknown")[:7] + ("+dirty" if git.get("dirty") else "")
        return {
            "commits": commit,
            "versions": f"sinkexp {versions.get('sinkexp')}, torch {versions.get('torch')}",
            "devices": str(device.get("name") or device.get("resolved")),
            "threads": str(device.get("torch_threads")),
        }

    @cached_property
    def loaded(self):  # the trained model and held-out batch (sinkexp.analysis.load.load_run)
        # lazy: pulls in torch (~2.4 s); --list and the declarations load measures.py without it
        from sinkexp.analysis.load import load_run

        return load_run(self.path, step=0 if self.untrained else None)

    def analysis(self, fn: Callable, *args):
        """fn(the loaded run, *args), a sinkexp.analysis.interventions analysis, computed once per run and
        args (several claims read one analysis)."""
        key = (fn.__name__, args)
        if key not in self.analyses:
            self.analyses[key] = fn(self.loaded, *args)
        return self.analyses[key]

    def final(self, metric: str, layer: int = -1, query_type: str = "all") -> float:
        rows = self.finals[
            (self.finals["metric"] == metric)
            & (self.finals["layer"] == layer)
            & (self.finals["query_type"] == query_type)
        ]
        if not len(rows):
            raise MissingValue(f"{self.label} has no final {metric}[layer {layer}, {query_type}]")
        return float(rows["value"].iloc[0])


DRAW_KEYS = ("seed", "task.structure_seed")  # a paired claim pairs runs that share these


def final(metric: str, layer: int | str = 0, query_type: str = "all") -> Measure:
    """A final value (mean over heads); layer "max" / "min": the extreme over the model's layers,
    "mean": their mean (over every head of the model, as each layer has as many)."""
    if isinstance(layer, int):
        return Measure(
            f"{metric}[layer {layer}, {query_type}]", lambda run: run.final(metric, layer, query_type), (metric,)
        )
    pick = {"max": max, "min": min, "mean": statistics.fmean}[layer]

    def extreme(run: FinishedRun) -> float:
        layers = sorted(set(run.finals["layer"]) - {-1})
        return pick(run.final(metric, lay, query_type) for lay in layers)

    return Measure(f"{layer} over layers of {metric}[{query_type}]", extreme, (metric,))


def head_extreme(metric: str, layer: int | str, query_type: str = "all", how: str = "max") -> Measure:
    """The extreme over one layer's heads (layer "all": every layer's) of a final per-head value
    (metrics.csv, last step)."""

    def extreme(run: FinishedRun) -> float:
        m = run.metrics
        layers = m["layer"] >= 0 if layer == "all" else m["layer"] == layer
        rows = m[
            (m["step"] == m["step"].max())
            & (m["metric"] == metric)
            & layers
            & (m["query_type"] == query_type)
            & (m["head"] >= 0)
        ]
        if not len(rows):
            raise MissingValue(f"{run.label} has no per-head {metric}[layer {layer}, {query_type}]")
        return float(rows["value"].agg(how))

    where = "every layer's heads" if layer == "all" else f"heads of {metric}[layer {layer}, {query_type}]"
    return Measure(
        f"{how} over {where}" + (f" of {metric}[{query_type}]" if layer == "all" else ""), extreme, (metric,)
    )


def loss_ratio(query_type: str) -> Measure:
    """Final eval loss over the reference predictor's (the task's baseline): <= 0.1 is 'solved'."""
    return Measure(
        f"loss / reference loss [{query_type}]",
        lambda run: run.final("loss_eval", -1, query_type) / run.final("loss_baseline", -1, query_type),
        ("loss_eval", "loss_baseline"),
    )


def excess_loss(query_type: str) -> Measure:
    return Measure(
        f"loss - oracle loss [{query_type}]",
        lambda run: run.final("loss_eval", -1, query_type) - run.final("loss_baseline", -1, query_type),
        ("loss_eval", "loss_baseline"),
    )


def pooled_peak(layer: int) -> Measure:
    """The largest attention any key position receives, averaged over every query and the held-out
    batch (the final maps of attention.npz; mean over heads): the dynamics notebook's sink score
    (Kempner noop_dynamics.ipynb: `A.mean(dim=(0, 1))`, then its max), whichever position holds it.
    A sink at a different key in every sequence does not count here (max_inflow counts it)."""

    def value(run: FinishedRun) -> float:
        maps = run.attention()
        if f"layer{layer}" not in maps:
            raise MissingValue(f"{run.label} has no layer {layer} in {ATTENTION}")
        weights = maps[f"layer{layer}"]  # (H, T, T)
        return float(weights.mean(axis=1).max(axis=-1).mean())

    return Measure(f"peak of the pooled attention per key [layer {layer}]", value)


def intervention(name: str, layer: int, query_type: str = "all") -> Measure:
    """Loss with one causal intervention on `layer` over the unchanged model's loss (1: no effect)."""

    def ratio(run: FinishedRun) -> float:
        # lazy: pulls in torch (~2.4 s); --list and the declarations load measures.py without it
        from sinkexp.analysis.interventions import run_interventions

        table = run.analysis(run_interventions, layer).set_index(["intervention", "query_type"])["loss"]
        return float(table[(name, query_type)] / table[("none", query_type)])

    return Measure(f"loss with {name}[layer {layer}] / loss [{query_type}]", ratio)


def position_sink(how: str, query_type: str, before: str | None = None) -> Measure:
    """Sink attention per query position (sinkexp.analysis.positions): "some" position of any layer (the
    largest), or "every" selected position of the best layer (its smallest)."""
    from_table = {"some": "strongest_position", "every": "weakest_position_of_best_layer"}[how]

    def value(run: FinishedRun) -> float:
        # lazy: pulls in torch (~2.4 s); --list and the declarations load measures.py without it
        from sinkexp.analysis import positions

        return getattr(positions, from_table)(run.analysis(positions.position_profile, query_type, before))

    where = f"{query_type} queries" + (f" before the {before}" if before else "")
    label = {"some": "max over layers and positions", "every": "max over layers of the min over positions"}[how]
    return Measure(f"{label} of the sink attention per position [{where}]", value)


def payload_transfer(key: str, layer: int) -> Measure:
    """Broadcast: `cosine` or `common_energy` of the output change with the donor's sink value at
    the sink of `layer` (sinkexp.analysis.interventions.payload_transfer)."""

    def value(run: FinishedRun) -> float:
        # lazy: pulls in torch (~2.4 s); --list and the declarations load measures.py without it
        from sinkexp.analysis.interventions import payload_transfer as transfer

        return run.analysis(transfer, layer)[key]

    return Measure(f"donor sink value [layer {layer}]: {key} of the change", value)


def bos_removed(key: str) -> Measure:
    """`first_attn` or `loss` with BOS removed at inference over its value with BOS
    (sinkexp.analysis.interventions.without_bos)."""

    def ratio(run: FinishedRun) -> float:
        # lazy: pulls in torch (~2.4 s); --list and the declarations load measures.py without it
        from sinkexp.analysis.interventions import without_bos

        values = run.analysis(without_bos)
        return values[f"{key}_no_bos"] / values[f"{key}_bos"]

    return Measure(f"{key} without BOS / with BOS (at inference)", ratio)


def perturbation_spread() -> Measure:
    """Barbero et al.'s perturbation (sinkexp.analysis.perturbation): the relative change of the
    representations after a one-token change, averaged over the layers, with BOS removed at inference
    over with BOS (> 1: the change spreads more without the sink)."""

    def ratio(run: FinishedRun) -> float:
        # lazy: pulls in torch (~2.4 s); --list and the declarations load measures.py without it
        from sinkexp.analysis.perturbation import perturbation

        values = run.analysis(perturbation)
        layers = [key.removeprefix("change_bos_") for key in values if key.startswith("change_bos_")]
        return sum(values[f"change_no_bos_{L}"] for L in layers) / sum(values[f"change_bos_{L}"] for L in layers)

    return Measure("perturb_change without BOS / with BOS (at inference, mean over layers)", ratio)


def curve(run: FinishedRun, metric: str, query_type: str = "all", layer: int = 0, head: int = 0) -> pd.Series:
    """One head's metric over the evaluated steps (index: step), for measures of the dynamics."""
    m = run.metrics
    rows = m[(m["layer"] == layer) & (m["head"] == head) & (m["metric"] == metric) & (m["query_type"] == query_type)]
    if not len(rows):
        raise MissingValue(f"{run.label} has no {metric}[layer {layer}, head {head}, {query_type}] over steps")
    return rows.set_index("step")["value"]


def first_step(series: pd.Series, threshold: float) -> float:
    """The first step at which `series` reaches `threshold` (inf: never)."""
    reached = series[series >= threshold].index
    return float(reached.min()) if len(reached) else math.inf
