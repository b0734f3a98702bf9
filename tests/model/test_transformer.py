"""The transformer around attention: capture points record without changing the forward pass, norm
placements, positions, registers, biases and the global pathway follow their formulas."""

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from helpers import make_model
from omegaconf import OmegaConf

from sinkexp.config.schema import AttnConfig, ModelConfig
from sinkexp.model import Transformer, capture, tap_names
from sinkexp.model.parts import DynamicTanh
from sinkexp.tasks.trigger import TriggerConfig, TriggerTask

CONFIGS = Path(__file__).parents[2] / "configs"


def test_capture_records_every_tap_without_changing_the_output():
    model = make_model()
    x = torch.randn(2, 10, 6)
    plain = model(x)
    with capture(model) as cache:
        captured = model(x)
    torch.testing.assert_close(plain, captured)
    assert set(cache) == set(tap_names(model))
    assert cache["blocks.1.attn.weights"].shape == (2, 2, 10, 10)  # (B, H, T, S)
    assert cache["blocks.0.attn.v"].shape == (2, 2, 10, 8)  # (B, H, S, D)
    assert cache["blocks.0.resid_post"].shape == (2, 10, 16)
    torch.testing.assert_close(cache["blocks.0.attn.weights"].sum(-1), torch.ones(2, 2, 10))
    # weights @ v is what the head mixes
    torch.testing.assert_close(cache["blocks.0.attn.weights"] @ cache["blocks.0.attn.v"], cache["blocks.0.attn.mixed"])
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
    after_attn = {
        "pre": x + attn(n_in(x)),
        "post": n_out(x + attn(x)),
        "sandwich": x + n_out(attn(n_in(x))),
        "none": x + attn(x),
    }[norm]
    torch.testing.assert_close(block.sublayer(0, x, attn), after_attn)


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
    model = Transformer(
        ModelConfig(d_model=64, pos_init_std=std), AttnConfig(), TriggerTask(TriggerConfig(seq_len=32, d_x=4))
    )
    assert model.positions.table.std().item() == pytest.approx(std, rel=0.05)  # 32 x 64 draws


@pytest.mark.parametrize("norm", ["pre", "post", "none"])
def test_positions_into_the_first_attention_only_reach_its_input(norm):
    """model.pos_into=first_attn: block 0 computes x + attn(N(x + P)) (post: N(x + attn(x + P))); the
    stream, later blocks and the readout never see P. Checked against the blocks' own modules."""
    model = make_model(norm=norm, pos_into="first_attn", mlp="none")
    with torch.no_grad():
        model.positions.table.normal_()  # large enough to matter
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
    torch.testing.assert_close(seen["embed"], model.embed_in(x))  # the stream starts without positions


def test_mlp_bias_overrides_model_bias():
    assert make_model(bias=False, mlp_bias=True).blocks[0].mlp[0].bias is not None
    assert make_model(bias=True, mlp_bias=False).blocks[0].mlp[0].bias is None
    assert make_model(bias=False).blocks[0].mlp[0].bias is None
    assert make_model(bias=False, mlp_bias=True).blocks[0].attn.qkv.bias is None


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
    pi = torch.softmax(z @ pathway.w_p.weight[0], dim=1)  # (B, T)
    state = (pi[..., None] * (z @ pathway.w_vg.weight.T)).sum(1)  # (B, d)
    gamma = torch.sigmoid(z @ pathway.gate.weight[0] + pathway.gate.bias)[..., None] if gate == "learned" else 1.0
    pathway_write = gamma * (state @ pathway.w_og.weight.T)[:, None]
    h = model.positions(x) + block.attn(z, model.visible(6, x.device)) + pathway_write
    h = block.sublayer(1, h, block.mlp)
    with capture(model, ["blocks.0.resid_post", "blocks.0.pathway.pool"]) as cache:
        model(x)
    torch.testing.assert_close(cache["blocks.0.resid_post"], h)
    torch.testing.assert_close(cache["blocks.0.pathway.pool"], pi)
    if gate == "learned":
        assert torch.all(pathway.gate.bias == 0)  # gamma = 1/2 at init


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
    assert GlobalPathway(64, gate="learned").w_vg.weight.std().item() == pytest.approx(0.02, rel=0.05)  # 4096 draws


def test_the_dynamics_form_is_the_source_notebooks_one_head_model():
    """task=damping_dynamics: y = LN(x + pos + bos) + W_O softmax(Q K^T / sqrt(d)) V with Q, K, V read from
    that same LN(x + pos + bos) (Kempner noop_dynamics.ipynb's OneHead), computed by hand from the
    model's own weights."""
    from sinkexp.tasks.damping import DampingConfig, DampingTask

    torch.manual_seed(0)
    preset = OmegaConf.load(CONFIGS / "task" / "damping_dynamics.yaml")
    model = Transformer(ModelConfig(**preset.model), AttnConfig(), DampingTask(DampingConfig(**preset.task)))
    with torch.no_grad():
        model.positions.table.normal_()  # large enough to matter
        model.bos_vector.normal_()
    x = torch.randn(3, 32, 64)
    h = x + model.positions.table[:32]
    h[:, 0] += model.bos_vector
    z = F.layer_norm(h, (64,), model.embed_norm.weight, model.embed_norm.bias)
    w_q, w_k, w_v = model.blocks[0].attn.qkv.weight.chunk(3)
    weights = torch.softmax((z @ w_q.T) @ (z @ w_k.T).transpose(1, 2) / 8.0, dim=-1)  # no causal mask
    expected = z + (weights @ (z @ w_v.T)) @ model.blocks[0].attn.out.weight.T
    torch.testing.assert_close(model(x), expected)
