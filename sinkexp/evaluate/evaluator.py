"""Turn one captured forward pass over the held-out batch into long-format rows (docs/metrics.md
defines every metric; tables.py turns a run's rows into its final values).

    evaluate(model, task, batch, step)  -> metric rows + loss rows (one forward pass, captured)
        attention_rows(...)                (step, layer, head, query_type, metric, value), layer by layer
                                           (layer_rows) and for the whole model (model_rows)
        loss_rows(...)                     (step, split, loss): eval/<query type>, baseline/<query type>

metric rows: `head = -1` marks a value over all heads of a layer, `layer = -1` a value over the whole
model, `query_type = "all"` one over every query.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from sinkexp.evaluate.metrics import head_writes, sink_attention, spectrum, vectors
from sinkexp.evaluate.tables import SINK_RATE_EPS, sink_rate_name
from sinkexp.model import capture, tap_names

ATTENTION_TAPS = ("scores", "weights", "k", "v", "mixed")  # every attention layer has these
# Tap names (the last part) to record: gates only where attn.gate is set; `output` is attn.output
# and, with a global pathway, pathway.output.
CAPTURED = ATTENTION_TAPS + ("gates", "output", "resid_post")


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
    """Metric rows and loss rows of `model` on `batch` at `step` (one forward pass, captured)."""
    names = [name for name in tap_names(model) if name.rsplit(".", 1)[-1] in CAPTURED]
    pred, cache = captured_forward(model, batch.inputs, names)
    anatomy = model.anatomy(batch.inputs.shape[1], pred.device)
    return attention_rows(cache, anatomy, batch, task.query_types, step), loss_rows(task, pred, batch, step)


def loss_rows(task, pred: torch.Tensor, batch, step: int) -> list[tuple]:
    """The model's and the task's reference predictor's mean loss per query type (and over all)."""
    rows = []
    per_position = {"eval": task.loss(pred, batch), "baseline": task.baseline_loss(batch)}
    loss_sets = {name: (batch.query_type == index) & batch.loss_mask for index, name in enumerate(task.query_types)}
    loss_sets["all"] = batch.loss_mask
    for split, values in per_position.items():
        for query_type, queries in loss_sets.items():
            if queries.any():
                rows.append((step, f"{split}/{query_type}", values[queries].mean().item()))
    return rows


class Rows(list):
    """Metric rows of one step; values that are not finite are left out (docs/metrics.md)."""

    def __init__(self, step: int):
        super().__init__()
        self.step = step

    def per_head(self, layer: int, query_type: str, metric: str, values: torch.Tensor) -> None:
        for head, value in enumerate(values.tolist()):
            if math.isfinite(value):
                self.append((self.step, layer, head, query_type, metric, value))

    def scalar(self, layer: int, metric: str, value: torch.Tensor, query_type: str = "all") -> None:
        number = value.item()
        if math.isfinite(number):  # e.g. massive_ratio of a stream that is mostly exact zeros
            self.append((self.step, layer, -1, query_type, metric, number))


def query_sets_of(batch, query_types) -> dict:
    """{query type: (B, T) bool} for the types present in the batch, and "all" (every query)."""
    query_sets = {name: batch.query_type == index for index, name in enumerate(query_types)}
    query_sets["all"] = batch.query_type >= 0
    return {name: queries for name, queries in query_sets.items() if queries.any()}


def attention_rows(cache: dict, anatomy, batch, query_types, step: int) -> list[tuple]:
    """Every metric of every layer from the captured taps (`cache`, names as in CAPTURED).

    The model's sequence may hold registers, and its keys a slot: metrics look at the task's tokens
    (`anatomy.tokens`) and report the mass on registers and slot separately.
    """
    query_sets = query_sets_of(batch, query_types)
    rows = Rows(step)
    sink_scores = [layer_rows(rows, layer, cache, anatomy, batch, query_sets) for layer in range(len(anatomy.layers))]
    model_rows(rows, sink_scores)
    return rows


