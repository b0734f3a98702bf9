"""Metrics on hand-built attention tensors with closed-form answers."""

import math

import pytest
import torch

from sinkexp.evaluate import metrics


def uniform_causal(B=2, H=3, T=6):
    """A_ij = 1/(i+1) for j <= i: the causal mean."""
    visible = torch.ones(T, T).tril()
    return (visible / visible.sum(-1, keepdim=True)).expand(B, H, T, T).clone()


def all_on_key(key, B=2, H=3, T=6):
    weights = torch.zeros(B, H, T, T)
    weights[..., key] = 1.0
    return weights


def non_bos(B, T):
    queries = torch.ones(B, T, dtype=torch.bool)
    queries[:, 0] = False
    return queries


def test_all_mass_on_the_sink():
    B, H, T = 2, 3, 6
    weights, sink = all_on_key(0), torch.zeros(B, dtype=torch.long)
    queries = non_bos(B, T)
    assert torch.allclose(metrics.sink_attn(weights, sink, queries), torch.ones(H))
    assert torch.allclose(metrics.max_inflow(weights, queries), torch.ones(H))
    assert torch.allclose(metrics.sink_match(weights, sink, queries), torch.ones(H))
    assert torch.allclose(metrics.sink_score(weights, sink), torch.ones(H))
    assert metrics.sink_rate(metrics.sink_score(weights, sink), 0.8) == 1.0


def test_uniform_causal_attention_closed_form():
    B, H, T = 2, 3, 6
    weights, sink = uniform_causal(B, H, T), torch.zeros(B, dtype=torch.long)
    # queries 1..T-1 pay 1/(i+1) to key 0
    expected = sum(1 / (i + 1) for i in range(1, T)) / (T - 1)
    assert torch.allclose(metrics.sink_attn(weights, sink, non_bos(B, T)), torch.full((H,), expected))
    # key 0 receives the largest mean attention
    assert torch.allclose(metrics.max_inflow(weights, non_bos(B, T)), torch.full((H,), expected))
    # query 0 included in the sink score: H_T / T (harmonic number)
    harmonic = sum(1 / (i + 1) for i in range(T))
    assert torch.allclose(metrics.sink_score(weights, sink), torch.full((H,), harmonic / T))
    assert metrics.sink_rate(metrics.sink_score(weights, sink), 0.3) == (harmonic / T > 0.3)


def test_sink_position_per_sequence():
    B, H, T = 2, 1, 5
    weights = torch.zeros(B, H, T, T)
    weights[0, ..., 2] = 1.0  # sequence 0 attends to key 2
    weights[1, ..., 4] = 1.0  # sequence 1 attends to key 4
    sink = torch.tensor([2, 4])
    queries = torch.ones(B, T, dtype=torch.bool)
    assert metrics.sink_attn(weights, sink, queries).item() == 1.0
    assert metrics.sink_match(weights, sink, queries).item() == 1.0
    assert metrics.sink_attn(weights, torch.tensor([4, 2]), queries).item() == 0.0
    # sink score counts queries i >= s only: all of them attend to the sink here
    assert metrics.sink_score(weights, sink).item() == 1.0
    # max_inflow is taken per sequence: key 2 takes all of sequence 0's attention, key 4 all of
    # sequence 1's, so the moving sink counts in full (pooling the batch first would give 0.5)
    assert metrics.max_inflow(weights, queries).item() == 1.0
    half = torch.zeros(B, H, T, T)
    half[0, ..., 2] = 1.0
    half[1, ..., 0], half[1, ..., 4] = 0.4, 0.6
    assert metrics.max_inflow(half, queries).item() == pytest.approx(0.8)
    assert metrics.sink_match_seq(half, sink, queries).item() == 1.0  # key 4 still leads sequence 1


def test_sink_match_per_query_and_per_sequence_differ_while_the_sink_forms():
    """Every query puts 0.4 on the sink and 0.6 on another key (its own; key 1 for query 0): no
    query's argmax is the sink, yet the sink has the largest column mean (0.4 against 0.3)."""
    T = 4
    weights = torch.zeros(1, 1, T, T)
    for i in range(T):
        weights[0, 0, i, 0] = 0.4
        weights[0, 0, i, i if i else 1] += 0.6
    queries = torch.ones(1, T, dtype=torch.bool)
    sink = torch.tensor([0])
    assert metrics.sink_match(weights, sink, queries).item() == 0.0  # every query's argmax is another key
    assert metrics.sink_match_seq(weights, sink, queries).item() == 1.0  # column means: 0.4 vs <= 0.3


