"""Sink metrics as pure tensor functions (definitions: docs/metrics.md); no model, no I/O.

Conventions: `weights` A is (B, H, T, S) as the normaliser produced it (rows of non-normalised
variants need not sum to 1); `sink` is (B,) long, the sink key of each sequence; `queries` is a
(B, T) bool mask of the queries to average over. Results are per head, (H,). A mean over an empty
query set is NaN (the caller drops it), never a silent 0.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch
import torch.nn.functional as F


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


def head_values(v: torch.Tensor, w_out: torch.Tensor) -> torch.Tensor:
    """W_O^h v_j, what each key writes through each head, (B, H, S, d_model); v (B, H, S, D), w_out (d, H * D)."""
    H, D = v.shape[1], v.shape[3]
    return torch.einsum("bhsd,mhd->bhsm", v, w_out.view(-1, H, D))


def head_factors(w_out: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(D, H * D) R_h side by side, W_O^h = Q_h R_h (reduced QR, Q_h orthonormal columns): head_values
    through it gives R_h v, whose norms and Gram matrices are W_O^h v's in D dimensions, not d_model."""
    heads = w_out.view(w_out.shape[0], n_heads, -1).transpose(0, 1)  # (H, d_model, D)
    fewer = heads.shape[2] > heads.shape[1]  # fewer output dimensions than a head's: nothing to save
    return w_out if fewer else torch.linalg.qr(heads)[1].transpose(0, 1).reshape(heads.shape[2], -1)


def sink_value_norm(values: torch.Tensor, sink: torch.Tensor) -> torch.Tensor:
    norms = values.norm(dim=-1)  # (B, H, S): ||W_O^h v||, values from head_values; mean over sequences, (H,)
    return norms.gather(-1, sink.view(-1, 1, 1).expand(-1, norms.shape[1], 1)).squeeze(-1).mean(0)


def value_norm_ratio(values: torch.Tensor, sink: torch.Tensor) -> torch.Tensor:
    """||W_O v_s|| / mean_{j != s} ||W_O v_j||, per sequence then averaged, (H,) (Fesser et al. 2026:
    NOP-like <= 0.2, broadcast-like >= 0.5)."""
    norms = values.norm(dim=-1)  # (B, H, S)
    B, H, S = norms.shape
    at_sink = norms.gather(-1, sink.view(B, 1, 1).expand(B, H, 1)).squeeze(-1)
    rest = (norms.sum(-1) - at_sink) / (S - 1)
    return (at_sink / rest).mean(0)


def head_cancellation(updates: torch.Tensor, queries: torch.Tensor, written: torch.Tensor | None = None):
    """||sum_h u_h|| / sum_h ||u_h|| at each query, mean over the queries in `queries` (B, T); a scalar.
    u_h = W_O^h (A V)_h is what head h writes at the query (updates (B, H, T, d_model); `written`
    (B, T, d_model) sum_h u_h when they are head_factors' compact ones). 1: the heads write in one
    direction (always, with one head); near 0: they cancel. Queries where no head writes are skipped."""
    total = updates.sum(1).norm(dim=-1) if written is None else written.norm(dim=-1)  # (B, T)
    parts = updates.norm(dim=-1).sum(1)  # (B, T)
    keep = queries & (parts > 0)
    return (total[keep] / parts[keep]).mean()


COMMON_MODE_EPS = 1e-12


def common_mode_fraction(update: torch.Tensor) -> torch.Tensor:
    """E(mean_i o_i) / (E(O) + 1e-12) of a layer's write O (B, T, d_model), E the mean squared entry; a
    scalar. 1: a broadcast; 0: the writes cancel (Fesser et al. 2026, Eq. 5; common_mode_penalty's term)."""
    return update.mean(dim=1).pow(2).mean() / (update.pow(2).mean() + COMMON_MODE_EPS)


def rms_ratio(numerator: torch.Tensor, denominator: torch.Tensor) -> torch.Tensor:
    """RMS(numerator) / RMS(denominator) over every entry; a scalar (NaN when the denominator is all 0)."""
    rms = denominator.pow(2).mean().sqrt()
    return numerator.pow(2).mean().sqrt() / torch.where(rms > 0, rms, torch.nan)


