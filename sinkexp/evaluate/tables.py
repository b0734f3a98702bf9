"""A run's tables: their columns, and the final values that summary.json, the printed table and
`sinkexp report` all read (one derivation, no model code: pandas only). docs/rundir.md describes
the files.
"""
from __future__ import annotations

import pandas as pd

METRIC_COLUMNS = ["step", "layer", "head", "query_type", "metric", "value"]
LOSS_COLUMNS = ["step", "split", "loss"]
FINAL_COLUMNS = ["layer", "query_type", "metric", "value"]
SINK_RATE_EPS = (0.3, 0.8)


def sink_rate_name(eps: float) -> str:
    return f"sink_rate@{eps}"


def final_values(metrics: pd.DataFrame, losses: pd.DataFrame) -> pd.DataFrame:
    """The last evaluated step's values as long rows (layer, query_type, metric, value).

    Metrics are averaged over heads (layer -1: the whole model); losses become metrics
    `loss_eval` and `loss_baseline` with layer -1, in the order losses.csv lists them.
    """
    last = metrics[metrics["step"] == metrics["step"].max()]
    per_layer = last.groupby(["layer", "query_type", "metric"], as_index=False)["value"].mean()
    losses = losses[(losses["step"] == metrics["step"].max()) & losses["split"].str.contains("/")]
    split = losses["split"].str.split("/", n=1, expand=True)
    loss_values = pd.DataFrame({"layer": -1, "query_type": split[1], "metric": "loss_" + split[0],
                                "value": losses["loss"].to_numpy()}) if len(losses) else None
    return pd.concat([per_layer, loss_values], ignore_index=True)[FINAL_COLUMNS]


def summary(final: pd.DataFrame, step: int, query_types, reference: str) -> dict:
    """summary.json: the final scalar results, a user reads these first.

    `metrics` nests every final metric as {metric: {layer: {query_type: mean over heads}}} (layer
    "model" for whole-model values); `loss`, `baseline_loss`, `sink_attn` and `sink_rate` repeat the
    headline ones.
    """
    def loss_of(split: str) -> dict:
        chosen = final[final["metric"] == f"loss_{split}"]
        return dict(zip(chosen["query_type"], chosen["value"].astype(float)))

    nested: dict = {}
    chosen = final[~final["metric"].str.startswith("loss_")].sort_values(["metric", "layer", "query_type"])
    for layer, query_type, metric, value in chosen.itertuples(index=False):
        nested.setdefault(metric, {}).setdefault("model" if layer < 0 else str(layer), {})[query_type] = float(value)
    sink_rate: dict = {}
    for eps in SINK_RATE_EPS:
        for layer, by_query in nested.get(sink_rate_name(eps), {}).items():
            sink_rate.setdefault(layer, {})[str(eps)] = by_query["all"]
    return {"step": int(step), "reference": reference, "loss": loss_of("eval"), "baseline_loss": loss_of("baseline"),
            "sink_attn": nested.get("sink_attn", {}), "sink_rate": sink_rate, "query_types": list(query_types),
            "metrics": nested}


TABLE_METRICS = ("value_norm_ratio", "massive_ratio")
OPTIONAL_TABLE_METRICS = ("slot_attn", "register_attn")   # shown when the model has a slot / registers


def format_summary(summary: dict) -> str:
    """The per-layer table printed at the end of a run."""
    query_types, metrics = summary["query_types"], summary["metrics"]
    columns = list(TABLE_METRICS) + [m for m in OPTIONAL_TABLE_METRICS if m in metrics]
    header = (["layer"] + [f"sink_attn[{q}]" for q in query_types] + [sink_rate_name(e) for e in SINK_RATE_EPS]
              + columns)
    width = max(len(h) for h in header) + 1
    lines = ["".join(f"{h:>{width}}" for h in header)]
    for layer in sorted(summary["sink_attn"], key=int):
        cells = ([layer] + [_fmt(summary["sink_attn"][layer].get(q)) for q in query_types]
                 + [_fmt(summary["sink_rate"][layer].get(str(e))) for e in SINK_RATE_EPS]
                 + [_fmt(metrics.get(m, {}).get(layer, {}).get("all")) for m in columns])
        lines.append("".join(f"{c:>{width}}" for c in cells))
    lines.append(f"loss at step {summary['step']}, next to the {summary['reference']}:")
    for q in query_types + ["all"]:
        loss, base = summary["loss"].get(q), summary["baseline_loss"].get(q)
        if loss is not None:
            ratio = f" ({loss / base:.1%})" if base else ""
            lines.append(f"  {q:>14}: {loss:.5f} vs {base:.5f}, excess {loss - base:+.5f}{ratio}")
    return "\n".join(lines)


def _fmt(value) -> str:
    return "-" if value is None else f"{value:.4f}"
