"""Attention: normalisers match their formulas, softmax matches PyTorch's kernel, the causal mask
holds, and capture points record without changing the forward pass."""
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from omegaconf import OmegaConf

from sinkexp.config.schema import AttnConfig, ModelConfig
from sinkexp.model import NORMALISERS, Transformer, capture, tap_names
from sinkexp.model.attention import Attention, rotary
from sinkexp.model.transformer import DynamicTanh
from sinkexp.tasks.trigger import TriggerConfig, TriggerTask

CONFIGS = Path(__file__).parents[1] / "configs"


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
        "sigmoid": torch.sigmoid(scores[0, 0] - torch.log(torch.tensor(3.0))) * visible,   # b = -log L
        "sigmoid_norm": torch.stack([torch.tensor([1.0, 0, 0]),                            # one key: all of it
                                     torch.cat([torch.sigmoid(torch.tensor([1.0, 3.0]) - math.log(3)), torch.zeros(1)]),
                                     torch.sigmoid(torch.tensor([0.0, 1.0, 2.0]) - math.log(3))]),
        "softmax1": torch.stack([torch.exp(scores[0, 0, i]) * visible[i]
                                 / (1 + (torch.exp(scores[0, 0, i]) * visible[i]).sum())
                                 for i in range(3)]),
        "softpick": torch.stack([torch.relu(torch.expm1(scores[0, 0, i])) * visible[i]
                                 / ((torch.expm1(scores[0, 0, i]) * visible[i]).abs().sum()) for i in range(3)]),
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


def make_model(attn="softmax", **model):
    torch.manual_seed(0)
    task = TriggerTask(TriggerConfig(seq_len=10, d_x=4))
    return Transformer(ModelConfig(**{"n_layers": 2, "n_heads": 2, "d_model": 16, "mlp": "gelu", **model}),
                       AttnConfig(name=attn, normaliser=attn), task)


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


def test_gu_sigmoid_presets_have_no_bias():
    """sigmoid_nobias and sigmoid_norm (Gu et al. 2025): sigma(s) and sigma(s) / sum sigma(s), b = 0."""
    scores, visible = torch.tensor([0.0, 1.0, 2.0]).view(1, 1, 1, 3), torch.ones(1, 3, dtype=torch.bool)
    raw = torch.tensor([0.5, 0.7310586, 0.8807971])
    for preset, expected in (("sigmoid_nobias", raw), ("sigmoid_norm", raw / raw.sum())):
        attn = AttnConfig(**{k: v for k, v in OmegaConf.load(CONFIGS / "attn" / f"{preset}.yaml").items()
                             if k != "name"})
        torch.testing.assert_close(NORMALISERS[attn.normaliser](scores, visible, attn)[0, 0, 0], expected)


def test_sigmoid_bias_overrides_minus_log_length():
    scores, visible = torch.zeros(1, 1, 2, 2), torch.ones(2, 2, dtype=torch.bool)
    torch.testing.assert_close(NORMALISERS["sigmoid"](scores, visible, AttnConfig(sigmoid_bias=1.0)),
                               torch.sigmoid(torch.ones(1, 1, 2, 2)))


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
        for module in (plain, slotted):     # q = 1 for every token, so q . k_slot = -1e6 * D
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
        gated.gate.bias.fill_(1e4)          # sigma = 1
    x, visible = torch.randn(2, 5, 16), torch.ones(5, 5, dtype=torch.bool)
    torch.testing.assert_close(gated(x, visible), plain(x, visible))
    with torch.no_grad():
        gated.gate.bias.fill_(-1e4)         # shut: the head writes nothing but W_O's bias
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


def test_dyt_and_rmsnorm_match_their_formulas():
    x = torch.randn(3, 8)
    dyt = DynamicTanh(8)
    with torch.no_grad():
        dyt.gamma.copy_(torch.linspace(0.5, 2, 8))
        dyt.beta.copy_(torch.linspace(-1, 1, 8))
    torch.testing.assert_close(dyt(x), dyt.gamma * torch.tanh(0.5 * x) + dyt.beta)
    rms = torch.nn.RMSNorm(8)
    torch.testing.assert_close(rms(x), x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + torch.finfo(x.dtype).eps))


def test_registers_are_dropped_at_the_output_and_seen_by_the_taps():
    model = make_model(n_registers=3)
    x = torch.randn(2, 10, 6)
    with capture(model) as cache:
        out = model(x)
    assert out.shape == (2, 10, 4)
    assert cache["blocks.0.attn.weights"].shape == (2, 2, 13, 13)
    assert model.token_positions(10).tolist() == [0] + list(range(4, 13))
    assert model.register_positions().tolist() == [1, 2, 3]


