"""The vectors at the sink (evaluate/metrics/vectors.py): key, value and residual norms, massive
activations and where they sit, the lower median, and how constant the sink's key is."""

import pytest
import torch

from sinkexp.evaluate.metrics import vectors


def test_lower_median_is_torchs_median_entry_for_entry():
    assert vectors.lower_median(torch.tensor([4.0, 1.0, 3.0, 2.0])).item() == 2.0  # the lower of the middle two
    generator = torch.Generator().manual_seed(0)
    cases = [
        torch.randn(n, generator=generator, dtype=dtype).abs()
        for n in (1, 2, 7, 1000, 4097)
        for dtype in (torch.float32, torch.float64)
    ]
    cases += [torch.randint(0, 3, (501,), generator=generator).float(), torch.tensor([1.0, float("nan"), 0.5])]
    cases += [torch.rand(1001, generator=generator).index_fill_(0, torch.tensor([3, 700]), float("nan"))]
    for values in cases:
        got, want = vectors.lower_median(values), values.median()
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.isnan().item() == want.isnan().item() and (want.isnan() or got == want).item()


def test_residual_norms_and_massive_ratio():
    resid = torch.ones(2, 4, 3)
    resid[:, 1] = torch.tensor([0.0, 3.0, 4.0])  # the sink row (position 1) has norm 5
    at_sink, rest = vectors.resid_norms(resid, torch.tensor([1, 1]))
    assert at_sink.item() == 5.0 and abs(rest.item() - 3**0.5) < 1e-6
    assert vectors.massive_ratio(resid).item() == 4.0  # max 4 over median 1
    position, channel, at_sink = vectors.massive_location(resid, torch.tensor([1, 1]))
    assert (position.item(), channel.item(), at_sink.item()) == (1, 2, 1.0)  # the 4 at position 1, channel 2
    resid[1, 3, 0] = -9.0  # sequence 1's largest |h| moves to position 3
    position, channel, at_sink = vectors.massive_location(resid, torch.tensor([1, 1]))
    assert (position.item(), channel.item(), at_sink.item()) == (3, 0, 0.5)


def test_key_and_value_norms_at_the_sink_per_head():
    """Head 0: the sink key (3, 4) has norm 5, the others (1, 0) norm 1; head 1: every key (0, 2).
    Sequence 1's sink sits at position 2, whose key is made the long one there."""
    x = torch.zeros(2, 2, 3, 2)
    x[:, 0] = torch.tensor([1.0, 0.0])
    x[:, 1] = torch.tensor([0.0, 2.0])
    x[0, 0, 0] = torch.tensor([3.0, 4.0])
    x[1, 0, 2] = torch.tensor([3.0, 4.0])
    at_sink, rest = vectors.norms_at_sink(x, torch.tensor([0, 2]))
    torch.testing.assert_close(at_sink, torch.tensor([5.0, 2.0]))
    torch.testing.assert_close(rest, torch.tensor([1.0, 2.0]))
    x[1, 0, 0] = torch.tensor([0.0, 3.0])  # a non-sink key of sequence 1: its mean (3 + 1) / 2
    _, rest = vectors.norms_at_sink(x, torch.tensor([0, 2]))
    torch.testing.assert_close(rest, torch.tensor([(1.0 + 2.0) / 2, 2.0]))


def test_key_alignment_closed_forms():
    """Two sequences, one head, sink at position 0: equal sink keys -> 1; orthogonal unit keys
    elsewhere -> cos 45 degrees (each against their mean (1, 1)/2); the sink is left out of the rest."""
    k = torch.zeros(2, 1, 3, 2)
    k[:, 0, 0] = torch.tensor([3.0, 4.0])  # the same sink key in both
    k[0, 0, 1:] = torch.tensor([1.0, 0.0])
    k[1, 0, 1:] = torch.tensor([0.0, 1.0])
    at_sink, rest = vectors.key_alignment(k, torch.tensor([0, 0]))
    assert at_sink.item() == pytest.approx(1.0) and rest.item() == pytest.approx(2**-0.5)
    at_sink, rest = vectors.key_alignment(k, torch.tensor([1, 1]))  # now the orthogonal keys are the sink's
    assert at_sink.item() == pytest.approx(2**-0.5)
    assert rest.item() == pytest.approx((1.0 + 2**-0.5) / 2)  # position 0: 1, position 2: 0.707