def test_row_share_handles_empty_rows_and_scales():
    weights = torch.tensor([[[[0.0, 0.0, 0.0], [0.2, 0.2, 0.0], [3.0, 1.0, 0.0]]]])
    share = metrics.row_share(weights)
    assert torch.equal(share[0, 0, 0], torch.zeros(3))  # 0/0 := 0
    assert torch.allclose(share[0, 0, 1], torch.tensor([0.5, 0.5, 0.0]))
    assert torch.allclose(share[0, 0, 2], torch.tensor([0.75, 0.25, 0.0]))


def test_empty_query_set_gives_nan_not_zero():
    weights, sink = all_on_key(0), torch.zeros(2, dtype=torch.long)
    none = torch.zeros(2, 6, dtype=torch.bool)
    assert torch.isnan(metrics.sink_attn(weights, sink, none)).all()


@pytest.mark.parametrize("eps,expected", [(0.3, 2 / 4), (0.8, 1 / 4), (0.95, 0.0)])
def test_sink_rate_counts_heads_above_eps(eps, expected):
    scores = torch.tensor([0.9, 0.5, 0.1, 0.3])  # 0.3 is not > 0.3
    assert math.isclose(metrics.sink_rate(scores, eps).item(), expected)


def test_value_norms_through_the_output_projection():
    B, H, S, D = 2, 2, 4, 3
    v = torch.ones(B, H, S, D)
    v[:, 0, 0] = 0.0  # head 0: the sink writes nothing
    v[:, 1, 0] = 2.0  # head 1: the sink writes twice as much as the rest
    w_out = torch.eye(H * D)  # W_O = identity: head h writes into its own D channels
    values = metrics.head_values(v, w_out)  # (B, H, S, H * D)
    assert values.shape == (B, H, S, H * D)
    assert torch.allclose(values[0, 1, 2, 3:], torch.ones(3)) and values[0, 1, 2, :3].abs().sum() == 0
    sink = torch.zeros(B, dtype=torch.long)
    torch.testing.assert_close(metrics.value_norm_ratio(values, sink), torch.tensor([0.0, 2.0]))
    torch.testing.assert_close(metrics.sink_value_norm(values, sink), torch.tensor([0.0, 2 * 3**0.5]))


def test_stable_rank_closed_forms():
    rank_one = torch.outer(torch.arange(1.0, 5.0), torch.ones(6)).expand(2, 1, 4, 6)  # (B, H, T, d)
    torch.testing.assert_close(metrics.stable_rank(rank_one), torch.tensor([1.0]))
    orthonormal = torch.eye(4).expand(2, 1, 4, 4)
    torch.testing.assert_close(metrics.stable_rank(orthonormal), torch.tensor([4.0]))
    diverged = orthonormal.clone()
    diverged[0, 0, 0, 0] = float("inf")  # a diverged run's update: NaN, no LAPACK error
    assert metrics.stable_rank(diverged).isnan().all()
    assert metrics.stable_rank(torch.zeros(2, 1, 4, 6)).isnan().all()  # no update: no rank


