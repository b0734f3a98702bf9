"""What a claim measures on one finished run: a final metric, an extreme over heads or layers, a
loss ratio, or a causal intervention's effect.

Each constructor returns a Measure (declare.py) that names the metrics it reads, so a paper file
with a misspelt metric is refused on import. A value a run does not have (a query type the task
lacks, a layer the model lacks) raises MissingValue (finished.py). Interventions load the model
(torch) only when a claim asks for them, once per run however many claims read them.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import replace

import numpy as np
import pandas as pd

from sinkexp.reproduce.claims import Measure
from sinkexp.reproduce.finished import FinishedRun, MissingValue
from sinkexp.rundir.files import ATTENTION


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
    (Kempner noop_dynamics.ipynb cell 3, `A.mean(dim=(0, 1))`, and cell 9's `.max()`), whichever
    position holds it. A sink at a different key in every sequence does not count here (max_inflow
    counts it), nor does a sink split over two keys: its detail names the two largest keys and the
    per-sequence max_inflow beside them."""

    def pooled(run: FinishedRun) -> np.ndarray:
        maps = run.attention()
        if f"layer{layer}" not in maps:
            raise MissingValue(f"{run.label} has no layer {layer} in {ATTENTION}")
        return maps[f"layer{layer}"].mean(axis=1)  # (H, T, T) -> each head's attention per key, (H, T)

    def detail(run: FinishedRun) -> str:
        per_key = pooled(run).mean(axis=0)  # mean over heads
        first, second = np.argsort(per_key)[::-1][:2]
        try:
            per_sequence = f"; per sequence (max_inflow) {run.final('max_inflow', layer, 'all'):.3g}"
        except MissingValue:
            per_sequence = ""
        return f"key {first}: {per_key[first]:.3g}, key {second}: {per_key[second]:.3g}{per_sequence}"

    return Measure(
        f"peak of the pooled attention per key [layer {layer}]",
        lambda run: float(pooled(run).max(axis=-1).mean()),
        family=("pooled attention",),
        detail=detail,
    )


def intervention(name: str, layer: int, query_type: str = "all") -> Measure:
    """Loss with one causal intervention on `layer` over the unchanged model's loss (1: no effect)."""

    def ratio(run: FinishedRun) -> float:
        # lazy: pulls in torch (~2.4 s); --list and the declarations load measures.py without it
        from sinkexp.analysis.interventions import run_interventions

        table = run.analysis(run_interventions, layer).set_index(["intervention", "query_type"])["loss"]
        return float(table[(name, query_type)] / table[("none", query_type)])

    return Measure(f"loss with {name}[layer {layer}] / loss [{query_type}]", ratio, family=("intervention",))


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
    return Measure(f"{label} of the sink attention per position [{where}]", value, family=("sink_attn",))


def payload_transfer(key: str, layer: int) -> Measure:
    """Broadcast: `cosine` or `common_energy` of the output change with the donor's sink value at
    the sink of `layer` (sinkexp.analysis.interventions.payload_transfer)."""

    def value(run: FinishedRun) -> float:
        # lazy: pulls in torch (~2.4 s); --list and the declarations load measures.py without it
        from sinkexp.analysis.interventions import payload_transfer as transfer

        return run.analysis(transfer, layer)[key]

    return Measure(f"donor sink value [layer {layer}]: {key} of the change", value, family=("payload transfer",))


def bos_removed(key: str) -> Measure:
    """`first_attn` or `loss` with BOS removed at inference over its value with BOS
    (sinkexp.analysis.interventions.without_bos; on a measured LM, its first position removed:
    lm_interventions.first_token_removed, on its first analysis.spike.ABLATED sequences)."""

    def ratio(run: FinishedRun) -> float:
        # lazy: pulls in torch (~2.4 s); --list and the declarations load measures.py without it
        from sinkexp.analysis.interventions import without_bos
        from sinkexp.analysis.lm_interventions import first_token_removed
        from sinkexp.analysis.spike import on_first

        if measured(run):
            values = run.analysis(on_first, first_token_removed)
            return values[f"{key}_no_first"] / values[f"{key}_first"]
        values = run.analysis(without_bos)
        return values[f"{key}_no_bos"] / values[f"{key}_bos"]

    return Measure(f"{key} without BOS / with BOS (at inference)", ratio, family=("without BOS",))


