"""A run's tables: their columns, and the final values that summary.json, the printed table and
`sinkexp report` all read (one derivation, no model code). Plain Python over the rows, so a run
imports no pandas; rundir/reading.py applies the same derivation to tables read back as DataFrames.
docs/rundir.md describes the files.
"""

from __future__ import annotations

import math

METRIC_COLUMNS = ["step", "layer", "head", "query_type", "metric", "value"]
LOSS_COLUMNS = ["step", "split", "loss"]
FINAL_COLUMNS = ["layer", "query_type", "metric", "value"]
SINK_RATE_EPS = (0.3, 0.8)


def sink_rate_name(eps: float) -> str:
    return f"sink_rate@{eps}"


# Every metric a run's final values can hold (docs/metrics.md defines each): the names the
# evaluator writes into metrics.csv, and the losses final_rows adds. A claim's measure names
# metrics from here, so a typo is refused when its paper is declared (tests check the evaluator
# writes no other name).
MEASURE_ONLY = ("perturb_change", "perturb_reach")  # sinkexp measure perturb=true only (evaluate/perturbation.py)
METRICS = (
    "sink_attn",
    "sink_share",
    "max_inflow",
    "sink_match",
    "sink_match_seq",
    "sink_score",
    *map(sink_rate_name, SINK_RATE_EPS),
    "logit_gap",
    "value_norm_ratio",
    "sink_value_norm",
    "head_cancellation",
    "common_mode",
    "pathway_common_mode",
    "pathway_usage",
    "stable_rank",
    "qk_sigma1",
    "qk_sigma2",
    "qk_sigma3",
    "qk_sigma1/sigma2",
    "resid_norm_sink",
    "resid_norm_rest",
    "massive_ratio",
    "massive_position",
    "massive_channel",
    "massive_at_sink",
    "sink_key_cos",
    "key_cos_rest",
    "k_norm_sink",
    "k_norm_rest",
    "v_norm_sink",
    "v_norm_rest",
    "slot_attn",
    "register_attn",
    "gate",
    *MEASURE_ONLY,
    "loss_eval",
    "loss_baseline",
)


def final_rows(metric_rows, loss_rows) -> list[tuple]:
    """The last evaluated step's values as rows (layer, query_type, metric, value).

    Metrics are averaged over heads (layer -1: the whole model), in the order of their keys;
    losses become metrics `loss_eval` and `loss_baseline` with layer -1, in the order losses.csv
    lists them. The mean is a compensated (Kahan) sum over the heads in row order, NaN skipped: the
    sum pandas' groupby mean makes, which gave the values before (tests/evaluate/test_tables.py
    compares the two on tables of the evaluator's shape, value for value).
    """
    metric_rows = list(metric_rows)
    if not metric_rows:
        return []
    last = max(row[0] for row in metric_rows)
    sums: dict = {}  # (layer, query_type, metric) -> [count, sum, compensation]
    for step, layer, _head, query_type, metric, value in metric_rows:
        if step != last:
            continue
        acc = sums.setdefault((layer, query_type, metric), [0, 0.0, 0.0])
        if value == value:  # NaN skipped
            y = value - acc[2]
            t = acc[1] + y
            acc[2] = t - acc[1] - y
            acc[2] = 0.0 if acc[2] != acc[2] else acc[2]  # an infinite value: its sum stays infinite
            acc[0], acc[1] = acc[0] + 1, t
    rows = [(*key, acc[1] / acc[0] if acc[0] else math.nan) for key, acc in sorted(sums.items())]
    for step, split, loss in loss_rows:
        if step == last and "/" in split:
            kind, query_type = split.split("/", 1)
            rows.append((-1, query_type, f"loss_{kind}", float(loss)))
    return rows


def summary(final, step: int, query_types, reference: str) -> dict:
    """summary.json: the final scalar results, a user reads these first; `final` holds final_rows'
    rows (layer, query_type, metric, value).

    `metrics` nests every final metric as {metric: {layer: {query_type: mean over heads}}} (layer
    "model" for whole-model values); `loss`, `baseline_loss`, `sink_attn` and `sink_rate` repeat the
    headline ones.
    """

    final = list(final)

    def loss_of(split: str) -> dict:
        return {query_type: float(value) for _, query_type, metric, value in final if metric == f"loss_{split}"}

    nested: dict = {}
    chosen = sorted((row for row in final if not row[2].startswith("loss_")), key=lambda row: (row[2], row[0], row[1]))
    for layer, query_type, metric, value in chosen:
        nested.setdefault(metric, {}).setdefault("model" if layer < 0 else str(layer), {})[query_type] = float(value)
    sink_rate: dict = {}
    for eps in SINK_RATE_EPS:
        for layer, by_query in nested.get(sink_rate_name(eps), {}).items():
            sink_rate.setdefault(layer, {})[str(eps)] = by_query["all"]
    return {
        "step": int(step),
        "reference": reference,
        "loss": loss_of("eval"),
        "baseline_loss": loss_of("baseline"),
        "sink_attn": nested.get("sink_attn", {}),
        "sink_rate": sink_rate,
        "query_types": list(query_types),
        "metrics": nested,
    }


