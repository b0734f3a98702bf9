"""Where the attention goes (evaluate/metrics/sink_attention.py), on hand-built weights and scores
with closed-form answers: all mass on the sink, uniform causal attention, a sink that moves between
sequences, rows that do not sum to 1, a sliding window that hides the sink."""

import math

import pytest
import torch

from sinkexp.evaluate.metrics import sink_attention


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
    assert torch.allclose(sink_attention.sink_attn(weights, sink, queries), torch.ones(H))
    assert torch.allclose(sink_attention.max_inflow(weights, queries), torch.ones(H))
    assert torch.allclose(sink_attention.sink_match(weights, sink, queries), torch.ones(H))
    assert torch.allclose(sink_attention.sink_score(weights, sink), torch.ones(H))
    assert sink_attention.sink_rate(sink_attention.sink_score(weights, sink), 0.8) == 1.0


def test_uniform_causal_attention_closed_form():
    B, H, T = 2, 3, 6
    weights, sink = uniform_causal(B, H, T), torch.zeros(B, dtype=torch.long)
    # queries 1..T-1 pay 1/(i+1) to key 0
    expected = sum(1 / (i + 1) for i in range(1, T)) / (T - 1)
    assert torch.allclose(sink_attention.sink_attn(weights, sink, non_bos(B, T)), torch.full((H,), expected))
    # key 0 receives the largest mean attention
    assert torch.allclose(sink_attention.max_inflow(weights, non_bos(B, T)), torch.full((H,), expected))
    # query 0 included in the sink score: H_T / T (harmonic number)
    harmonic = sum(1 / (i + 1) for i in range(T))
    assert torch.allclose(sink_attention.sink_score(weights, sink), torch.full((H,), harmonic / T))
    assert sink_attention.sink_rate(sink_attention.sink_score(weights, sink), 0.3) == (harmonic / T > 0.3)


def test_sink_position_per_sequence():
    B, H, T = 2, 1, 5
    weights = torch.zeros(B, H, T, T)
    weights[0, ..., 2] = 1.0  # sequence 0 attends to key 2
    weights[1, ..., 4] = 1.0  # sequence 1 attends to key 4
    sink = torch.tensor([2, 4])
    queries = torch.ones(B, T, dtype=torch.bool)
    assert sink_attention.sink_attn(weights, sink, queries).item() == 1.0
    assert sink_attention.sink_match(weights, sink, queries).item() == 1.0
    assert sink_attention.sink_attn(weights, torch.tensor([4, 2]), queries).item() == 0.0
    # sink score counts queries i >= s only: all of them attend to the sink here
    assert sink_attention.sink_score(weights, sink).item() == 1.0
    # max_inflow is taken per sequence: key 2 takes all of sequence 0's attention, key 4 all of
    # sequence 1's, so the moving sink counts in full (pooling the batch first would give 0.5)
    assert sink_attention.max_inflow(weights, queries).item() == 1.0
    half = torch.zeros(B, H, T, T)
    half[0, ..., 2] = 1.0
    half[1, ..., 0], half[1, ..., 4] = 0.4, 0.6
    assert sink_attention.max_inflow(half, queries).item() == pytest.approx(0.8)
    assert sink_attention.sink_match_seq(half, sink, queries).item() == 1.0  # key 4 still leads sequence 1


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
    assert sink_attention.sink_match(weights, sink, queries).item() == 0.0  # every query's argmax is another key
    assert sink_attention.sink_match_seq(weights, sink, queries).item() == 1.0  # column means: 0.4 vs <= 0.3


def test_row_share_handles_empty_rows_and_scales():
    weights = torch.tensor([[[[0.0, 0.0, 0.0], [0.2, 0.2, 0.0], [3.0, 1.0, 0.0]]]])
    share = sink_attention.row_share(weights)
    assert torch.equal(share[0, 0, 0], torch.zeros(3))  # 0/0 := 0
    assert torch.allclose(share[0, 0, 1], torch.tensor([0.5, 0.5, 0.0]))
    assert torch.allclose(share[0, 0, 2], torch.tensor([0.75, 0.25, 0.0]))