def perturbation_spread() -> Measure:
    """Barbero et al.'s perturbation (sinkexp.analysis.perturbation): the relative change of the
    representations after a one-token change, averaged over the layers, with BOS removed at inference
    over with BOS (> 1: the change spreads more without the sink); on a measured LM, on its first
    analysis.spike.ABLATED sequences."""

    def ratio(run: FinishedRun) -> float:
        # lazy: pulls in torch (~2.4 s); --list and the declarations load measures.py without it
        from sinkexp.analysis.perturbation import measured_perturbation, perturbation
        from sinkexp.analysis.spike import on_first

        values = run.analysis(on_first, measured_perturbation) if measured(run) else run.analysis(perturbation)
        layers = [key.removeprefix("change_bos_") for key in values if key.startswith("change_bos_")]
        return sum(values[f"change_no_bos_{L}"] for L in layers) / sum(values[f"change_bos_{L}"] for L in layers)

    return Measure(
        "perturb_change without BOS / with BOS (at inference, mean over layers)", ratio, family=("perturbation",)
    )


def measured(run: FinishedRun) -> bool:
    """Whether the run is a `sinkexp measure` run (a checkpoint), not a trained one."""
    return run.settings.get("command") == "measure"


def peak(run: FinishedRun) -> int:
    """The layer of the run's largest massive_ratio (where its spike is)."""
    layers = sorted(set(run.finals["layer"]) - {-1})
    return max(layers, key=lambda layer: run.final("massive_ratio", layer))


def largest_spike() -> Measure:
    """The largest massive_ratio over layers; its detail, the layer and the entry's position and channel."""

    def detail(run: FinishedRun) -> str:
        layer = peak(run)
        where = (int(run.final(key, layer)) for key in ("massive_position", "massive_channel"))
        return "layer {}, position {}, channel {}".format(layer, *where)

    return replace(final("massive_ratio", "max"), detail=detail)


def at_peak(metric: str) -> Measure:
    """`metric` at the layer of the largest massive_ratio (e.g. massive_at_sink: does the spike sit at the sink?)."""
    return Measure(
        f"{metric}[the layer of the largest massive_ratio, all]",
        lambda run: run.final(metric, peak(run)),
        (metric, "massive_ratio"),
    )


def layer_ratio(numerator: str, denominator: str) -> Measure:
    """The mean over layers of numerator / denominator (final values, mean over heads), e.g. the sink's
    residual norm over the other positions'."""

    def mean(run: FinishedRun) -> float:
        layers = sorted(set(run.finals["layer"]) - {-1})
        return statistics.fmean(run.final(numerator, layer) / run.final(denominator, layer) for layer in layers)

    return Measure(f"mean over layers of {numerator} / {denominator}", mean, (numerator, denominator))


SPIKE = {  # spike_anatomy's keys (analysis/spike.py) a claim reads, and what each is
    "step_up": "largest share of the spike one MLP of the first half of the blocks writes",
    "step_down": "share of the spike gone from the last block's output",
    "state_cos": "cosine of the spike token's state with its mean over sequences (peak layer)",
}


def spike(key: str) -> Measure:
    """A number of the spike's anatomy (sinkexp.analysis.spike.spike_anatomy) on a measured LM; its
    detail, the blocks and the position where the spike rises, peaks and falls."""

    def anatomy(run: FinishedRun) -> dict:
        # lazy: pulls in torch (~2.4 s); --list and the declarations load measures.py without it
        from sinkexp.analysis.spike import spike_anatomy

        return run.analysis(spike_anatomy)

    def detail(run: FinishedRun) -> str:
        a = anatomy(run)
        return (
            f"up at block {a['up_block']}, peak at layer {a['peak_layer']} (position {a['position']}, channel "
            f"{a['channel']}; at position 0 in {a['at_first']:.0%}), down most at {a['down_blocks']}, other "
            f"positions' cosine {a['rest_cos']:.2f}"
        )

    return Measure(SPIKE[key], lambda run: anatomy(run)[key], family=("spike anatomy",), detail=detail)


def massive_ablation(name: str) -> Measure:
    """Loss with the massive activations of the spike's step-up block (analysis.spike: its up_block)
    set to zero (`massive_zero`) or to their mean (`massive_mean`) over the unchanged loss, on the
    run's first analysis.spike.ABLATED sequences."""

    def ratio(run: FinishedRun) -> float:
        # lazy: pulls in torch (~2.4 s); --list and the declarations load measures.py without it
        from sinkexp.analysis.spike import massive_ablation as ablated
        from sinkexp.analysis.spike import spike_anatomy

        return run.analysis(ablated, run.analysis(spike_anatomy)["up_block"])[name]

    return Measure(f"loss with {name} at the spike's step-up block / loss [all]", ratio, family=("intervention",))


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
