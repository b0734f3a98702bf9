"""Gemma-3 (families.py's gemma3_text) measured as its architecture asks: the captured attention is
transformers' eager attention in its sliding-window and full layers, logit_gap reads each layer's own
mask, qk_sigma does not move when a q/k-normed projection is rescaled (the model does not either),
the attention's write is what its post-norm hands the stream, and the loss made from the last hidden
states is the one of the model's own logits, soft-capping included."""

import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from gguf_files import model as tiny_model

from sinkexp.hf import families
from sinkexp.hf import measure as hf_measure
from sinkexp.hf.capture import ATTENTION, layer_by_layer, register

WINDOW, T = 4, 12
LAYERS = ["sliding_attention", "full_attention"]


def gemma(**changes):
    register()
    model = tiny_model("gemma3", layer_types=LAYERS, sliding_window=WINDOW, **changes)
    model.config._attn_implementation = ATTENTION
    return model


def inputs(n: int = 3) -> torch.Tensor:
    return torch.randint(0, 256, (n, T), generator=torch.Generator().manual_seed(1))


def captured(model, x) -> dict:
    taps = {}
    with (
        torch.no_grad(),
        layer_by_layer(model, families.FAMILIES["gemma3_text"], lambda l, c: taps.update({l: dict(c)})),
    ):
        logits = model(input_ids=x, use_cache=False).logits
    return taps, logits


def test_gemma3_attention_is_eager_attention_in_sliding_and_full_layers():
    model, x = gemma(), inputs()
    taps, logits = captured(model, x)
    model.config._attn_implementation = "eager"
    with torch.no_grad():
        eager = model(input_ids=x, output_attentions=True)
    torch.testing.assert_close(logits, eager.logits)
    for layer in range(2):
        torch.testing.assert_close(taps[layer][f"blocks.{layer}.attn.weights"], eager.attentions[layer])
    window = taps[0]["blocks.0.attn.visible"].bool()
    assert window[WINDOW, 0].item() is False and window[WINDOW, 1].item() is True  # the window has passed key 0
    assert taps[1]["blocks.1.attn.visible"].bool().equal(torch.ones(T, T, dtype=torch.bool).tril())


def test_logit_gap_in_a_sliding_layer_is_the_direct_mean_over_the_window():
    model, x = gemma(), inputs()
    rows = pd.DataFrame(hf_measure.measure(model, x)[0], columns=["step", "layer", "head", "q", "metric", "value"])
    scores = captured(model, x)[0][0]["blocks.0.attn.scores"]  # (B, H, T, T)
    direct = []
    for head in range(scores.shape[1]):
        gaps = []
        for b in range(len(x)):
            for i in range(1, WINDOW):  # the queries that see the sink (position 0) and another key
                others = [j for j in range(max(0, i - WINDOW + 1), i) if j != 0]
                if others:
                    gaps.append(scores[b, head, i, 0] - scores[b, head, i, others].mean())
        direct.append(torch.stack(gaps).mean().item())
    measured = rows[(rows.layer == 0) & (rows.metric == "logit_gap") & (rows.q == "all")].sort_values("head")
    assert measured.value.tolist() == pytest.approx(direct, rel=1e-5)


def test_qk_sigma_and_the_model_ignore_the_scale_of_a_normed_projection():
    model, x = gemma(), inputs()

    def spectrum():
        rows = pd.DataFrame(hf_measure.measure(model, x)[0], columns=["step", "layer", "head", "q", "metric", "value"])
        return rows[rows.metric.str.startswith("qk_sigma")].value.to_numpy()

    before, logits = spectrum(), captured(model, x)[1]
    with torch.no_grad():
        model.model.layers[0].self_attn.q_proj.weight.mul_(5.0)
        model.model.layers[1].self_attn.k_proj.weight.mul_(0.2)
    torch.testing.assert_close(captured(model, x)[1], logits, rtol=1e-3, atol=1e-3)  # float32 rounding only
    assert spectrum() == pytest.approx(before, rel=1e-4)
    gain = families.FAMILIES["gemma3_text"].qk_gain(model.model.layers[0].self_attn)
    attn = model.model.layers[0].self_attn
    torch.testing.assert_close(gain, (1 + attn.q_norm.weight) * (1 + attn.k_norm.weight))


def test_the_attention_write_is_the_post_norm_output():
    model, x = gemma(), inputs()
    seen = {}
    hook = model.model.layers[1].post_attention_layernorm.register_forward_hook(lambda m, i, o: seen.update(o=o))
    taps = captured(model, x)[0]
    hook.remove()
    torch.testing.assert_close(taps[1]["blocks.1.attn.output"], seen["o"])


@pytest.mark.parametrize("cap", [None, 3.0])
def test_the_loss_from_hidden_states_is_the_loss_of_the_models_logits(cap, monkeypatch):
    model, x = gemma(final_logit_softcapping=cap), inputs(5)
    monkeypatch.setattr(hf_measure, "READOUT_ELEMENTS", 7 * model.config.vocab_size)  # blocks of 7 positions
    batch = hf_measure.text_batch(x)
    with torch.no_grad():
        hidden = model.model(input_ids=x).last_hidden_state
        logits = model(input_ids=x).logits
    task = hf_measure.NextToken(model.config.vocab_size, hf_measure.readout(model))
    direct = F.cross_entropy(logits.flatten(0, 1), batch.targets.flatten(), reduction="none").view(5, T)
    torch.testing.assert_close(task.loss(hidden, batch), direct)
    torch.testing.assert_close(hf_measure.NextToken(model.config.vocab_size).loss(logits, batch), direct)