def test_stable_rank_is_the_svds_at_any_scale_and_when_the_eigensolver_gives_up(monkeypatch):
    """||U||_F^2 / sigma_1^2 from the full SVD, for updates of norm 1e-20 to 1e20 (a raw ReLU run's
    grow without bound), and through the SVD fallback when LAPACK's eigensolver fails to converge."""
    update = torch.randn(3, 2, 5, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    sigma = torch.linalg.svdvals(update)
    expected = (sigma.pow(2).sum(-1) / sigma[..., 0].pow(2)).mean(0)
    for scale in (1e-20, 1.0, 1e20):
        torch.testing.assert_close(metrics.stable_rank(update * scale), expected)

    def gives_up(_):
        raise torch.linalg.LinAlgError("linalg.eigh: the algorithm failed to converge")

    monkeypatch.setattr(torch.linalg, "eigvalsh", gives_up)
    torch.testing.assert_close(metrics.stable_rank(update * 1e20), expected)


def test_stable_rank_is_the_same_bit_for_bit_on_any_thread_count_and_memory_order():
    """The eigenproblems split among two threads, and an update stored head-major as head_values
    leaves it, give exactly the values of one thread on a contiguous update."""
    update = torch.randn(4, 3, 6, 10, generator=torch.Generator().manual_seed(1))
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        alone = metrics.stable_rank(update)
        torch.set_num_threads(2)
        assert torch.equal(metrics.stable_rank(update), alone)
        head_major = update.transpose(0, 1).contiguous().transpose(0, 1)  # (B, H, ...) viewed, stored (H, B, ...)
        assert torch.equal(metrics.stable_rank(head_major), alone)
    finally:
        torch.set_num_threads(threads)


def test_qk_spectrum_of_a_known_bilinear_form():
    d_model, H, D = 4, 2, 2
    w_q = torch.zeros(H * D, d_model)
    w_k = torch.zeros(H * D, d_model)
    w_q[0, 0], w_q[1, 1] = 3.0, 1.0  # head 0: W_Q^T W_K = diag(3, 1, 0, 0)
    w_k[0, 0], w_k[1, 1] = 1.0, 1.0
    w_q[2, 2], w_k[2, 3] = 2.0, 1.0  # head 1: rank one, singular value 2
    spectrum = metrics.qk_spectrum(w_q, w_k, n_heads=H, top=2)
    torch.testing.assert_close(spectrum, torch.tensor([[3.0, 1.0], [2.0, 0.0]]))


def test_logit_gap_on_hand_built_scores():
    scores = torch.tensor([[5.0, 0.0, 0.0], [4.0, 1.0, 0.0], [6.0, 2.0, 4.0]]).view(1, 1, 3, 3)
    causal = torch.ones(3, 3, dtype=torch.bool).tril()
    gap = metrics.logit_gap(scores, torch.zeros(1, dtype=torch.long), causal)[0, 0]
    assert torch.isnan(gap[0]) and torch.isnan(gap[1])  # no visible key besides the sink and itself
    assert gap[2].item() == 6.0 - 2.0  # key 1 only (key 2 is the query itself)
    full = torch.ones(3, 3, dtype=torch.bool)
    gap = metrics.logit_gap(scores, torch.zeros(1, dtype=torch.long), full)[0, 0]
    torch.testing.assert_close(gap, torch.tensor([5.0, 4.0, 4.0]))  # s_i0 - s_i(other non-self key)


def test_lower_median_is_torchs_median_entry_for_entry():
    assert metrics.lower_median(torch.tensor([4.0, 1.0, 3.0, 2.0])).item() == 2.0  # the lower of the middle two
    generator = torch.Generator().manual_seed(0)
    cases = [
        torch.randn(n, generator=generator, dtype=dtype).abs()
        for n in (1, 2, 7, 1000, 4097)
        for dtype in (torch.float32, torch.float64)
    ]
    cases += [torch.randint(0, 3, (501,), generator=generator).float(), torch.tensor([1.0, float("nan"), 0.5])]
    cases += [torch.rand(1001, generator=generator).index_fill_(0, torch.tensor([3, 700]), float("nan"))]
    for values in cases:
        got, want = metrics.lower_median(values), values.median()
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.isnan().item() == want.isnan().item() and (want.isnan() or got == want).item()


def test_residual_norms_and_massive_ratio():
    resid = torch.ones(2, 4, 3)
    resid[:, 1] = torch.tensor([0.0, 3.0, 4.0])  # the sink row (position 1) has norm 5
    at_sink, rest = metrics.resid_norms(resid, torch.tensor([1, 1]))
    assert at_sink.item() == 5.0 and abs(rest.item() - 3**0.5) < 1e-6
    assert metrics.massive_ratio(resid).item() == 4.0  # max 4 over median 1
    position, channel, at_sink = metrics.massive_location(resid, torch.tensor([1, 1]))
    assert (position.item(), channel.item(), at_sink.item()) == (1, 2, 1.0)  # the 4 at position 1, channel 2
    resid[1, 3, 0] = -9.0  # sequence 1's largest |h| moves to position 3
    position, channel, at_sink = metrics.massive_location(resid, torch.tensor([1, 1]))
    assert (position.item(), channel.item(), at_sink.item()) == (3, 0, 0.5)


def test_qk_spectrum_through_qr_equals_the_full_svd():
    """Random heads of dimension 8 in width 32: the D x D route gives the d x d form's singular values."""
    generator = torch.Generator().manual_seed(0)
    w_q, w_k = torch.randn(4 * 8, 32, generator=generator), torch.randn(4 * 8, 32, generator=generator)
    full = torch.linalg.svdvals(w_q.view(4, 8, 32).transpose(1, 2) @ w_k.view(4, 8, 32))[:, :5]
    torch.testing.assert_close(metrics.qk_spectrum(w_q, w_k, n_heads=4, top=5), full, rtol=1e-4, atol=1e-4)


def test_key_and_value_norms_at_the_sink_per_head():
    """Head 0: the sink key (3, 4) has norm 5, the others (1, 0) norm 1; head 1: every key (0, 2).
    Sequence 1's sink sits at position 2, whose key is made the long one there."""
    x = torch.zeros(2, 2, 3, 2)
    x[:, 0] = torch.tensor([1.0, 0.0])
    x[:, 1] = torch.tensor([0.0, 2.0])
    x[0, 0, 0] = torch.tensor([3.0, 4.0])
    x[1, 0, 2] = torch.tensor([3.0, 4.0])
    at_sink, rest = metrics.norms_at_sink(x, torch.tensor([0, 2]))
    torch.testing.assert_close(at_sink, torch.tensor([5.0, 2.0]))
    torch.testing.assert_close(rest, torch.tensor([1.0, 2.0]))
    x[1, 0, 0] = torch.tensor([0.0, 3.0])  # a non-sink key of sequence 1: its mean (3 + 1) / 2
    _, rest = metrics.norms_at_sink(x, torch.tensor([0, 2]))
    torch.testing.assert_close(rest, torch.tensor([(1.0 + 2.0) / 2, 2.0]))


def test_head_cancellation_closed_forms():
    """Two heads: equal writes -> 1, opposite writes -> 0, orthogonal unit writes -> 1/sqrt(2);
    a query where no head writes is skipped, and only the selected queries count."""
    e1, e2 = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])
    updates = torch.stack(
        [
            torch.stack([e1, e1, e1, torch.zeros(2)]),  # head 0 at queries 0..3
            torch.stack([e1, -e1, e2, torch.zeros(2)]),
        ]
    )[None]  # head 1; (1, 2, 4, 2)
    per_query = [1.0, 0.0, 2**-0.5]
    for query in range(3):
        only = torch.zeros(1, 4, dtype=torch.bool)
        only[0, query] = True
        assert torch.isclose(metrics.head_cancellation(updates, only), torch.tensor(per_query[query]))
    everything = torch.ones(1, 4, dtype=torch.bool)
    assert torch.isclose(metrics.head_cancellation(updates, everything), torch.tensor(sum(per_query) / 3))


