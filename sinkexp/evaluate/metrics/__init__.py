"""Sink metrics as pure tensor functions (definitions: docs/metrics.md); no model, no I/O. One
module per what a metric reads: sink_attention.py (the attention weights and scores), head_writes.py
(what the heads and the layer write), vectors.py (keys, values and the residual stream at the sink),
spectrum.py (the weights' QK form). evaluator.py turns them into rows.

Conventions: `weights` A is (B, H, T, S) as the normaliser produced it (rows of non-normalised
variants need not sum to 1); `sink` is (B,) long, the sink key of each sequence; `queries` is a
(B, T) bool mask of the queries to average over. Results are per head, (H,). A mean over an empty
query set is NaN (the caller drops it), never a silent 0.
"""
