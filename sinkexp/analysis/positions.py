"""Attention on the sink per query position, per layer, on a run's held-out batch.

Ran-Milo 2026 states its sink in two ways: Theorem 2, that in at least one layer *one* of the
non-trigger positions puts almost all its attention on BOS; and the experiments, that *every*
position before the trigger does. Both quantify over positions, which the per-layer metrics
(a mean over all queries of a type) cannot tell apart; this profile can:

    table = position_profile(load_run(path), "non_trigger", before="trigger")   # layer, position, value, count

Each value is sink_attention.sink_attn_by_position averaged over the layer's heads: the mean over the
sequences in which that position is a query of the type (and, with `before`, comes before the
sequence's first query of that other type) of its attention on the sequence's sink.
"""

from __future__ import annotations

import pandas as pd
import torch

from sinkexp.evaluate.evaluator import captured_forward
from sinkexp.evaluate.metrics.sink_attention import sink_attn_by_position


def selected(task, batch, query_type: str, before: str | None = None) -> torch.Tensor:
    """(B, T) bool: the queries of `query_type`, only those before the first query of `before`."""
    chosen = batch.query_type == task.query_types.index(query_type)
    if before is not None:
        seen = (batch.query_type == task.query_types.index(before)).long().cumsum(dim=1)
        chosen &= seen == 0
    return chosen & batch.loss_mask


@torch.no_grad()
def position_profile(run, query_type: str, before: str | None = None) -> pd.DataFrame:
    """One row per layer and task position: the mean over heads of the sink attention there, and
    how many sequences select the position (0: value NaN)."""
    model, batch = run.model, run.batch
    names = [f"blocks.{layer}.attn.weights" for layer in range(len(model.blocks))]
    _, cache = captured_forward(model, batch.inputs, names)
    tokens = model.anatomy(batch.inputs.shape[1], batch.inputs.device).tokens  # task positions in the model's sequence
    queries = selected(run.task, batch, query_type, before)
    counts = queries.sum(0)
    rows = []
    for layer, name in enumerate(names):
        weights = cache[name][:, :, tokens]  # (B, H, T, S)
        per_position = sink_attn_by_position(weights, tokens[batch.sink], queries).mean(0)  # (T,)
        rows += [
            {"layer": layer, "position": i, "value": float(per_position[i]), "count": int(counts[i])}
            for i in range(len(tokens))
        ]
    return pd.DataFrame(rows)


def strongest_position(table: pd.DataFrame) -> float:
    """Theorem 2's reading: the largest sink attention of any selected position in any layer."""
    return float(table.dropna(subset=["value"])["value"].max())


def weakest_position_of_best_layer(table: pd.DataFrame) -> float:
    """The experiments' reading: in the layer where it is largest, the smallest sink attention over
    every selected position (all of them sink when this is ~1)."""
    selected_rows = table[table["count"] > 0]
    return float(selected_rows.groupby("layer")["value"].min().max())
