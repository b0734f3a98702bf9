"""The spike of a measured LM followed through its blocks (analysis/spike.py), on tiny Llamas built
here: a spike planted in BOS's embedding with blocks that write nothing gives the closed-form
anatomy (no step up, no step down, one state in every sequence) and the ablation's closed form (the
mean changes nothing); on a random model every block's MLP and attention write, read off the
modules themselves, give the analysis's numbers (two computations, one answer)."""

import pytest
import torch
from hf_models import tiny

from sinkexp.analysis.load import load_run
from sinkexp.analysis.spike import constancy, massive_ablation, on_first, peak_layer, spike_anatomy
from sinkexp.hf.runner import measure_checkpoint

pytest.importorskip("transformers")

BOS, CHANNEL, SPIKE = 256, 3, 1000.0


def planted(model):
    """Blocks that write nothing (o_proj and down_proj zero): the stream is the embedding at every
    layer; BOS's embedding holds SPIKE at CHANNEL, every other entry is N(0, 0.02^2)."""
    for layer in model.model.layers:
        layer.self_attn.o_proj.weight.zero_()
        layer.mlp.down_proj.weight.zero_()
    model.model.embed_tokens.weight[BOS, CHANNEL] = SPIKE


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    root = tmp_path_factory.mktemp("spike")
    runs = {}
    for name, edit in (("planted", planted), ("random", None)):
        folder = tiny("llama", root / name, edit=edit)
        runs[name] = load_run(measure_checkpoint(str(folder), root / f"{name}-run", n=6, seq_len=12))
    return runs


def test_a_spike_the_blocks_do_not_touch_has_the_closed_form_anatomy(measured):
    anatomy = spike_anatomy(measured["planted"], chunk=4)  # two chunks: the sequences are put together
    assert anatomy["peak_layer"] == 0  # every layer's stream is the same: the first largest
    assert (anatomy["position"], anatomy["channel"], anatomy["at_first"]) == (0, CHANNEL, 1.0)
    assert anatomy["step_up"] == pytest.approx(0, abs=1e-6) and anatomy["step_down"] == pytest.approx(0, abs=1e-6)
    assert anatomy["state_cos"] == pytest.approx(1.0)  # BOS's state, the same in every sequence
    assert anatomy["rest_cos"] < 0.9  # other positions hold other bytes


def test_the_anatomy_reads_what_each_blocks_mlp_and_attention_wrote(measured):
    """On a random model: the spike entry followed through the decoder layers' own outputs and the
    MLP's and attention's outputs, hooked on the modules; step_up, step_down and up_block from them."""
    run = measured["random"]
    model, outputs = run.model, {}
    hooks = [
        module.register_forward_hook(
            lambda _, __, out, key=(kind, i): outputs.update({key: out[0] if isinstance(out, tuple) else out})
        )
        for i, layer in enumerate(model.model.layers)
        for kind, module in (("layer", layer), ("attn", layer.self_attn), ("mlp", layer.mlp))
    ]
    with torch.no_grad():
        embedded = model.model(input_ids=run.inputs, output_hidden_states=True).hidden_states[0]
    for hook in hooks:
        hook.remove()
    peak, L, b = peak_layer(run.metrics), len(model.model.layers), torch.arange(len(run.inputs))
    where = outputs["layer", peak].abs().flatten(1).argmax(dim=1)
    p, c = where // embedded.shape[2], where % embedded.shape[2]
    v = torch.stack([embedded[b, p, c], *(outputs["layer", i][b, p, c] for i in range(L))])
    mlp = torch.stack([outputs["mlp", i][b, p, c] for i in range(L)])
    sign = v[peak + 1].sign()
    tallest = (sign * v).max(dim=0).values
    anatomy = spike_anatomy(run)
    assert anatomy["step_up"] == pytest.approx(
        ((sign * mlp[: (L + 1) // 2]).max(dim=0).values / tallest).mean().item(), rel=1e-4
    )
    assert anatomy["step_down"] == pytest.approx((1 - sign * v[-1] / tallest).mean().item(), rel=1e-4)
    assert anatomy["up_block"] == torch.mode((sign * mlp).argmax(dim=0)).values.item()
    attn = torch.stack([outputs["attn", i][b, p, c] for i in range(L)])
    torch.testing.assert_close(v[1:] - v[:-1], attn + mlp)  # a block's update is its two writes


def test_constancy_is_the_mean_cosine_with_the_mean():
    same = torch.tensor([[1.0, 2.0], [2.0, 4.0]])  # one direction at two lengths
    assert constancy(same) == pytest.approx(1.0)
    assert constancy(torch.tensor([[1.0, 0.0], [0.0, 1.0]])) == pytest.approx(2**-0.5)  # each 45 degrees off


def test_the_ablation_of_a_fixed_spike_mean_keeps_zero_changes_none_where_there_is_none(measured):
    """BOS's planted entry is its sequence's only one >= 100x the median, the same in every sequence:
    set to its mean nothing changes (ratio 1); set to zero the model's outputs move. A model without
    massive activations has nothing to set: both ratios 1."""
    ablated = massive_ablation(measured["planted"], layer=1, sequences=5)
    assert ablated["entries"] == 5 and ablated["layer"] == 1
    assert ablated["massive_mean"] == pytest.approx(1.0, abs=1e-6) and abs(ablated["massive_zero"] - 1) > 1e-3
    assert massive_ablation(measured["random"], layer=1) == {
        "massive_zero": 1.0,
        "massive_mean": 1.0,
        "entries": 0,
        "layer": 1,
    }


def test_an_analysis_on_the_first_sequences_reads_those_alone(measured):
    """on_first gives the analysis the run with its first rows of inputs, the model and settings unchanged."""
    run = measured["random"]
    seen = on_first(run, lambda part: (part.inputs, part.model), sequences=2)
    assert torch.equal(seen[0], run.inputs[:2]) and seen[1] is run.model
