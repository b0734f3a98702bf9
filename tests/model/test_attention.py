"""Attention: normalisers match their formulas, softmax matches PyTorch's kernel and the fused path the
explicit one, the causal mask holds, slots, gates and RoPE reduce to their closed forms."""

import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from helpers import make_model
from omegaconf import OmegaConf

from sinkexp.config.schema import AttnConfig
from sinkexp.model import NORMALISERS, capture
from sinkexp.model import attention as attention_module
from sinkexp.model.attention import Attention, rotary

CONFIGS = Path(__file__).parents[2] / "configs"


def test_normalisers_match_their_formulas_on_a_hand_built_case():
    scores = torch.tensor([[2.0, -1.0, 0.5], [1.0, 3.0, -2.0], [0.0, 1.0, 2.0]]).view(1, 1, 3, 3)
    visible = torch.ones(3, 3, dtype=torch.bool).tril()
    relu_masked = torch.tensor([[2.0, 0, 0], [1.0, 3.0, 0], [0.0, 1.0, 2.0]])
    expected = {
        "softmax": torch.stack(
            [
                torch.tensor([1.0, 0, 0]),
                torch.cat([torch.softmax(torch.tensor([1.0, 3.0]), 0), torch.zeros(1)]),
                torch.softmax(torch.tensor([0.0, 1.0, 2.0]), 0),
            ]
        ),
        "relu": relu_masked / torch.tensor([[1.0], [2.0], [3.0]]),  # n_i visible keys
        "relu_len": relu_masked / 3,  # L = 3
        "relu_raw": relu_masked,
        "sigmoid": torch.sigmoid(scores[0, 0] - torch.log(torch.tensor(3.0))) * visible,  # b = -log L
        "sigmoid_norm": torch.stack(
            [
                torch.tensor([1.0, 0, 0]),  # one key: all of it
                torch.cat([torch.sigmoid(torch.tensor([1.0, 3.0]) - math.log(3)), torch.zeros(1)]),
                torch.sigmoid(torch.tensor([0.0, 1.0, 2.0]) - math.log(3)),
            ]
        ),
        "softmax1": torch.stack(
            [
                torch.exp(scores[0, 0, i]) * visible[i] / (1 + (torch.exp(scores[0, 0, i]) * visible[i]).sum())
                for i in range(3)
            ]
        ),
        "softpick": torch.stack(
            [
                torch.relu(torch.expm1(scores[0, 0, i]))
                * visible[i]
                / ((torch.expm1(scores[0, 0, i]) * visible[i]).abs().sum())
                for i in range(3)
            ]
        ),
    }
    expected["sigmoid_norm"] = expected["sigmoid_norm"] / expected["sigmoid_norm"].sum(-1, keepdim=True)
    assert set(expected) == set(NORMALISERS)
    for name, weights in expected.items():
        torch.testing.assert_close(NORMALISERS[name](scores, visible, AttnConfig())[0, 0], weights)


