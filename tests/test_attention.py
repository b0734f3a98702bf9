"""Attention: normalisers match their formulas, softmax matches PyTorch's kernel, the causal mask
holds, and capture points record without changing the forward pass."""
import pytest
import torch
import torch.nn.functional as F

from sinkexp.config import AttnConfig, ModelConfig
from sinkexp.model import NORMALISERS, Transformer, capture, tap_names
from sinkexp.model.attention import Attention
from sinkexp.tasks.trigger import TriggerConfig, TriggerTask


def test_normalisers_match_their_formulas_on_a_hand_built_case():
    scores = torch.tensor([[2.0, -1.0, 0.5], [1.0, 3.0, -2.0], [0.0, 1.0, 2.0]]).view(1, 1, 3, 3)
    visible = torch.ones(3, 3, dtype=torch.bool).tril()
    relu_masked = torch.tensor([[2.0, 0, 0], [1.0, 3.0, 0], [0.0, 1.0, 2.0]])
    expected = {
        "softmax": torch.stack([torch.tensor([1.0, 0, 0]),
                                torch.cat([torch.softmax(torch.tensor([1.0, 3.0]), 0), torch.zeros(1)]),
                                torch.softmax(torch.tensor([0.0, 1.0, 2.0]), 0)]),
        "relu": relu_masked / torch.tensor([[1.0], [2.0], [3.0]]),   # n_i visible keys
        "relu_len": relu_masked / 3,                                 # L = 3
        "relu_raw": relu_masked,
    }
    assert set(expected) == set(NORMALISERS)
    for name, weights in expected.items():
        torch.testing.assert_close(NORMALISERS[name](scores, visible)[0, 0], weights)


@pytest.mark.parametrize("causal", [True, False])
def test_explicit_softmax_equals_scaled_dot_product_attention(causal):
    torch.manual_seed(0)
    attention = Attention(d_model=32, n_heads=4, normaliser="softmax")
    x = torch.randn(3, 7, 32)
    visible = torch.ones(7, 7, dtype=torch.bool)
    visible = visible.tril() if causal else visible
    q, k, v = attention.qkv(x).view(3, 7, 3, 4, 8).permute(2, 0, 3, 1, 4)
    reference = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    reference = attention.out(reference.transpose(1, 2).reshape(3, 7, 32))
    torch.testing.assert_close(attention(x, visible), reference, atol=1e-5, rtol=1e-5)


def make_model(attn="softmax", **model):
    torch.manual_seed(0)
    task = TriggerTask(TriggerConfig(seq_len=10, d_x=4))
    return Transformer(ModelConfig(n_layers=2, n_heads=2, d_model=16, mlp="gelu", **model), AttnConfig(attn), task)


@pytest.mark.parametrize("attn", sorted(NORMALISERS))
def test_future_tokens_do_not_change_past_outputs(attn):
    model = make_model(attn)
    x = torch.randn(2, 10, 6)
    changed = x.clone()
    changed[:, 6:] = torch.randn(2, 4, 6)
    before, after = model(x), model(changed)
    torch.testing.assert_close(before[:, :6], after[:, :6])
    assert not torch.allclose(before[:, 6:], after[:, 6:])


def test_capture_records_every_tap_without_changing_the_output():
    model = make_model()
    x = torch.randn(2, 10, 6)
    plain = model(x)
    with capture(model) as cache:
        captured = model(x)
    torch.testing.assert_close(plain, captured)
    assert set(cache) == set(tap_names(model))
    assert cache["blocks.1.attn.weights"].shape == (2, 2, 10, 10)      # (B, H, T, S)
    assert cache["blocks.0.attn.v"].shape == (2, 2, 10, 8)             # (B, H, S, D)
    assert cache["blocks.0.resid_post"].shape == (2, 10, 16)
    torch.testing.assert_close(cache["blocks.0.attn.weights"].sum(-1), torch.ones(2, 2, 10))
    # weights @ v is what the head mixes
    torch.testing.assert_close(cache["blocks.0.attn.weights"] @ cache["blocks.0.attn.v"],
                               cache["blocks.0.attn.mixed"])
    with capture(model, ["blocks.0.attn.weights"]) as only:
        model(x)
    assert list(only) == ["blocks.0.attn.weights"]


def test_capture_rejects_unknown_names():
    with pytest.raises(KeyError, match="blocks.0.attn.weights"):
        with capture(make_model(), ["blocks.0.attn.weight"]):
            pass


@pytest.mark.parametrize("norm", ["pre", "post", "sandwich", "none"])
def test_norm_placements_follow_their_formulas(norm):
    torch.manual_seed(0)
    model = make_model(norm=norm, residual=True)
    block = model.blocks[0]
    x = torch.randn(2, 10, 16)
    visible = model.visible(10, x.device)
    attn = lambda h: block.attn(h, visible)  # noqa: E731
    n_in, n_out = block.norms_in[0], block.norms_out[0]
    after_attn = {"pre": x + attn(n_in(x)), "post": n_out(x + attn(x)),
                  "sandwich": x + n_out(attn(n_in(x))), "none": x + attn(x)}[norm]
    torch.testing.assert_close(block.sublayer(0, x, attn), after_attn)
