"""The spectrum of a head's weights: the singular values of the bilinear form W_Q^h^T W_K^h that
scores a query against a key (docs/metrics.md: `qk_sigma1..3`, `qk_sigma1/sigma2`). A pure tensor
function of the weights, no forward pass; conventions in metrics/__init__.py."""

from __future__ import annotations

import torch


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
