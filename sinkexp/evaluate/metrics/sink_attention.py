"""Where the attention goes: the weight on the sink, its share of the row, the most-attended key,
the sink score and sink rate, and the scores' gap to the sink (docs/metrics.md, the rows from
`sink_attn` to `logit_gap`). Pure tensor functions; conventions in metrics/__init__.py."""

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
    share = weights / total.clamp_min(torch.finfo(weights.dtype).tiny)
    return share.masked_fill_(~(total > 0), 0.0)  # in place: one (B, H, T, S) buffer, not two


def query_mean(per_query: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
    """Mean of (B, H, T, ...) over the selected (b, i) pairs -> (H, ...)."""
    mask = queries[:, None, :].to(per_query.dtype)  # (B, 1, T)
    while mask.dim() < per_query.dim():
        mask = mask[..., None]
    return (per_query * mask).sum(dim=(0, 2)) / mask.sum(dim=(0, 2))  # NaN when empty


def sink_attn(weights: torch.Tensor, sink: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
    """mean_{i in queries} A_{i, s}, (H,)."""
    return query_mean(at_sink(weights, sink), queries)


def sink_attn_by_position(weights: torch.Tensor, sink: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
    """mean_b A[b, h, i, s_b] over the sequences b in which query i is selected, per position: (H, T),
    NaN at a position no sequence selects (Ran-Milo 2026's Theorem 2 quantifies over positions)."""
    mask = queries[:, None, :].to(weights.dtype)  # (B, 1, T)
    return (at_sink(weights, sink) * mask).sum(0) / mask.sum(0)  # (H, T); 0/0 = NaN


def column_inflow(weights: torch.Tensor, queries: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(inflow (B, H, S): each key's mean attention from the sequence's selected queries, has (B,):
    whether the sequence has any)."""
    mask = queries[:, None, :, None].to(weights.dtype)  # (B, 1, T, 1)
    count = queries.sum(dim=1)  # (B,)
    return (weights * mask).sum(dim=2) / count.clamp_min(1)[:, None, None], count > 0


def max_inflow(weights: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
    """Per sequence, max over keys j of the mean over its queries of A_{i, j}; then the mean over the
    sequences that have such queries, (H,). Taken per sequence (as Fesser et al.'s code does), so a
    sink that sits at a different key in every sequence (the broadcast hub) still counts in full."""
    return max_inflow_of(*column_inflow(weights, queries))


def max_inflow_of(inflow: torch.Tensor, has: torch.Tensor) -> torch.Tensor:
    """max_inflow from column_inflow's (inflow, has)."""
    return inflow.amax(dim=-1)[has].mean(dim=0)  # NaN when no sequence has one


def sink_match_seq(weights: torch.Tensor, sink: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
    """Share of sequences whose most-attended key (mean over the sequence's queries) is its sink,
    (H,): Fesser et al.'s `sink_match`. `sink_match` below is the per-query version; the two agree
    once every query attends to the sink, not while it forms."""
    return sink_match_seq_of(*column_inflow(weights, queries), sink)


def sink_match_seq_of(inflow: torch.Tensor, has: torch.Tensor, sink: torch.Tensor) -> torch.Tensor:
    """sink_match_seq from column_inflow's (inflow, has)."""
    return (inflow.argmax(dim=-1) == sink[:, None]).to(inflow.dtype)[has].mean(dim=0)


def sink_match(weights: torch.Tensor, sink: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
    """Share of queries whose argmax key is the sink, (H,)."""
    return query_mean(top_key_is_sink(weights, sink), queries)


def top_key_is_sink(weights: torch.Tensor, sink: torch.Tensor) -> torch.Tensor:
    """1 where a query's most-attended key is its sequence's sink, else 0, (B, H, T)."""
    return (weights.argmax(dim=-1) == sink.view(-1, 1, 1)).to(weights.dtype)


def sink_scores(weights: torch.Tensor, sink: torch.Tensor) -> torch.Tensor:
    """alpha_s per sequence: mean over queries i >= s of A_{i, s}, (B, H) (Gu et al. 2025, arXiv
    2410.10781). Query 0 is included (for s = 0 every query counts), as in their code
    (sail-sg/Attention-Sink pretrain/eval_sink_pretrain.py). Pass row-normalised weights for the
    variants whose rows need not sum to 1, as that code does."""
    T = weights.shape[2]
    queries = (torch.arange(T, device=weights.device)[None, :] >= sink[:, None]).to(weights.dtype)  # (B, T)
    return (at_sink(weights, sink) * queries[:, None, :]).sum(-1) / queries.sum(-1)[:, None]


def sink_score(weights: torch.Tensor, sink: torch.Tensor) -> torch.Tensor:
    return sink_scores(weights, sink).mean(dim=0)  # alpha_s, the mean over sequences, (H,)


def sink_rate(scores: torch.Tensor, eps: float) -> torch.Tensor:
    """Share of heads whose sink score exceeds eps (Gu et al. 2025: 0.3; Barbero et al. 2025: 0.8); of
    per-sequence scores (B, H), counted in each sequence and averaged over them, as Gu et al.'s code."""
    return (scores > eps).to(scores.dtype).mean()


def logit_gap(scores: torch.Tensor, sink: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
    """s_{i, sink} - mean over visible j not in {sink, i} of s_{i, j}, (B, H, T); NaN where no such j
    or where query i does not see the sink (a sliding window past it). visible (T, S) bool."""
    B, H, T, S = scores.shape
    keys = torch.arange(S, device=scores.device)
    others = visible[None] & (keys[None, None, :] != sink.view(B, 1, 1))  # (B, T, S)
    others &= keys[None, None, :] != torch.arange(T, device=scores.device)[None, :, None]
    others = others[:, None].to(scores.dtype)  # (B, 1, T, S)
    mean_others = (scores * others).sum(-1) / others.sum(-1)  # NaN when empty
    sees_sink = visible[:, sink].T  # (B, T)
    return (at_sink(scores, sink) - mean_others).masked_fill(~sees_sink[:, None], torch.nan)
