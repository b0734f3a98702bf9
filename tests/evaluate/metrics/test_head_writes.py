"""What the heads write (evaluate/metrics/head_writes.py), on hand-built values and updates: value
norms through W_O, the stable rank's closed forms and its SVD, the heads' cancellation, and the
compact route through R_h (W_O^h = Q_h R_h) against the direct one through W_O."""

import torch

from sinkexp.evaluate.metrics import head_writes


def test_value_norms_through_the_output_projection():
    B, H, S, D = 2, 2, 4, 3
    v = torch.ones(B, H, S, D)
    v[:, 0, 0] = 0.0  # head 0: the sink writes nothing
    v[:, 1, 0] = 2.0  # head 1: the sink writes twice as much as the rest
    w_out = torch.eye(H * D)  # W_O = identity: head h writes into its own D channels
    values = head_writes.head_values(v, w_out)  # (B, H, S, H * D)
    assert values.shape == (B, H, S, H * D)
    assert torch.allclose(values[0, 1, 2, 3:], torch.ones(3)) and values[0, 1, 2, :3].abs().sum() == 0
    sink = torch.zeros(B, dtype=torch.long)
    torch.testing.assert_close(head_writes.value_norm_ratio(values, sink), torch.tensor([0.0, 2.0]))
    torch.testing.assert_close(head_writes.sink_value_norm(values, sink), torch.tensor([0.0, 2 * 3**0.5]))


def test_stable_rank_closed_forms():
    rank_one = torch.outer(torch.arange(1.0, 5.0), torch.ones(6)).expand(2, 1, 4, 6)  # (B, H, T, d)
    torch.testing.assert_close(head_writes.stable_rank(rank_one), torch.tensor([1.0]))
    orthonormal = torch.eye(4).expand(2, 1, 4, 4)
    torch.testing.assert_close(head_writes.stable_rank(orthonormal), torch.tensor([4.0]))
    diverged = orthonormal.clone()
    diverged[0, 0, 0, 0] = float("inf")  # a diverged run's update: NaN, no LAPACK error
    assert head_writes.stable_rank(diverged).isnan().all()
    assert head_writes.stable_rank(torch.zeros(2, 1, 4, 6)).isnan().all()  # no update: no rank


def test_stable_rank_is_the_svds_at_any_scale_and_when_the_eigensolver_gives_up(monkeypatch):
    """||U||_F^2 / sigma_1^2 from the full SVD, for updates of norm 1e-20 to 1e20 (a raw ReLU run's
    grow without bound), and through the SVD fallback when LAPACK's eigensolver fails to converge."""
    update = torch.randn(3, 2, 5, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    sigma = torch.linalg.svdvals(update)
    expected = (sigma.pow(2).sum(-1) / sigma[..., 0].pow(2)).mean(0)
    for scale in (1e-20, 1.0, 1e20):
        torch.testing.assert_close(head_writes.stable_rank(update * scale), expected)

    def gives_up(_):
        raise torch.linalg.LinAlgError("linalg.eigh: the algorithm failed to converge")

    monkeypatch.setattr(torch.linalg, "eigvalsh", gives_up)
    torch.testing.assert_close(head_writes.stable_rank(update * 1e20), expected)


def test_stable_rank_is_the_same_bit_for_bit_on_any_thread_count_and_memory_order():
    """The eigenproblems split among two threads, and an update stored head-major as head_values
    leaves it, give exactly the values of one thread on a contiguous update."""
    update = torch.randn(4, 3, 6, 10, generator=torch.Generator().manual_seed(1))
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        alone = head_writes.stable_rank(update)
        torch.set_num_threads(2)
        assert torch.equal(head_writes.stable_rank(update), alone)
        head_major = update.transpose(0, 1).contiguous().transpose(0, 1)  # (B, H, ...) viewed, stored (H, B, ...)
        assert torch.equal(head_writes.stable_rank(head_major), alone)
    finally:
        torch.set_num_threads(threads)


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
        assert torch.isclose(head_writes.head_cancellation(updates, only), torch.tensor(per_query[query]))
    everything = torch.ones(1, 4, dtype=torch.bool)
    assert torch.isclose(head_writes.head_cancellation(updates, everything), torch.tensor(sum(per_query) / 3))


def test_the_heads_writes_through_their_factors_keep_every_norm_and_rank():
    """value_norm_ratio, sink_value_norm, stable_rank and head_cancellation read each head's writes
    through R_h (W_O^h = Q_h R_h, D dimensions; the evaluator's way) as they read them through W_O
    (d_model dimensions, the definitions' direct computation): equal to float32 rounding."""
    generator = torch.Generator().manual_seed(2)
    B, H, T, D, d_model = 3, 4, 10, 8, 48
    mixed, v = torch.randn(2, B, H, T, D, generator=generator)
    w_o = torch.randn(d_model, H * D, generator=generator)
    compact, sink = head_writes.head_factors(w_o, H), torch.tensor([0, 2, 0])
    assert compact.shape == (D, H * D)
    direct, small = head_writes.head_values(v, w_o), head_writes.head_values(v, compact)
    for metric in (head_writes.value_norm_ratio, head_writes.sink_value_norm):
        torch.testing.assert_close(metric(small, sink), metric(direct, sink), rtol=1e-5, atol=0)
    updates, compact_updates = head_writes.head_values(mixed, w_o), head_writes.head_values(mixed, compact)
    torch.testing.assert_close(
        head_writes.stable_rank(compact_updates), head_writes.stable_rank(updates), rtol=1e-5, atol=0
    )
    queries = torch.ones(B, T, dtype=torch.bool)
    written = mixed.transpose(1, 2).reshape(B, T, H * D) @ w_o.T
    torch.testing.assert_close(
        head_writes.head_cancellation(compact_updates, queries, written),
        head_writes.head_cancellation(updates, queries),
    )