def test_sink_rate_is_counted_per_sequence_as_gu_et_al():
    """Two sequences, one head: all attention on the sink in the first, none in the second. The
    pooled score is 0.5 (> 0.3), but the head sinks in one sequence of two: rate 0.5, not 1."""
    T = 4
    weights = torch.zeros(2, 1, T, T)
    weights[0, 0, :, 0] = 1.0
    weights[1, 0] = torch.eye(T)  # each query on itself
    per_sequence = metrics.sink_scores(weights, torch.zeros(2, dtype=torch.long))
    torch.testing.assert_close(per_sequence, torch.tensor([[1.0], [1 / T]]))
    torch.testing.assert_close(
        metrics.sink_score(weights, torch.zeros(2, dtype=torch.long)), torch.tensor([(1 + 1 / T) / 2])
    )
    assert metrics.sink_rate(per_sequence, 0.3).item() == 0.5
    assert metrics.sink_rate(per_sequence.mean(0), 0.3).item() == 1.0  # pooled first: what Gu et al. do not do


def test_sink_score_of_an_unnormalised_row_reads_its_share():
    """relu_raw rows need not sum to 1: a row (2.9, 0.1) has raw weight 2.9 on the sink and share 0.967."""
    weights = torch.tensor([[2.9, 0.0], [2.9, 0.1]]).view(1, 1, 2, 2)
    sink = torch.zeros(1, dtype=torch.long)
    assert metrics.sink_score(weights, sink).item() == pytest.approx(2.9)
    assert metrics.sink_score(metrics.row_share(weights), sink).item() == pytest.approx((1 + 2.9 / 3.0) / 2)


def test_key_alignment_closed_forms():
    """Two sequences, one head, sink at position 0: equal sink keys -> 1; orthogonal unit keys
    elsewhere -> cos 45 degrees (each against their mean (1, 1)/2); the sink is left out of the rest."""
    k = torch.zeros(2, 1, 3, 2)
    k[:, 0, 0] = torch.tensor([3.0, 4.0])  # the same sink key in both
    k[0, 0, 1:] = torch.tensor([1.0, 0.0])
    k[1, 0, 1:] = torch.tensor([0.0, 1.0])
    at_sink, rest = metrics.key_alignment(k, torch.tensor([0, 0]))
    assert at_sink.item() == pytest.approx(1.0) and rest.item() == pytest.approx(2**-0.5)
    at_sink, rest = metrics.key_alignment(k, torch.tensor([1, 1]))  # now the orthogonal keys are the sink's
    assert at_sink.item() == pytest.approx(2**-0.5)
    assert rest.item() == pytest.approx((1.0 + 2**-0.5) / 2)  # position 0: 1, position 2: 0.707