@pytest.mark.parametrize("gate", ["none", "headwise"])
@pytest.mark.parametrize("causal", [True, False])
def test_fused_training_path_matches_the_explicit_path(monkeypatch, gate, causal):
    """Training (no capture) runs PyTorch's fused kernel; evaluation (capture) the explicit path."""
    import sinkexp.model.attention as A

    calls = []
    fused_kernel = F.scaled_dot_product_attention
    monkeypatch.setattr(A.F, "scaled_dot_product_attention", lambda *a, **k: calls.append(1) or fused_kernel(*a, **k))
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
        torch.testing.assert_close(sunk["weights"][..., 0], torch.ones(3, 2, 5))     # all mass on key 0
        with intervene(attention, {"v": lambda v: v.index_fill(2, torch.tensor([0]), 0.0)}):
            with capture(attention, ["mixed"]) as ablated:
                out = attention(x, visible)
    torch.testing.assert_close(ablated["mixed"], torch.zeros(3, 2, 5, 8))
    torch.testing.assert_close(out, attention.out.bias.expand(3, 5, 16))
    assert not torch.allclose(plain["mixed"], torch.zeros_like(plain["mixed"]))      # nothing stays replaced
    assert all(tap.replace is None for tap in attention.modules() if hasattr(tap, "replace"))


def test_an_intervention_that_returns_its_input_changes_nothing_and_forces_the_explicit_path():
    from sinkexp.model import intervene

    model = make_model()
    x = torch.randn(2, 10, 6)
    with intervene(model, {"blocks.0.attn.weights": lambda w: w, "blocks.1.resid_post": lambda h: h}):
        same = model(x)
    torch.testing.assert_close(same, model(x), atol=1e-5, rtol=1e-5)
    with pytest.raises(KeyError, match="unknown capture point"):
        with intervene(model, {"blocks.0.attn.weight": lambda w: w}):
            pass


@pytest.mark.parametrize("std", [0.02, 1.0])
def test_learned_positions_start_at_the_chosen_scale(std):
    torch.manual_seed(0)
    model = Transformer(ModelConfig(d_model=64, pos_init_std=std), AttnConfig(),
                        TriggerTask(TriggerConfig(seq_len=32, d_x=4)))
    assert model.positions.table.std().item() == pytest.approx(std, rel=0.05)     # 32 x 64 draws


@pytest.mark.parametrize("norm", ["pre", "post", "none"])
def test_positions_into_the_first_attention_only_reach_its_input(norm):
    """model.pos_into=first_attn: block 0 computes x + attn(N(x + P)) (post: N(x + attn(x + P))); the
    stream, later blocks and the readout never see P. Checked against the blocks' own modules."""
    model = make_model(norm=norm, pos_into="first_attn", mlp="none")
    with torch.no_grad():
        model.positions.table.normal_()          # large enough to matter
    x = torch.randn(2, 10, 6)
    visible = model.visible(10, x.device)
    P = model.positions.table[:10]
    h = model.embed_in(x)
    first, second = model.blocks
    attn_in = first.norms_in[0](h + P)
    h = first.norms_out[0](h + first.attn(attn_in, visible))
    h = second.norms_out[0](h + second.attn(second.norms_in[0](h), visible))
    torch.testing.assert_close(model(x), model.readout(model.final_norm(h)))
    with capture(model, ["embed"]) as seen:
        model(x)
    torch.testing.assert_close(seen["embed"], model.embed_in(x))   # the stream starts without positions


def test_mlp_bias_overrides_model_bias():
    assert make_model(bias=False, mlp_bias=True).blocks[0].mlp[0].bias is not None
    assert make_model(bias=True, mlp_bias=False).blocks[0].mlp[0].bias is None
    assert make_model(bias=False).blocks[0].mlp[0].bias is None
    assert make_model(bias=False, mlp_bias=True).blocks[0].attn.qkv.bias is None


@pytest.mark.parametrize("attn", ["softmax", "relu"])
def test_a_hidden_bos_key_gets_no_attention_and_changes_no_other_position(attn):
    model = make_model(attn, hide_bos=True)
    x = torch.randn(2, 10, 6)
    with capture(model, ["blocks.0.attn.weights", "blocks.1.attn.weights"]) as cache:
        out = model(x)
    for weights in cache.values():
        assert torch.all(weights[:, :, 1:, 0] == 0)
        torch.testing.assert_close(weights[:, :, 0, 0], torch.ones_like(weights[:, :, 0, 0]) if attn == "softmax"
                                   else weights[:, :, 0, 0])            # BOS still sees itself
    changed = x.clone()
    changed[:, 0] = torch.randn(2, 6)
    torch.testing.assert_close(model(changed)[:, 1:], out[:, 1:])      # nothing reads BOS any more
    assert not torch.allclose(make_model(attn)(changed)[:, 1:], make_model(attn)(x)[:, 1:])