# Rows of the printed table after sink_attn and sink_rate; the optional ones only where the model has them.
TABLE_METRICS = ("value_norm_ratio", "massive_ratio", "massive_at_sink", "slot_attn", "register_attn", "gate")
WIDTH = 100  # the printed table wraps its layer columns to stay within this many characters
SINK_EPS = 0.3  # the verdict's threshold on a head's sink score (Gu et al. 2025)


def format_summary(summary: dict) -> str:
    """What a run prints at its end: a metric x layer table (values are means over heads), one
    verdict line per layer, and the losses next to the task's reference predictor."""
    query_types, metrics, layers = summary["query_types"], summary["metrics"], sorted(summary["sink_attn"], key=int)
    rows = [(f"sink_attn, {q} queries", [summary["sink_attn"][layer].get(q) for layer in layers]) for q in query_types]
    shares = [
        (f"  its share of the row, {q}", [metrics.get("sink_share", {}).get(layer, {}).get(q) for layer in layers])
        for q in query_types
    ]
    if any(
        not _same(raw, share) for (_, raws), (_, share_row) in zip(rows, shares) for raw, share in zip(raws, share_row)
    ):
        rows = [row for pair in zip(rows, shares) for row in pair]  # unnormalised rows: the share beside each
    rows += [
        (f"sink_rate@{eps} (heads x seqs)", [summary["sink_rate"][layer].get(str(eps)) for layer in layers])
        for eps in SINK_RATE_EPS
    ]
    rows += [
        (metric, [metrics[metric].get(layer, {}).get("all") for layer in layers])
        for metric in TABLE_METRICS
        if metric in metrics
    ]
    label_width = max(len(label) for label, _ in rows) + 2
    per_chunk = max(1, (WIDTH - label_width) // 10)
    lines = []
    for start in range(0, len(layers), per_chunk):
        chunk = range(start, min(start + per_chunk, len(layers)))
        lines.append(f"{'(mean over heads)':<{label_width}}" + "".join(f"{'layer ' + layers[i]:>10}" for i in chunk))
        lines += [
            f"{label:<{label_width}}" + "".join(f"{_fmt(values[i]):>10}" for i in chunk) for label, values in rows
        ]
    if any(value is None for _, values in rows for value in values):
        lines.append("(- : not defined here, e.g. no query of that type in the held-out batch)")
    lines += [verdict(layer, summary) for layer in layers]
    if len(layers) > 1:  # Gu's and Barbero's sink rate: the share of all the model's heads
        rates = summary["sink_rate"].get("model", {})
        lines.append(
            "model: sink rate over all heads "
            + ", ".join(f"{_fmt(rates.get(str(eps)))} at alpha_s > {eps}" for eps in SINK_RATE_EPS)
        )
    when = f"at step {summary['step']}" if summary["step"] >= 0 else "at an unknown training step"  # measure's -1
    lines.append(f"loss {when} on the held-out batch, next to the {summary['reference']}:")
    lines.append(f"  {'query type':<14}{'model':>10}{'reference':>11}{'model-reference':>17}{'model/reference':>17}")
    for q in query_types + ["all"]:
        loss, base = summary["loss"].get(q), summary["baseline_loss"].get(q)
        if loss is not None:
            ratio = f"{loss / base:.1%}" if base else ""
            lines.append(f"  {q:<14}{loss:>10.5f}{base:>11.5f}{loss - base:>+17.5f}{ratio:>17}")
    return "\n".join(lines)


def verdict(layer: str, summary: dict) -> str:
    """One line: did this layer form a sink (a head whose sink score alpha_s exceeds SINK_EPS)?"""
    share = summary["sink_rate"].get(layer, {}).get(str(SINK_EPS))
    score = summary["metrics"].get("sink_score", {}).get(layer, {}).get("all")
    if share:
        return (
            f"layer {layer}: sink formed in {share:.0%} of heads (sink score alpha_s > {SINK_EPS}, counted per "
            f"sequence)"
        )
    return f"layer {layer}: no sink (sink score alpha_s {_fmt(score)}, mean over heads, <= {SINK_EPS})"


def _same(a, b) -> bool:
    return a is None or b is None or math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-6)


def _fmt(value) -> str:
    return "-" if value is None else f"{value:.4g}"
