"""Turn one forward pass over the held-out batch into long-format rows, and rows into a summary.

metrics rows: (step, layer, head, query_type, metric, value). `head = -1` marks a value over all
heads of a layer, `layer = -1` a value over the whole model, `query_type = "all"` one over every
query. losses rows: (step, split, loss) with split `eval/<query type>` (the model) or
`baseline/<query type>` (the task's reference predictor on the same batch).
"""
from __future__ import annotations

import math

import torch

from sinkexp.evaluate import metrics as M
from sinkexp.model import capture

METRIC_COLUMNS = ["step", "layer", "head", "query_type", "metric", "value"]
LOSS_COLUMNS = ["step", "split", "loss"]
SINK_RATE_EPS = (0.3, 0.8)


def sink_rate_name(eps: float) -> str:
    return f"sink_rate@{eps}"


@torch.no_grad()
def evaluate(model, task, batch, step: int) -> tuple[list[tuple], list[tuple]]:
    """Metrics rows and loss rows of `model` on `batch` at `step` (one forward pass, captured)."""
    was_training = model.training
    model.eval()
    n_layers = len(model.blocks)
    with capture(model, [f"blocks.{layer}.attn.weights" for layer in range(n_layers)]) as cache:
        pred = model(batch.inputs)
    model.train(was_training)

    query_sets = {name: (batch.query_type == index) & batch.loss_mask
                  for index, name in enumerate(task.query_types)}
    query_sets["all"] = batch.loss_mask

    losses = []
    per_position = {"eval": task.loss(pred, batch), "baseline": task.baseline_loss(batch)}
    for split, values in per_position.items():
        for query_type, queries in query_sets.items():
            if queries.any():
                losses.append((step, f"{split}/{query_type}", values[queries].mean().item()))

    rows = []

    def add(layer: int, query_type: str, metric: str, per_head: torch.Tensor) -> None:
        for head, value in enumerate(per_head.tolist()):
            if not math.isnan(value):
                rows.append((step, layer, head, query_type, metric, value))

    all_scores = []
    for layer in range(n_layers):
        weights = cache[f"blocks.{layer}.attn.weights"]                         # (B, H, T, S)
        share = M.row_share(weights)
        for query_type, queries in query_sets.items():
            if not queries.any():
                continue
            add(layer, query_type, "sink_attn", M.sink_attn(weights, batch.sink, queries))
            add(layer, query_type, "sink_share", M.sink_attn(share, batch.sink, queries))
            add(layer, query_type, "max_inflow", M.max_inflow(weights, queries))
            add(layer, query_type, "sink_match", M.sink_match(weights, batch.sink, queries))
        scores = M.sink_score(weights, batch.sink)                              # (H,)
        add(layer, "all", "sink_score", scores)
        all_scores.append(scores)
        for eps in SINK_RATE_EPS:
            rows.append((step, layer, -1, "all", sink_rate_name(eps), M.sink_rate(scores, eps).item()))
    model_scores = torch.cat(all_scores)
    for eps in SINK_RATE_EPS:
        rows.append((step, -1, -1, "all", sink_rate_name(eps), M.sink_rate(model_scores, eps).item()))
    return rows, losses


def summarise(metrics, losses, query_types) -> dict:
    """The final scalar results (a user reads these first) from the metrics/losses DataFrames."""
    last = metrics["step"].max()
    final = metrics[metrics["step"] == last]
    final_losses = losses[(losses["step"] == last) & losses["split"].str.contains("/")]

    def loss_of(prefix: str) -> dict:
        chosen = final_losses[final_losses["split"].str.startswith(prefix + "/")]
        return {split.split("/", 1)[1]: value for split, value in zip(chosen["split"], chosen["loss"])}

    per_layer = final[(final["layer"] >= 0) & (final["head"] >= 0)]
    sink_attn = {}
    for (layer, query_type), group in per_layer[per_layer["metric"] == "sink_attn"].groupby(["layer", "query_type"]):
        sink_attn.setdefault(int(layer), {})[query_type] = float(group["value"].mean())
    rates = final[final["metric"].str.startswith("sink_rate@")]
    sink_rate = {}
    for (layer, metric), group in rates.groupby(["layer", "metric"]):
        key = "model" if layer < 0 else int(layer)
        sink_rate.setdefault(key, {})[metric.split("@")[1]] = float(group["value"].iloc[0])
    return {"step": int(last), "loss": loss_of("eval"), "baseline_loss": loss_of("baseline"),
            "sink_attn": sink_attn, "sink_rate": sink_rate, "query_types": list(query_types)}


def format_summary(summary: dict) -> str:
    """The per-layer table printed at the end of a run."""
    query_types = summary["query_types"]
    header = ["layer"] + [f"sink_attn[{q}]" for q in query_types] + ["sink_rate@0.3", "sink_rate@0.8"]
    lines = ["  ".join(f"{h:>18}" for h in header)]
    for layer, by_query in sorted(summary["sink_attn"].items(), key=lambda kv: int(kv[0])):
        rates = summary["sink_rate"].get(layer, summary["sink_rate"].get(str(layer), {}))
        cells = [str(layer)] + [_fmt(by_query.get(q)) for q in query_types] + \
                [_fmt(rates.get("0.3")), _fmt(rates.get("0.8"))]
        lines.append("  ".join(f"{c:>18}" for c in cells))
    lines.append(f"loss at step {summary['step']} (task reference predictor in brackets):")
    for q in query_types + ["all"]:
        loss, base = summary["loss"].get(q), summary["baseline_loss"].get(q)
        if loss is None:
            continue
        ratio = f", {loss / base:.1%} of the reference" if base else ""
        lines.append(f"  {q:>12}: {loss:.5f} ({_fmt(base)}{ratio})")
    return "\n".join(lines)


def _fmt(value) -> str:
    return "-" if value is None else f"{value:.4f}"