def broadcast_model(**model):
    from sinkexp.tasks.broadcast import BroadcastConfig, BroadcastTask
    torch.manual_seed(0)
    task = BroadcastTask(BroadcastConfig(seq_len=6, d=8))
    cfg = {"n_layers": 2, "d_model": 8, "mlp": "gelu", "embed": "identity", "readout": "identity", **model}
    return Transformer(ModelConfig(**cfg), AttnConfig(), task)


@pytest.mark.parametrize("gate", ["learned", "fixed"])
def test_global_pathway_adds_its_gated_pooled_state_to_the_attention_write(gate):
    """Block 0 computes x + attn(z) + gamma_i W_OG sum_j pi_j W_VG z_j with z = N(x), pi = softmax(z w_P),
    gamma_i = sigmoid(z_i w_g + b) or 1: checked against the block's own modules."""
    model = broadcast_model(global_pathway=gate)
    x = torch.randn(3, 6, 8)
    block = model.blocks[0]
    pathway = block.pathway
    z = block.norms_in[0](model.positions(x))
    pi = torch.softmax(z @ pathway.w_p.weight[0], dim=1)                           # (B, T)
    state = (pi[..., None] * (z @ pathway.w_vg.weight.T)).sum(1)                    # (B, d)
    gamma = torch.sigmoid(z @ pathway.gate.weight[0] + pathway.gate.bias)[..., None] if gate == "learned" else 1.0
    pathway_write = gamma * (state @ pathway.w_og.weight.T)[:, None]
    h = model.positions(x) + block.attn(z, model.visible(6, x.device)) + pathway_write
    h = block.sublayer(1, h, block.mlp)
    with capture(model, ["blocks.0.resid_post", "blocks.0.pathway.pool"]) as cache:
        model(x)
    torch.testing.assert_close(cache["blocks.0.resid_post"], h)
    torch.testing.assert_close(cache["blocks.0.pathway.pool"], pi)
    if gate == "learned":
        assert torch.all(pathway.gate.bias == 0)                                   # gamma = 1/2 at init


def test_global_pathway_leaves_the_rest_of_the_model_as_without_it():
    """The pathway's weights are drawn last: the arms of one seed start from the same base weights."""
    plain, with_pathway = broadcast_model().state_dict(), broadcast_model(global_pathway="learned").state_dict()
    extra = set(with_pathway) - set(plain)
    assert extra and all(".pathway." in name for name in extra)
    for name, tensor in plain.items():
        torch.testing.assert_close(with_pathway[name], tensor, rtol=0, atol=0)
    assert not any(name.endswith("pathway.gate") for name, _ in broadcast_model(global_pathway="fixed").named_modules())


def test_global_pathway_weights_start_at_std_0_02():
    """As the source's nn.init.trunc_normal_(std=0.02), whose bounds (+-2) are absolute: a plain N(0, 0.02^2)."""
    from sinkexp.model.pathway import GlobalPathway
    torch.manual_seed(0)
    assert GlobalPathway(64, gate="learned").w_vg.weight.std().item() == pytest.approx(0.02, rel=0.05)   # 4096 draws


def test_the_dynamics_form_is_the_source_notebooks_one_head_model():
    """task=damping_dynamics: y = LN(x + pos + bos) + W_O softmax(Q K^T / sqrt(d)) V with Q, K, V read from
    that same LN(x + pos + bos) (Kempner noop_dynamics.ipynb's OneHead), computed by hand from the
    model's own weights."""
    from sinkexp.tasks.damping import DampingConfig, DampingTask

    torch.manual_seed(0)
    preset = OmegaConf.load(CONFIGS / "task" / "damping_dynamics.yaml")
    model = Transformer(ModelConfig(**preset.model), AttnConfig(), DampingTask(DampingConfig(**preset.task)))
    with torch.no_grad():
        model.positions.table.normal_()                                    # large enough to matter
        model.bos_vector.normal_()
    x = torch.randn(3, 32, 64)
    h = x + model.positions.table[:32]
    h[:, 0] += model.bos_vector
    z = F.layer_norm(h, (64,), model.embed_norm.weight, model.embed_norm.bias)
    w_q, w_k, w_v = model.blocks[0].attn.qkv.weight.chunk(3)
    weights = torch.softmax((z @ w_q.T) @ (z @ w_k.T).transpose(1, 2) / 8.0, dim=-1)   # no causal mask
    expected = z + (weights @ (z @ w_v.T)) @ model.blocks[0].attn.out.weight.T
    torch.testing.assert_close(model(x), expected)