def model_rows(rows: Rows, sink_scores: list[torch.Tensor]) -> None:
    """The whole model's sink rate (layer -1) from each layer's per-sequence sink scores (B, H)."""
    model_scores = torch.cat(sink_scores, dim=1)  # (B, layers x H)
    for eps in SINK_RATE_EPS:
        rows.scalar(-1, sink_rate_name(eps), sink_attention.sink_rate(model_scores, eps))


def layer_rows(rows: Rows, layer: int, cache: dict, anatomy, batch, query_sets: dict) -> torch.Tensor:
    """One layer's metrics from its taps in `cache` (blocks.{layer}.*); returns its sink scores per
    sequence (B, H). One layer at a time, so a caller may drop a layer's taps once it has its rows
    (sinkexp/hf/ measures real models layer by layer)."""
    parts = anatomy.layers[layer]
    taps = {name: at_positions(cache[f"blocks.{layer}.attn.{name}"], anatomy.tokens, 2) for name in ATTENTION_TAPS}
    gates = cache.get(f"blocks.{layer}.attn.gates")
    share = at_positions(sink_attention.row_share(taps["weights"]), anatomy.tokens, 3)  # (B, H, T, T) share of each row
    query_rows(rows, layer, taps["scores"], taps["weights"], share, gates, anatomy, batch, query_sets)
    # Each head's writes through R_h (W_O^h = Q_h R_h): their norms and Gram matrices are W_O^h's, in D
    # dimensions instead of d_model (docs/metrics.md); the heads' sum through W_O itself.
    compact = head_writes.head_factors(parts.w_o, parts.n_heads)
    updates = head_writes.head_values(taps["mixed"], compact)  # (B, H, T, D)
    if parts.n_heads > 1:
        B, H, T, D = taps["mixed"].shape
        written = taps["mixed"].transpose(1, 2).reshape(B, T, H * D) @ parts.w_o.T  # (B, T, d_model): sum_h u_h
        cancelled = once_per_query_set(
            query_sets, lambda queries: head_writes.head_cancellation(updates, queries, written)
        )
        for query_type, value in cancelled.items():
            rows.scalar(layer, "head_cancellation", value, query_type)
    sink_scores = head_rows(rows, layer, share, taps["k"], taps["v"], updates, compact, parts, batch.sink)
    attn_write = at_positions(cache[f"blocks.{layer}.attn.output"], anatomy.tokens, 1)  # (B, T, d_model)
    rows.scalar(layer, "common_mode", head_writes.common_mode_fraction(attn_write))
    if parts.has_pathway:
        pathway_write = at_positions(cache[f"blocks.{layer}.pathway.output"], anatomy.tokens, 1)
        rows.scalar(layer, "pathway_common_mode", head_writes.common_mode_fraction(pathway_write))
        rows.scalar(layer, "pathway_usage", head_writes.rms_ratio(pathway_write, attn_write))
    resid = at_positions(cache[f"blocks.{layer}.resid_post"], anatomy.tokens, 1)  # (B, T, d_model)
    at_sink, rest = vectors.resid_norms(resid, batch.sink)
    rows.scalar(layer, "resid_norm_sink", at_sink)
    rows.scalar(layer, "resid_norm_rest", rest)
    rows.scalar(layer, "massive_ratio", vectors.massive_ratio(resid))
    position, channel, at_sink = vectors.massive_location(resid, batch.sink)
    rows.scalar(layer, "massive_position", position)
    rows.scalar(layer, "massive_channel", channel)
    rows.scalar(layer, "massive_at_sink", at_sink)
    return sink_scores