@pytest.mark.parametrize("causal", [True, False])
def test_explicit_softmax_equals_scaled_dot_product_attention(causal):
    torch.manual_seed(0)
    attention = Attention(32, 4, AttnConfig())
    x = torch.randn(3, 7, 32)
    visible = torch.ones(7, 7, dtype=torch.bool)
    visible = visible.tril() if causal else visible
    q, k, v = attention.qkv(x).view(3, 7, 3, 4, 8).permute(2, 0, 3, 1, 4)
    reference = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    reference = attention.out(reference.transpose(1, 2).reshape(3, 7, 32))
    torch.testing.assert_close(attention(x, visible), reference, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("attn", sorted(NORMALISERS))
def test_future_tokens_do_not_change_past_outputs(attn):
    model = make_model(attn)
    x = torch.randn(2, 10, 6)
    changed = x.clone()
    changed[:, 6:] = torch.randn(2, 4, 6)
    before, after = model(x), model(changed)
    torch.testing.assert_close(before[:, :6], after[:, :6])
    assert not torch.allclose(before[:, 6:], after[:, 6:])


def test_gu_sigmoid_presets_have_no_bias():
    """sigmoid_nobias and sigmoid_norm (Gu et al. 2025): sigma(s) and sigma(s) / sum sigma(s), b = 0."""
    scores, visible = torch.tensor([0.0, 1.0, 2.0]).view(1, 1, 1, 3), torch.ones(1, 3, dtype=torch.bool)
    raw = torch.tensor([0.5, 0.7310586, 0.8807971])
    for preset, expected in (("sigmoid_nobias", raw), ("sigmoid_norm", raw / raw.sum())):
        attn = AttnConfig(
            **{k: v for k, v in OmegaConf.load(CONFIGS / "attn" / f"{preset}.yaml").items() if k != "name"}
        )
        torch.testing.assert_close(NORMALISERS[attn.normaliser](scores, visible, attn)[0, 0, 0], expected)


def test_sigmoid_bias_overrides_minus_log_length():
    scores, visible = torch.zeros(1, 1, 2, 2), torch.ones(2, 2, dtype=torch.bool)
    torch.testing.assert_close(
        NORMALISERS["sigmoid"](scores, visible, AttnConfig(sigmoid_bias=1.0)), torch.sigmoid(torch.ones(1, 1, 2, 2))
    )


def test_every_normaliser_takes_scores_visible_and_the_attention_config():
    import inspect

    signatures = {name: list(inspect.signature(fn).parameters) for name, fn in NORMALISERS.items()}
    assert all(params == ["scores", "visible", "attn"] for params in signatures.values()), signatures


def paired(**attn):
    """Two attention modules with the same q/k/v/out weights, the second with extra axes."""
    torch.manual_seed(0)
    plain = Attention(16, 2, AttnConfig(), bias=True)
    other = Attention(16, 2, AttnConfig(**attn), bias=True)
    other.load_state_dict(plain.state_dict(), strict=False)
    return plain, other


def test_sink_slot_at_minus_infinity_equals_softmax():
    plain, slotted = paired(slot="learned")
    with torch.no_grad():
        for module in (plain, slotted):  # q = 1 for every token, so q . k_slot = -1e6 * D
            module.qkv.weight[:16] = 0.0
            module.qkv.bias[:16] = 1.0
        slotted.slot.k.fill_(-1e6)
    x, visible = torch.randn(2, 5, 16), torch.ones(5, 5, dtype=torch.bool).tril()
    torch.testing.assert_close(slotted(x, visible), plain(x, visible))


def test_softmax1_equals_softmax_with_a_zero_logit_zero_value_slot():
    _, slotted = paired(slot="learned")
    _, off_by_one = paired(normaliser="softmax1")
    with torch.no_grad():
        slotted.slot.k.zero_()
        slotted.slot.v.zero_()
    x, visible = torch.randn(2, 5, 16), torch.ones(5, 5, dtype=torch.bool).tril()
    torch.testing.assert_close(off_by_one(x, visible), slotted(x, visible))


@pytest.mark.parametrize("gate", ["headwise", "elementwise"])
def test_a_gate_fixed_open_equals_no_gate(gate):
    plain, gated = paired(gate=gate)
    with torch.no_grad():
        gated.gate.weight.zero_()
        gated.gate.bias.fill_(1e4)  # sigma = 1
    x, visible = torch.randn(2, 5, 16), torch.ones(5, 5, dtype=torch.bool)
    torch.testing.assert_close(gated(x, visible), plain(x, visible))
    with torch.no_grad():
        gated.gate.bias.fill_(-1e4)  # shut: the head writes nothing but W_O's bias
    torch.testing.assert_close(gated(x, visible), gated.out.bias.expand(2, 5, 16))


def test_rope_scores_depend_only_on_relative_position():
    torch.manual_seed(0)
    q, k = torch.randn(1, 1, 1, 8), torch.randn(1, 1, 1, 8)
    seq = lambda i, vec: torch.zeros(1, 1, 12, 8).index_copy(2, torch.tensor([i]), vec)  # noqa: E731

    def score(i, j):
        return (rotary(seq(i, q))[0, 0, i] * rotary(seq(j, k))[0, 0, j]).sum()

    torch.testing.assert_close(score(5, 2), score(9, 6))
    torch.testing.assert_close(score(3, 3), (q * k).sum())
    assert not torch.allclose(score(5, 2), score(5, 4))


@pytest.mark.parametrize("gate", ["none", "headwise"])
@pytest.mark.parametrize("causal", [True, False])
def test_fused_training_path_matches_the_explicit_path(monkeypatch, gate, causal):
    """Training (no capture) runs PyTorch's fused kernel; evaluation (capture) the explicit path."""
    calls = []
    fused_kernel = F.scaled_dot_product_attention
    monkeypatch.setattr(
        attention_module.F, "scaled_dot_product_attention", lambda *a, **k: calls.append(1) or fused_kernel(*a, **k)
    )
    torch.manual_seed(0)
    attention = Attention(16, 4, AttnConfig(gate=gate))
    x = torch.randn(2, 7, 16)
    visible = torch.ones(7, 7, dtype=torch.bool)
    visible = visible.tril() if causal else visible

    def run():
        out = attention(x, visible)
        return out, torch.autograd.grad(out.pow(2).sum(), list(attention.parameters()))

    fused, fused_grads = run()
    assert calls == [1]
    with capture(attention, ["weights"]):
        explicit, explicit_grads = run()
    assert calls == [1]
    torch.testing.assert_close(fused, explicit, atol=1e-5, rtol=1e-5)
    for a, b in zip(fused_grads, explicit_grads):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_zeroing_the_value_of_a_sink_that_takes_all_attention_zeroes_the_head():
    """Closed form: with every query's attention on key 0, the head mixes v_0 alone; v_0 = 0 leaves
    W_O's bias only. The intervention replaces v at its tap; the weights stay as they were."""
    from sinkexp.model import intervene

    torch.manual_seed(0)
    attention = Attention(16, 2, AttnConfig(), bias=True)
    x = torch.randn(3, 5, 16)
    visible = torch.ones(5, 5, dtype=torch.bool).tril()
    with capture(attention, ["weights", "mixed"]) as plain:
        attention(x, visible)
    # key 0 scores 1e4 for every query, so it takes all the attention
    with intervene(attention, {"scores": lambda s: s.index_fill(-1, torch.tensor([0]), 1e4)}):
        with capture(attention, ["weights"]) as sunk:
            attention(x, visible)
        torch.testing.assert_close(sunk["weights"][..., 0], torch.ones(3, 2, 5))  # all mass on key 0
        with intervene(attention, {"v": lambda v: v.index_fill(2, torch.tensor([0]), 0.0)}):
            with capture(attention, ["mixed"]) as ablated:
                out = attention(x, visible)
    torch.testing.assert_close(ablated["mixed"], torch.zeros(3, 2, 5, 8))
    torch.testing.assert_close(out, attention.out.bias.expand(3, 5, 16))
    assert not torch.allclose(plain["mixed"], torch.zeros_like(plain["mixed"]))  # nothing stays replaced
    assert all(tap.replace is None for tap in attention.modules() if hasattr(tap, "replace"))


@pytest.mark.parametrize("attn", ["softmax", "relu"])
def test_a_hidden_bos_key_gets_no_attention_and_changes_no_other_position(attn):
    model = make_model(attn, hide_bos=True)
    x = torch.randn(2, 10, 6)
    with capture(model, ["blocks.0.attn.weights", "blocks.1.attn.weights"]) as cache:
        out = model(x)
    for weights in cache.values():
        assert torch.all(weights[:, :, 1:, 0] == 0)
        torch.testing.assert_close(
            weights[:, :, 0, 0], torch.ones_like(weights[:, :, 0, 0]) if attn == "softmax" else weights[:, :, 0, 0]
        )  # BOS still sees itself
    changed = x.clone()
    changed[:, 0] = torch.randn(2, 6)
    torch.testing.assert_close(model(changed)[:, 1:], out[:, 1:])  # nothing reads BOS any more
    assert not torch.allclose(make_model(attn)(changed)[:, 1:], make_model(attn)(x)[:, 1:])
