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
from sinkexp.model import capture, tap_names

METRIC_COLUMNS = ["step", "layer", "head", "query_type", "metric", "value"]
LOSS_COLUMNS = ["step", "split", "loss"]
SINK_RATE_EPS = (0.3, 0.8)


def sink_rate_name(eps: float) -> str:
    return f"sink_rate@{eps}"


ATTENTION_TAPS = ("scores", "weights", "v", "mixed")   # every attention layer has these
CAPTURED = ATTENTION_TAPS + ("gates", "resid_post")      # gates only where attn.gate is set


def captured_forward(model, inputs: torch.Tensor, names: list[str]) -> tuple[torch.Tensor, dict]:
    """The model's prediction in eval mode, with the named taps recorded."""
    was_training = model.training
    model.eval()
    with capture(model, names) as cache:
        pred = model(inputs)
    model.train(was_training)
    return pred, cache


@torch.no_grad()
def evaluate(model, task, batch, step: int) -> tuple[list[tuple], list[tuple]]:
    """Metrics rows and loss rows of `model` on `batch` at `step` (one forward pass, captured)."""
    names = [name for name in tap_names(model) if name.rsplit(".", 1)[-1] in CAPTURED]
    pred, cache = captured_forward(model, batch.inputs, names)

    losses = []
    per_position = {"eval": task.loss(pred, batch), "baseline": task.baseline_loss(batch)}
    loss_sets = {name: (batch.query_type == index) & batch.loss_mask for index, name in enumerate(task.query_types)}
    loss_sets["all"] = batch.loss_mask
    for split, values in per_position.items():
        for query_type, queries in loss_sets.items():
            if queries.any():
                losses.append((step, f"{split}/{query_type}", values[queries].mean().item()))

    query_sets = {name: batch.query_type == index for index, name in enumerate(task.query_types)}
    query_sets["all"] = batch.query_type >= 0
    query_sets = {name: queries for name, queries in query_sets.items() if queries.any()}
    # The model's sequence may hold registers, and its keys a slot: metrics look at the task's tokens
    # (`keep`) and report the mass on registers and slot separately.
    T = batch.inputs.shape[1]
    keep, registers = model.token_positions(T, pred.device), model.register_positions(pred.device)
    n_keys = T + model.n_registers
    visible = model.visible(n_keys, pred.device)[keep][:, keep]
    rows = []

    def add(layer: int, query_type: str, metric: str, per_head: torch.Tensor) -> None:
        for head, value in enumerate(per_head.tolist()):
            if math.isfinite(value):
                rows.append((step, layer, head, query_type, metric, value))

    def add_scalar(layer: int, metric: str, value: torch.Tensor) -> None:
        number = value.item()
        if math.isfinite(number):   # e.g. massive_ratio of a stream that is mostly exact zeros
            rows.append((step, layer, -1, "all", metric, number))

    all_scores = []
    for layer, block in enumerate(model.blocks):
        scores, weights, v, mixed = (cache[f"blocks.{layer}.attn.{name}"][:, :, keep] for name in ATTENTION_TAPS)
        share = M.row_share(weights)[..., keep]                                  # share of the whole row
        extra_mass = {"slot_attn": weights[..., n_keys:].sum(-1), "register_attn": weights[..., registers].sum(-1)}
        scores, weights = scores[..., keep], weights[..., keep]                  # (B, H, T, T) over tokens
        gap = M.logit_gap(scores, batch.sink, visible)                          # (B, H, T)
        gap_defined = ~gap[:, 0].isnan()                                        # (B, T), same for every head
        gates = cache.get(f"blocks.{layer}.attn.gates")
        for query_type, queries in query_sets.items():
            add(layer, query_type, "sink_attn", M.sink_attn(weights, batch.sink, queries))
            add(layer, query_type, "sink_share", M.sink_attn(share, batch.sink, queries))
            add(layer, query_type, "max_inflow", M.max_inflow(weights, queries))
            add(layer, query_type, "sink_match", M.sink_match(weights, batch.sink, queries))
            add(layer, query_type, "logit_gap", M.query_mean(gap.nan_to_num(0.0), queries & gap_defined))
            if block.attn.slot_k is not None:
                add(layer, query_type, "slot_attn", M.query_mean(extra_mass["slot_attn"], queries))
            if model.n_registers:
                add(layer, query_type, "register_attn", M.query_mean(extra_mass["register_attn"], queries))
            if gates is not None:
                add(layer, query_type, "gate", M.query_mean(gates[:, :, keep].mean(-1), queries))

        values = M.head_values(v, block.attn.out.weight)                       # (B, H, T, d_model)
        add(layer, "all", "value_norm_ratio", M.value_norm_ratio(values, batch.sink))
        add(layer, "all", "sink_value_norm", M.sink_value_norm(values, batch.sink))
        add(layer, "all", "stable_rank", M.stable_rank(M.head_values(mixed, block.attn.out.weight)))
        w_q, w_k, _ = block.attn.qkv.weight.chunk(3, dim=0)
        spectrum = M.qk_spectrum(w_q, w_k, block.attn.n_heads)                # (H, top)
        for rank in range(spectrum.shape[1]):
            add(layer, "all", f"qk_sigma{rank + 1}", spectrum[:, rank])
        if spectrum.shape[1] > 1:
            add(layer, "all", "qk_sigma1/sigma2", spectrum[:, 0] / spectrum[:, 1])

        scores_at_sink = M.sink_score(weights, batch.sink)                      # (H,)
        add(layer, "all", "sink_score", scores_at_sink)
        all_scores.append(scores_at_sink)
        for eps in SINK_RATE_EPS:
            add_scalar(layer, sink_rate_name(eps), M.sink_rate(scores_at_sink, eps))

        resid = cache[f"blocks.{layer}.resid_post"][:, keep]                    # (B, T, d_model)
        at_sink, rest = M.resid_norms(resid, batch.sink)
        add_scalar(layer, "resid_norm_sink", at_sink)
        add_scalar(layer, "resid_norm_rest", rest)
        add_scalar(layer, "massive_ratio", M.massive_ratio(resid))
    model_scores = torch.cat(all_scores)
    for eps in SINK_RATE_EPS:
        add_scalar(-1, sink_rate_name(eps), M.sink_rate(model_scores, eps))
    return rows, losses


