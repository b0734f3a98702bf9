"""The QK spectrum of a head's weights (evaluate/metrics/spectrum.py): a known bilinear form, the QR
route against the full SVD, and heads with a q/k RMSNorm (Gemma-3, model.qk_norm; docs/metrics.md)."""

import torch

from sinkexp.evaluate.metrics import spectrum


def orthonormal_rows(generator, rows: int, width: int) -> torch.Tensor:
    return torch.linalg.qr(torch.randn(width, rows, generator=generator))[0].T  # (rows, width), orthonormal rows


def test_qk_spectrum_of_a_known_bilinear_form():
    d_model, H, D = 4, 2, 2
    w_q = torch.zeros(H * D, d_model)
    w_k = torch.zeros(H * D, d_model)
    w_q[0, 0], w_q[1, 1] = 3.0, 1.0  # head 0: W_Q^T W_K = diag(3, 1, 0, 0)
    w_k[0, 0], w_k[1, 1] = 1.0, 1.0
    w_q[2, 2], w_k[2, 3] = 2.0, 1.0  # head 1: rank one, singular value 2
    sigma = spectrum.qk_spectrum(w_q, w_k, n_heads=H, top=2)
    torch.testing.assert_close(sigma, torch.tensor([[3.0, 1.0], [2.0, 0.0]]))


def test_qk_spectrum_through_qr_equals_the_full_svd():
    """Random heads of dimension 8 in width 32: the D x D route gives the d x d form's singular values."""
    generator = torch.Generator().manual_seed(0)
    w_q, w_k = torch.randn(4 * 8, 32, generator=generator), torch.randn(4 * 8, 32, generator=generator)
    full = torch.linalg.svdvals(w_q.view(4, 8, 32).transpose(1, 2) @ w_k.view(4, 8, 32))[:, :5]
    torch.testing.assert_close(spectrum.qk_spectrum(w_q, w_k, n_heads=4, top=5), full, rtol=1e-4, atol=1e-4)


def test_qk_sigma_with_a_qk_norm_is_the_gain_form_whatever_the_projections_scale():
    """Projections that are isometries scaled by any c: the norm undoes c, and the form the softmax
    applies to the unit-RMS query and key is diag(g_q * g_k): its singular values are the |gains|."""
    generator, H, D, d_model = torch.Generator().manual_seed(0), 2, 3, 8
    gain = torch.tensor([0.5, -2.0, 1.5])
    w_q = torch.cat([orthonormal_rows(generator, D, d_model) for _ in range(H)])
    w_k = torch.cat([orthonormal_rows(generator, D, d_model) for _ in range(H)])
    expected = torch.tensor([[2.0, 1.5, 0.5]] * H)
    for c_q, c_k in ((1.0, 1.0), (7.0, 0.01)):
        sigma = spectrum.qk_spectrum(c_q * w_q, c_k * w_k, n_heads=H, gain=gain)
        torch.testing.assert_close(sigma, expected)
    assert spectrum.qk_spectrum(7.0 * w_q, w_k, n_heads=H)[0, 0] > 6.9  # without the norm the scale shows


def test_qk_sigma_with_a_qk_norm_keeps_the_forms_shape_and_stays_under_the_gains():
    """Any projections: sigma1/sigma2 is that of W_Q^T diag(gain) W_K, and sigma1 <= max |gain|."""
    generator, H, D, d_model = torch.Generator().manual_seed(1), 3, 4, 16
    w_q, w_k = torch.randn(H * D, d_model, generator=generator), torch.randn(H * D, d_model, generator=generator)
    gain = 1 + torch.rand(D, generator=generator)
    sigma = spectrum.qk_spectrum(w_q, w_k, n_heads=H, gain=gain)
    direct = torch.linalg.svdvals(w_q.view(H, D, d_model).transpose(1, 2) @ (gain[:, None] * w_k.view(H, D, d_model)))
    torch.testing.assert_close(sigma[:, 0] / sigma[:, 1], direct[:, 0] / direct[:, 1], rtol=1e-4, atol=0)
    assert (sigma[:, 0] <= gain.max() + 1e-6).all()