def query_rows(rows: Rows, layer: int, scores, weights, share, gates, anatomy, batch, query_sets: dict) -> None:
    """Per query type: where the attention of one layer goes. scores, weights (B, H, T, S[+1]) over
    all keys; share (B, H, T, T) each token's share of the whole row."""
    keep, n_keys = anatomy.tokens, anatomy.n_keys
    extra_mass = {"slot_attn": weights[..., n_keys:].sum(-1), "register_attn": weights[..., anatomy.registers].sum(-1)}
    scores, weights = at_positions(scores, keep, 3), at_positions(weights, keep, 3)  # (B, H, T, T) over tokens
    gap = sink_attention.logit_gap(scores, batch.sink, anatomy.visible)  # (B, H, T)
    gap_defined = ~gap[:, 0].isnan()  # (B, T), same for every head
    top_is_sink = sink_attention.top_key_is_sink(weights, batch.sink)  # (B, H, T): sink_match's, for every query type
    parts = anatomy.layers[layer]

    def where_it_goes(queries) -> dict:
        inflow, has = sink_attention.column_inflow(weights, queries)  # max_inflow's and sink_match_seq's
        values = {
            "sink_attn": sink_attention.sink_attn(weights, batch.sink, queries),
            "sink_share": sink_attention.sink_attn(share, batch.sink, queries),
            "max_inflow": sink_attention.max_inflow_of(inflow, has),
            "sink_match": sink_attention.query_mean(top_is_sink, queries),
            "sink_match_seq": sink_attention.sink_match_seq_of(inflow, has, batch.sink),
            "logit_gap": sink_attention.query_mean(gap.nan_to_num(0.0), queries & gap_defined),
        }
        if parts.has_slot:
            values["slot_attn"] = sink_attention.query_mean(extra_mass["slot_attn"], queries)
        if len(anatomy.registers):
            values["register_attn"] = sink_attention.query_mean(extra_mass["register_attn"], queries)
        if gates is not None:
            values["gate"] = sink_attention.query_mean(at_positions(gates, keep, 2).mean(-1), queries)
        return values

    for query_type, values in once_per_query_set(query_sets, where_it_goes).items():
        for metric, value in values.items():
            rows.per_head(layer, query_type, metric, value)


def once_per_query_set(query_sets: dict, compute) -> dict:
    """{query type: compute(its queries)}, computed once for query types that select the same
    queries (an LM's `text` and `all`: every query is text): the same values, half the work."""
    done: list[tuple[torch.Tensor, object]] = []
    results = {}
    for query_type, queries in query_sets.items():
        result = next((value for mask, value in done if torch.equal(mask, queries)), None)
        if result is None:
            result = compute(queries)
            done.append((queries, result))
        results[query_type] = result
    return results


def at_positions(x: torch.Tensor, index: torch.Tensor, dim: int) -> torch.Tensor:
    """x[..., index, ...] along `dim`: x itself, not a copy, when `index` is every position in order
    (a model without registers or slot: the tensors are large, their copies equal)."""
    if len(index) == x.shape[dim] and bool((index == torch.arange(len(index), device=index.device)).all()):
        return x
    return x[(slice(None),) * dim + (index,)]


def head_rows(rows: Rows, layer: int, share, k, v, updates, compact, parts, sink) -> torch.Tensor:
    """Per head: what it writes (value norms, the update's rank), its QK spectrum and sink score;
    returns the sink scores per sequence (B, H). share (B, H, T, T): the row-normalised weights over
    the task's tokens; updates (B, H, T, D) what each head writes at each query, through `compact`
    (head_writes.head_factors: the same norms and ranks as through W_O)."""
    values = head_writes.head_values(v, compact)  # (B, H, T, D)
    sink_key, other_keys = vectors.key_alignment(k, sink)
    rows.per_head(layer, "all", "sink_key_cos", sink_key)
    rows.per_head(layer, "all", "key_cos_rest", other_keys)
    for name, tensor in (("k", k), ("v", v)):  # Gu et al. 2025, Fig. 2 (norms)
        at_sink, rest = vectors.norms_at_sink(tensor, sink)
        rows.per_head(layer, "all", f"{name}_norm_sink", at_sink)
        rows.per_head(layer, "all", f"{name}_norm_rest", rest)
    rows.per_head(layer, "all", "value_norm_ratio", head_writes.value_norm_ratio(values, sink))
    rows.per_head(layer, "all", "sink_value_norm", head_writes.sink_value_norm(values, sink))
    rows.per_head(layer, "all", "stable_rank", head_writes.stable_rank(updates))
    sigma = spectrum.qk_spectrum(parts.w_q, parts.w_k, parts.n_heads, gain=parts.qk_gain)  # (H, top)
    for rank in range(sigma.shape[1]):
        rows.per_head(layer, "all", f"qk_sigma{rank + 1}", sigma[:, rank])
    if sigma.shape[1] > 1:
        rows.per_head(layer, "all", "qk_sigma1/sigma2", sigma[:, 0] / sigma[:, 1])
    sink_scores = sink_attention.sink_scores(share, sink)  # (B, H)
    rows.per_head(layer, "all", "sink_score", sink_scores.mean(dim=0))
    for eps in SINK_RATE_EPS:
        rows.scalar(layer, sink_rate_name(eps), sink_attention.sink_rate(sink_scores, eps))
    return sink_scores