def stable_rank(update: torch.Tensor) -> torch.Tensor:
    """||U||_F^2 / ||U||_2^2 of each head's update U (B, H, T, d_model), averaged over sequences, (H,)."""
    # ||U||_2^2: the largest eigenvalue of the smaller Gram matrix (T x T or d x d), divided by its trace
    # (||U||_F^2) so its eigenvalues lie in [0, 1] and the ratio is 1 / the largest. head_values' output
    # is stored head-major (H, B, ...): multiplied in (B, H) order torch copies it first (5x slower at
    # Pythia-70M's shape); in memory order the products are the same bit for bit.
    swap = not update.is_contiguous() and update.transpose(0, 1).is_contiguous()
    stored = update.transpose(0, 1) if swap else update
    transposed = stored.transpose(-2, -1)
    gram = stored @ transposed if stored.shape[-2] <= stored.shape[-1] else transposed @ stored
    gram = gram.transpose(0, 1) if swap else gram
    trace = gram.diagonal(dim1=-2, dim2=-1).sum(-1)
    usable = gram.isfinite().all(dim=-1).all(dim=-1) & (trace > 0)  # a diverged run's or a zero update: NaN
    unit = torch.where(usable[..., None, None], gram / torch.where(usable, trace, 1.0)[..., None, None], 0.0)
    try:
        spectral = largest_eigenvalues(unit)
    except torch.linalg.LinAlgError:  # LAPACK's eigensolver can give up on a nearly degenerate matrix
        spectral = torch.linalg.svdvals(unit)[..., 0]
    return torch.where(usable, 1 / spectral, torch.nan).mean(0)


def largest_eigenvalues(symmetric: torch.Tensor) -> torch.Tensor:
    """The largest eigenvalue of each symmetric matrix of a batch (B, ..., n, n) -> (B, ...).

    torch solves a batch of eigenproblems one after another on one core, so the sequences are split
    among torch's threads, each solving its own (LAPACK releases the GIL): each matrix is solved
    alone either way, so the values are the same bit for bit, in less time on 2 threads
    (scripts/bench_choices.py times both, docs/performance.md)."""
    threads = min(torch.get_num_threads(), len(symmetric))
    if threads < 2 or symmetric.device.type != "cpu":
        return torch.linalg.eigvalsh(symmetric)[..., -1]
    with ThreadPoolExecutor(threads) as pool:
        return torch.cat(list(pool.map(torch.linalg.eigvalsh, symmetric.chunk(threads))))[..., -1]


def qk_spectrum(
    w_q: torch.Tensor, w_k: torch.Tensor, n_heads: int, top: int = 3, gain: torch.Tensor | None = None
) -> torch.Tensor:
    """Top singular values of the bilinear form W_Q^h^T W_K^h that scores x_i against x_j, (H, top);
    w_q, w_k (H * D, d_model) Linear weights, so s_ij = x_i^T (w_q_h^T w_k_h) x_j / sqrt(D). With
    w_q_h^T = Q_q R_q, w_k_h^T = Q_k R_k (reduced QR) the form has the singular values of the D x D
    R_q R_k^T: no d_model x d_model SVD (d_model 4096: hours over a 7B model's heads).
    `gain` (D,) or (H, D), g_q * g_k of a q/k RMSNorm's gains: the norm sets each query's and key's
    length, so W_Q^h and W_K^h are each divided by their largest singular value and the form is
    W_Q^h^T diag(gain) W_K^h (docs/metrics.md: unchanged by rescaling either, at most max |gain|)."""
    d_model = w_q.shape[1]
    q = w_q.view(n_heads, -1, d_model)  # (H, D, d_model)
    k = w_k.view(n_heads, -1, d_model)
    if gain is not None:
        q = q / torch.linalg.matrix_norm(q, ord=2, keepdim=True)
        k = k / torch.linalg.matrix_norm(k, ord=2, keepdim=True)
        q = q * gain.expand(n_heads, q.shape[1])[..., None]  # diag(gain) W_Q^h: the gains scale q's channels
    if q.shape[1] >= d_model:
        return torch.linalg.svdvals(q.transpose(1, 2) @ k)[:, :top]
    r_q, r_k = torch.linalg.qr(q.transpose(1, 2))[1], torch.linalg.qr(k.transpose(1, 2))[1]  # (H, D, D)
    return torch.linalg.svdvals(r_q @ r_k.transpose(1, 2))[:, :top]


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


