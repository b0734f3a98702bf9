"""What the heads and the layer write: each head's value vectors through W_O, whether the heads'
writes cancel, the rank of a head's update, the common mode of a layer's write (docs/metrics.md:
`value_norm_ratio`, `sink_value_norm`, `head_cancellation`, `common_mode`, `pathway_*`,
`stable_rank`). Pure tensor functions; conventions in metrics/__init__.py."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import torch


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