@torch.no_grad()
def mean_attention(model, batch) -> dict:
    """Attention weights averaged over the batch, per layer: {"layer0": (H, T, T) array} over the task's tokens."""
    names = [name for name in tap_names(model) if name.endswith(".attn.weights")]
    _, cache = captured_forward(model, batch.inputs, names)
    keep = model.token_positions(batch.inputs.shape[1], batch.inputs.device)
    return {f"layer{layer}": cache[name][:, :, keep][..., keep].mean(0).cpu().numpy()
            for layer, name in enumerate(names)}


def summarise(metrics, losses, query_types, reference: str) -> dict:
    """The final scalar results (a user reads these first) from the metrics/losses DataFrames.

    `metrics` nests every final metric as {metric: {layer: {query_type: mean over heads}}}
    (layer "model" for whole-model values); `sink_attn` and `sink_rate` repeat the headline ones.
    """
    last = metrics["step"].max()
    final = metrics[metrics["step"] == last]
    final_losses = losses[(losses["step"] == last) & losses["split"].str.contains("/")]

    def loss_of(prefix: str) -> dict:
        chosen = final_losses[final_losses["split"].str.startswith(prefix + "/")]
        return {split.split("/", 1)[1]: value for split, value in zip(chosen["split"], chosen["loss"])}

    nested: dict = {}
    for (metric, layer, query_type), group in final.groupby(["metric", "layer", "query_type"]):
        layer_key = "model" if layer < 0 else str(layer)
        nested.setdefault(metric, {}).setdefault(layer_key, {})[query_type] = float(group["value"].mean())
    sink_rate: dict = {}
    for eps in SINK_RATE_EPS:
        for layer, by_query in nested.get(sink_rate_name(eps), {}).items():
            sink_rate.setdefault(layer, {})[str(eps)] = by_query["all"]
    return {"step": int(last), "reference": reference, "loss": loss_of("eval"), "baseline_loss": loss_of("baseline"),
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