def norms_at_sink(x: torch.Tensor, sink: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per head (H,), the mean over sequences of ||x_s|| and over sequences and positions j != s of ||x_j||,
    of x (B, H, S, D), keys or values (Gu et al. 2025, Fig. 2: the first token's key and value norms)."""
    norms = x.norm(dim=-1)  # (B, H, S)
    B, H, S = norms.shape
    at = norms.gather(-1, sink.view(B, 1, 1).expand(B, H, 1)).squeeze(-1)  # (B, H)
    rest = (norms.sum(-1) - at) / (S - 1)
    return at.mean(0), rest.mean(0)


def resid_norms(resid: torch.Tensor, sink: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean ||h_s||, mean over j != s of ||h_j||) of a residual stream (B, T, d), as scalars."""
    at, rest = norms_at_sink(resid[:, None], sink)
    return at[0], rest[0]


def massive_ratio(resid: torch.Tensor) -> torch.Tensor:
    """max |h| / median |h| over every entry of a residual stream (Sun et al. 2024's massive activations);
    infinite when more than half the entries are exactly 0 (the evaluator then writes no row)."""
    magnitude = resid.abs().flatten()
    return magnitude.max() / lower_median(magnitude)


def lower_median(values: torch.Tensor) -> torch.Tensor:
    """torch.median of a flat tensor (the entry at (n - 1) // 2 in sorted order, NaN where one is NaN):
    on the CPU numpy's selection finds the same entry, 3-6x faster than torch's sort."""
    if values.device.type != "cpu" or values.dtype not in (torch.float32, torch.float64) or values.requires_grad:
        return values.median()
    middle = (values.numel() - 1) // 2
    chosen = np.partition(values.numpy(), middle)  # NaN orders last, as in torch's sort: any lies after middle
    nan = np.isnan(chosen[middle:]).any()
    return values.new_tensor(float("nan")) if nan else torch.from_numpy(chosen[middle : middle + 1]).reshape(())


def massive_location(resid: torch.Tensor, sink: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Where the massive activation sits. resid (B, T, d), sink (B,): the position and the channel of
    the largest |h| entry over the whole batch, and the share of sequences whose own largest |h|
    entry sits at their sink position (Sun et al. 2024: at the first token, in a few fixed channels)."""
    magnitude = resid.abs()
    _, T, d = magnitude.shape
    largest = magnitude.flatten().argmax()
    at_sink = magnitude.amax(dim=-1).argmax(dim=-1) == sink  # (B,)
    return (largest // d) % T, largest % d, at_sink.float().mean()


def key_alignment(k: torch.Tensor, sink: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """How constant keys are across sequences, per head: (at the sink, elsewhere), each (H,), of k
    (B, H, S, D), sink (B,). The mean over sequences of cos(k_b, mean over sequences of k) at each
    sequence's sink, and the same at every other position against its own mean, averaged over them.
    1 when every sequence has the same key there; a sink key near 1 while others are not is Sun et
    al.'s spike-to-sink path (the spiking token's normalised state, hence its key, barely varies)."""
    B, H, S, _ = k.shape
    rows = torch.arange(B, device=k.device)
    at_sink = k[rows, :, sink]  # (B, H, D)
    sink_cos = F.cosine_similarity(at_sink, at_sink.mean(0, keepdim=True), dim=-1).mean(0)
    others = torch.ones(B, S, dtype=torch.bool, device=k.device)
    others[rows, sink] = False
    mean = (k * others[:, None, :, None]).sum(0) / others.sum(0).clamp_min(1)[None, :, None]  # (H, S, D)
    cos = F.cosine_similarity(k, mean.expand_as(k), dim=-1)  # (B, H, S)
    rest = (cos * others[:, None]).sum((0, 2)) / others.sum().clamp_min(1)
    return sink_cos, rest