def test_empty_query_set_gives_nan_not_zero():
    weights, sink = all_on_key(0), torch.zeros(2, dtype=torch.long)
    none = torch.zeros(2, 6, dtype=torch.bool)
    assert torch.isnan(sink_attention.sink_attn(weights, sink, none)).all()


@pytest.mark.parametrize("eps,expected", [(0.3, 2 / 4), (0.8, 1 / 4), (0.95, 0.0)])
def test_sink_rate_counts_heads_above_eps(eps, expected):
    scores = torch.tensor([0.9, 0.5, 0.1, 0.3])  # 0.3 is not > 0.3
    assert math.isclose(sink_attention.sink_rate(scores, eps).item(), expected)


def test_sink_rate_is_counted_per_sequence_as_gu_et_al():
    """Two sequences, one head: all attention on the sink in the first, none in the second. The
    pooled score is 0.5 (> 0.3), but the head sinks in one sequence of two: rate 0.5, not 1."""
    T = 4
    weights = torch.zeros(2, 1, T, T)
    weights[0, 0, :, 0] = 1.0
    weights[1, 0] = torch.eye(T)  # each query on itself
    per_sequence = sink_attention.sink_scores(weights, torch.zeros(2, dtype=torch.long))
    torch.testing.assert_close(per_sequence, torch.tensor([[1.0], [1 / T]]))
    torch.testing.assert_close(
        sink_attention.sink_score(weights, torch.zeros(2, dtype=torch.long)), torch.tensor([(1 + 1 / T) / 2])
    )
    assert sink_attention.sink_rate(per_sequence, 0.3).item() == 0.5
    assert sink_attention.sink_rate(per_sequence.mean(0), 0.3).item() == 1.0  # pooled first: what Gu et al. do not do


def test_sink_score_of_an_unnormalised_row_reads_its_share():
    """relu_raw rows need not sum to 1: a row (2.9, 0.1) has raw weight 2.9 on the sink and share 0.967."""
    weights = torch.tensor([[2.9, 0.0], [2.9, 0.1]]).view(1, 1, 2, 2)
    sink = torch.zeros(1, dtype=torch.long)
    assert sink_attention.sink_score(weights, sink).item() == pytest.approx(2.9)
    assert sink_attention.sink_score(sink_attention.row_share(weights), sink).item() == pytest.approx(
        (1 + 2.9 / 3.0) / 2
    )


def test_logit_gap_on_hand_built_scores():
    scores = torch.tensor([[5.0, 0.0, 0.0], [4.0, 1.0, 0.0], [6.0, 2.0, 4.0]]).view(1, 1, 3, 3)
    causal = torch.ones(3, 3, dtype=torch.bool).tril()
    gap = sink_attention.logit_gap(scores, torch.zeros(1, dtype=torch.long), causal)[0, 0]
    assert torch.isnan(gap[0]) and torch.isnan(gap[1])  # no visible key besides the sink and itself
    assert gap[2].item() == 6.0 - 2.0  # key 1 only (key 2 is the query itself)
    full = torch.ones(3, 3, dtype=torch.bool)
    gap = sink_attention.logit_gap(scores, torch.zeros(1, dtype=torch.long), full)[0, 0]
    torch.testing.assert_close(gap, torch.tensor([5.0, 4.0, 4.0]))  # s_i0 - s_i(other non-self key)


def test_logit_gap_leaves_out_the_queries_whose_window_has_passed_the_sink():
    """A window of 2 (each query sees itself and the key before it): queries 0 and 1 see the sink
    and nothing else but themselves (no gap), queries 2 and 3 do not see it (no gap either); with a
    window of 3, query 2 sees keys 0, 1 and 2: s_20 - s_21."""
    scores = torch.arange(16.0).view(1, 1, 4, 4)

    def band(width: int) -> torch.Tensor:  # query i sees keys i - width < j <= i
        return torch.ones(4, 4, dtype=torch.bool).tril() & ~torch.ones(4, 4, dtype=torch.bool).tril(-width)

    sink = torch.zeros(1, dtype=torch.long)
    assert sink_attention.logit_gap(scores, sink, band(2)).isnan().all()
    gap = sink_attention.logit_gap(scores, sink, band(3))[0, 0]
    assert gap[2].item() == scores[0, 0, 2, 0] - scores[0, 0, 2, 1] and gap[[0, 1, 3]].isnan().all()
