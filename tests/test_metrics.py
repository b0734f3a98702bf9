"""Metrics on hand-built attention tensors with closed-form answers."""
import math

import pytest
import torch

from sinkexp.evaluate import metrics as M


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
    assert torch.allclose(M.sink_attn(weights, sink, queries), torch.ones(H))
    assert torch.allclose(M.max_inflow(weights, queries), torch.ones(H))
    assert torch.allclose(M.sink_match(weights, sink, queries), torch.ones(H))
    assert torch.allclose(M.sink_score(weights, sink), torch.ones(H))
    assert M.sink_rate(M.sink_score(weights, sink), 0.8) == 1.0


def test_uniform_causal_attention_closed_form():
    B, H, T = 2, 3, 6
    weights, sink = uniform_causal(B, H, T), torch.zeros(B, dtype=torch.long)
    # queries 1..T-1 pay 1/(i+1) to key 0
    expected = sum(1 / (i + 1) for i in range(1, T)) / (T - 1)
    assert torch.allclose(M.sink_attn(weights, sink, non_bos(B, T)), torch.full((H,), expected))
    # key 0 receives the largest mean attention
    assert torch.allclose(M.max_inflow(weights, non_bos(B, T)), torch.full((H,), expected))
    # query 0 included in the sink score: H_T / T (harmonic number)
    harmonic = sum(1 / (i + 1) for i in range(T))
    assert torch.allclose(M.sink_score(weights, sink), torch.full((H,), harmonic / T))
    assert M.sink_rate(M.sink_score(weights, sink), 0.3) == (harmonic / T > 0.3)


def test_sink_position_per_sequence():
    B, H, T = 2, 1, 5
    weights = torch.zeros(B, H, T, T)
    weights[0, ..., 2] = 1.0       # sequence 0 attends to key 2
    weights[1, ..., 4] = 1.0       # sequence 1 attends to key 4
    sink = torch.tensor([2, 4])
    queries = torch.ones(B, T, dtype=torch.bool)
    assert M.sink_attn(weights, sink, queries).item() == 1.0
    assert M.sink_match(weights, sink, queries).item() == 1.0
    assert M.sink_attn(weights, torch.tensor([4, 2]), queries).item() == 0.0
    # sink score counts queries i >= s only: all of them attend to the sink here
    assert M.sink_score(weights, sink).item() == 1.0
    # max_inflow: key 2 gets 1 from sequence 0 only, key 4 from sequence 1 only -> 0.5
    assert M.max_inflow(weights, queries).item() == 0.5


def test_row_share_handles_empty_rows_and_scales():
    weights = torch.tensor([[[[0.0, 0.0, 0.0], [0.2, 0.2, 0.0], [3.0, 1.0, 0.0]]]])
    share = M.row_share(weights)
    assert torch.equal(share[0, 0, 0], torch.zeros(3))              # 0/0 := 0
    assert torch.allclose(share[0, 0, 1], torch.tensor([0.5, 0.5, 0.0]))
    assert torch.allclose(share[0, 0, 2], torch.tensor([0.75, 0.25, 0.0]))


def test_empty_query_set_gives_nan_not_zero():
    weights, sink = all_on_key(0), torch.zeros(2, dtype=torch.long)
    none = torch.zeros(2, 6, dtype=torch.bool)
    assert torch.isnan(M.sink_attn(weights, sink, none)).all()


@pytest.mark.parametrize("eps,expected", [(0.3, 2 / 4), (0.8, 1 / 4), (0.95, 0.0)])
def test_sink_rate_counts_heads_above_eps(eps, expected):
    scores = torch.tensor([0.9, 0.5, 0.1, 0.3])   # 0.3 is not > 0.3
    assert math.isclose(M.sink_rate(scores, eps).item(), expected)
