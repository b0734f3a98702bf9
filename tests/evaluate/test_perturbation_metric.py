"""Barbero et al.'s perturbation metric (evaluate/perturbation.py) on hand-built one-layer models
h = A x: uniform causal attention spreads a one-token change as 1 / (i + 1) down the sequence, an
attention that puts everything on the sink (BOS) does not move any later representation."""

import math

import pytest
import torch

from sinkexp.evaluate.perturbation import perturbed_position, relative_change, spread, swap_token

T, P = 8, 2  # positions, the changed one


def uniform(t: int) -> torch.Tensor:
    return torch.ones(t, t).tril() / torch.arange(1, t + 1)[:, None]  # row i: 1 / (i + 1) on keys <= i


def sink(t: int) -> torch.Tensor:
    weights = torch.zeros(t, t)
    weights[:, 0] = 1.0
    return weights


def inputs() -> torch.Tensor:
    """Two sequences of unit vectors e0, except sequence 1's token P, e1: swapping P moves x_P by e1 - e0 in
    sequence 0 (and back in sequence 1)."""
    x = torch.zeros(2, T, 3)
    x[..., 0] = 1.0
    x[1, P] = torch.tensor([0.0, 1.0, 0.0])
    return x


def test_swap_token_takes_the_next_sequences_token_at_the_position_only():
    x = torch.arange(3 * 5, dtype=torch.float).view(3, 5)
    changed = swap_token(x, 2)
    assert changed[:, 2].tolist() == [7.0, 12.0, 2.0] and torch.equal(changed[:, [0, 1, 3, 4]], x[:, [0, 1, 3, 4]])


def test_uniform_attention_spreads_the_change_as_one_over_i_plus_one():
    x = inputs()
    clean, perturbed = uniform(T) @ x, uniform(T) @ swap_token(x, P)
    # sequence 0: h_i = e0, h'_i - h_i = (e1 - e0) / (i + 1) for i >= P, so ||.|| / ||h_i|| = sqrt(2) / (i + 1)
    later = torch.arange(P + 1, T, dtype=torch.float)
    torch.testing.assert_close(relative_change(clean, perturbed, P)[0], math.sqrt(2) / (later + 1))
    change, reach = spread(clean[:1], perturbed[:1], P)
    expected = math.sqrt(2) / (later + 1)
    assert change == pytest.approx(expected.mean().item())
    assert reach == pytest.approx(((later - P) * expected).sum().item() / expected.sum().item())


def test_a_sink_that_takes_all_the_attention_keeps_the_change_at_its_token():
    x = inputs()
    change, reach = spread(sink(T) @ x, sink(T) @ swap_token(x, P), P)
    assert change == 0.0 and math.isnan(reach)  # nothing after P moved: no reach


def test_the_changed_token_sits_a_quarter_of_the_way_in():
    assert (perturbed_position(32), perturbed_position(128), perturbed_position(3)) == (8, 32, 1)
