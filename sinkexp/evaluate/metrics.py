"""Sink metrics as pure tensor functions (SPEC section 5); no model, no I/O.

Conventions: `weights` A is (B, H, T, S) as the normaliser produced it (rows of non-normalised
variants need not sum to 1); `sink` is (B,) long, the sink key of each sequence; `queries` is a
(B, T) bool mask of the queries to average over. Results are per head, (H,). A mean over an empty
query set is NaN (the caller drops it), never a silent 0.
"""
from __future__ import annotations

import torch


def at_sink(weights: torch.Tensor, sink: torch.Tensor) -> torch.Tensor:
    """A[b, h, i, sink_b]: the attention every query pays to its sequence's sink, (B, H, T)."""
    B, H, T, _ = weights.shape
    index = sink.view(B, 1, 1, 1).expand(B, H, T, 1)
    return weights.gather(-1, index).squeeze(-1)


def row_share(weights: torch.Tensor) -> torch.Tensor:
    """Each row divided by its sum, with 0/0 := 0 (for variants whose rows do not sum to 1)."""
    total = weights.sum(dim=-1, keepdim=True)
    return torch.where(total > 0, weights / total.clamp_min(torch.finfo(weights.dtype).tiny), 0.0)


def query_mean(per_query: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
    """Mean of (B, H, T, ...) over the selected (b, i) pairs -> (H, ...)."""
    mask = queries[:, None, :].to(per_query.dtype)                         # (B, 1, T)
    while mask.dim() < per_query.dim():
        mask = mask[..., None]
    return (per_query * mask).sum(dim=(0, 2)) / mask.sum(dim=(0, 2))       # NaN when empty


def sink_attn(weights: torch.Tensor, sink: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
    """mean_{i in queries} A_{i, s}, (H,)."""
    return query_mean(at_sink(weights, sink), queries)


def max_inflow(weights: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
    """max_j mean_{i in queries} A_{i, j}: the largest average attention any single key receives, (H,)."""
    return query_mean(weights, queries).amax(dim=-1)


def sink_match(weights: torch.Tensor, sink: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
    """Share of queries whose argmax key is the sink, (H,)."""
    is_sink = (weights.argmax(dim=-1) == sink.view(-1, 1, 1)).to(weights.dtype)  # (B, H, T)
    return query_mean(is_sink, queries)


def sink_score(weights: torch.Tensor, sink: torch.Tensor) -> torch.Tensor:
    """alpha_s = mean over queries i >= s of A_{i, s} (Gu et al. 2025, arXiv 2410.10781), (H,).

    Query 0 is included (for s = 0 every query counts), as in the reference code.
    """
    T = weights.shape[2]
    queries = torch.arange(T, device=weights.device)[None, :] >= sink[:, None]  # (B, T)
    return sink_attn(weights, sink, queries)


def sink_rate(scores: torch.Tensor, eps: float) -> torch.Tensor:
    """Share of heads whose sink score exceeds eps (Gu et al. 2025: eps = 0.3; Barbero et al. 2025: 0.8)."""
    return (scores > eps).to(scores.dtype).mean()