EXAMPLES = 4  # sequences whose own maps attention.npz keeps when the sink moves between them


@torch.no_grad()
def mean_attention(model, batch, query_types: tuple[str, ...] = ()) -> dict:
    """The held-out batch's attention maps over the task's tokens (docs/rundir.md, attention.npz).
    Per layer L, "layer<L>": the weights averaged over the batch (H, T, T); "type_layer<L>": the same
    per query type (Q, H, T, T; each query row averaged over the sequences where that query is of the
    type, NaN where none is), when `query_types` names two or more; "example_layer<L>": the first
    EXAMPLES sequences' own maps (E, H, T, T) when the sink moves between sequences. Each again with
    prefix "share_" for the rows' shares (sink_share's weights), where they differ from the weights
    (sigmoid, ReLU, a slot, registers). "sink": the sink position when every sequence has the same one
    (BOS), else -1 ("example_sink" then holds the examples' sinks); "query_types": the names."""
    names = [name for name in tap_names(model) if name.endswith(".attn.weights")]
    _, cache = captured_forward(model, batch.inputs, names)
    keep = model.token_positions(batch.inputs.shape[1], batch.inputs.device)
    types = {name: queries for name, queries in query_sets_of(batch, query_types).items() if name != "all"}
    sinks = batch.sink.unique()
    maps = {"sink": (sinks if len(sinks) == 1 else torch.tensor([-1])).squeeze().cpu().numpy()}  # -1: it moves
    if len(sinks) > 1:
        maps["example_sink"] = batch.sink[:EXAMPLES].cpu().numpy()
    if len(types) > 1:
        maps["query_types"] = np.array(list(types))
    for layer, name in enumerate(names):
        weights = at_positions(cache[name], keep, 2)  # (B, H, T, S) over the task's queries
        kinds = {"": at_positions(weights, keep, 3)}
        share = at_positions(sink_attention.row_share(weights), keep, 3)  # a new tensor: weights stay
        if not torch.allclose(share, kinds[""]):
            kinds["share_"] = share
        for prefix, maps_of in kinds.items():
            maps[f"{prefix}layer{layer}"] = maps_of.mean(0).cpu().numpy()
            if len(types) > 1:
                maps[f"{prefix}type_layer{layer}"] = np.stack([per_query(maps_of, q) for q in types.values()])
            if len(sinks) > 1:
                maps[f"{prefix}example_layer{layer}"] = maps_of[:EXAMPLES].cpu().numpy()
    return maps


def per_query(weights: torch.Tensor, queries: torch.Tensor):
    """(B, H, T, T) weights averaged, query row by query row, over the sequences where `queries`
    (B, T) holds: (H, T, T), NaN rows where it holds in none."""
    mask = queries[:, None, :, None].to(weights.dtype)  # (B, 1, T, 1)
    return ((weights * mask).sum(0) / mask.sum(0)).cpu().numpy()
