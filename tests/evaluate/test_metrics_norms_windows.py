"""Two metric definitions that real models' architectures test (docs/metrics.md): qk_sigma of heads
with a q/k RMSNorm (Gemma-3, model.qk_norm), and logit_gap where a sliding window hides the sink."""

import torch

from sinkexp.evaluate import metrics


def orthonormal_rows(generator, rows: int, width: int) -> torch.Tensor:
    return torch.linalg.qr(torch.randn(width, rows, generator=generator))[0].T  # (rows, width), orthonormal rows


def test_qk_sigma_with_a_qk_norm_is_the_gain_form_whatever_the_projections_scale():
    """Projections that are isometries scaled by any c: the norm undoes c, and the form the softmax
    applies to the unit-RMS query and key is diag(g_q * g_k): its singular values are the |gains|."""
    generator, H, D, d_model = torch.Generator().manual_seed(0), 2, 3, 8
    gain = torch.tensor([0.5, -2.0, 1.5])
    w_q = torch.cat([orthonormal_rows(generator, D, d_model) for _ in range(H)])
    w_k = torch.cat([orthonormal_rows(generator, D, d_model) for _ in range(H)])
    expected = torch.tensor([[2.0, 1.5, 0.5]] * H)
    for c_q, c_k in ((1.0, 1.0), (7.0, 0.01)):
        spectrum = metrics.qk_spectrum(c_q * w_q, c_k * w_k, n_heads=H, gain=gain)
        torch.testing.assert_close(spectrum, expected)
    assert metrics.qk_spectrum(7.0 * w_q, w_k, n_heads=H)[0, 0] > 6.9  # without the norm the scale shows


def test_qk_sigma_with_a_qk_norm_keeps_the_forms_shape_and_stays_under_the_gains():
    """Any projections: sigma1/sigma2 is that of W_Q^T diag(gain) W_K, and sigma1 <= max |gain|."""
    generator, H, D, d_model = torch.Generator().manual_seed(1), 3, 4, 16
    w_q, w_k = torch.randn(H * D, d_model, generator=generator), torch.randn(H * D, d_model, generator=generator)
    gain = 1 + torch.rand(D, generator=generator)
    spectrum = metrics.qk_spectrum(w_q, w_k, n_heads=H, gain=gain)
    direct = torch.linalg.svdvals(w_q.view(H, D, d_model).transpose(1, 2) @ (gain[:, None] * w_k.view(H, D, d_model)))
    torch.testing.assert_close(spectrum[:, 0] / spectrum[:, 1], direct[:, 0] / direct[:, 1], rtol=1e-4, atol=0)
    assert (spectrum[:, 0] <= gain.max() + 1e-6).all()


def test_logit_gap_leaves_out_the_queries_whose_window_has_passed_the_sink():
    """A window of 2 (each query sees itself and the key before it): queries 0 and 1 see the sink
    and nothing else but themselves (no gap), queries 2 and 3 do not see it (no gap either); with a
    window of 3, query 2 sees keys 0, 1 and 2: s_20 - s_21."""
    scores = torch.arange(16.0).view(1, 1, 4, 4)

    def band(width: int) -> torch.Tensor:  # query i sees keys i - width < j <= i
        return torch.ones(4, 4, dtype=torch.bool).tril() & ~torch.ones(4, 4, dtype=torch.bool).tril(-width)

    sink = torch.zeros(1, dtype=torch.long)
    assert metrics.logit_gap(scores, sink, band(2)).isnan().all()
    gap = metrics.logit_gap(scores, sink, band(3))[0, 0]
    assert gap[2].item() == scores[0, 0, 2, 0] - scores[0, 0, 2, 1] and gap[[0, 1, 3]].isnan().all()


def test_the_heads_writes_through_their_factors_keep_every_norm_and_rank():
    """value_norm_ratio, sink_value_norm, stable_rank and head_cancellation read each head's writes
    through R_h (W_O^h = Q_h R_h, D dimensions; the evaluator's way) as they read them through W_O
    (d_model dimensions, the definitions' direct computation): equal to float32 rounding."""
    generator = torch.Generator().manual_seed(2)
    B, H, T, D, d_model = 3, 4, 10, 8, 48
    mixed, v = torch.randn(2, B, H, T, D, generator=generator)
    w_o = torch.randn(d_model, H * D, generator=generator)
    compact, sink = metrics.head_factors(w_o, H), torch.tensor([0, 2, 0])
    assert compact.shape == (D, H * D)
    direct, small = metrics.head_values(v, w_o), metrics.head_values(v, compact)
    for metric in (metrics.value_norm_ratio, metrics.sink_value_norm):
        torch.testing.assert_close(metric(small, sink), metric(direct, sink), rtol=1e-5, atol=0)
    updates, compact_updates = metrics.head_values(mixed, w_o), metrics.head_values(mixed, compact)
    torch.testing.assert_close(metrics.stable_rank(compact_updates), metrics.stable_rank(updates), rtol=1e-5, atol=0)
    queries = torch.ones(B, T, dtype=torch.bool)
    written = mixed.transpose(1, 2).reshape(B, T, H * D) @ w_o.T
    torch.testing.assert_close(
        metrics.head_cancellation(compact_updates, queries, written), metrics.head_cancellation(updates, queries)
    )
