"""hf/capture.py's interventions on a transformers model: a replacement by the tensor itself changes
nothing, a zeroed last-layer output gives Llama's closed-form zero logits, all attention on a key
whose value is zeroed makes the head write nothing, and the model is left as it was."""

import pytest
import torch
from hf_models import tiny

from sinkexp.hf import capture
from sinkexp.hf.families import FAMILIES
from sinkexp.hf.measure import load_model

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    model = load_model(tiny("llama", tmp_path_factory.mktemp("ll") / "ll"), "float32", torch.device("cpu"))
    inputs = torch.randint(0, 256, (3, 10), generator=torch.Generator().manual_seed(0))
    return model, FAMILIES["llama"], inputs


@torch.no_grad()
def test_identity_replacements_change_nothing_and_leave_the_model_as_it_was(llama):
    model, family, inputs = llama
    before = model(input_ids=inputs).logits
    same = {f"blocks.{layer}.{tap}": lambda x: x for layer in (0, 1) for tap in capture.REPLACEABLE}
    with capture.intervene(model, family, same):
        during = model(input_ids=inputs).logits
    torch.testing.assert_close(during, before, rtol=0, atol=0)
    assert not any(hasattr(family.attention_module(layer), capture.REPLACE) for layer in family.layer_modules(model))
    assert not any(layer._forward_hooks for layer in family.layer_modules(model))
    with pytest.raises(KeyError, match=r"unknown capture point\(s\) \['blocks.2.attn.v'\]"):
        with capture.intervene(model, family, {"blocks.2.attn.v": lambda v: v}):
            pass


@torch.no_grad()
def test_replacements_reach_the_later_layers_and_the_captured_taps(llama):
    model, family, inputs = llama
    with capture.intervene(model, family, {"blocks.1.resid_post": torch.zeros_like}):
        logits = model(input_ids=inputs).logits
    assert torch.all(logits == 0)  # RMSNorm(0) = 0, and lm_head has no bias
    onto_first = {"blocks.0.attn.weights": lambda w: torch.zeros_like(w).index_fill_(-1, torch.tensor([0]), 1.0)}
    zero_first = {"blocks.0.attn.v": lambda v: v.index_fill(2, torch.tensor([0]), 0.0)}
    seen = {}
    with (
        capture.intervene(model, family, {**onto_first, **zero_first}),
        capture.layer_by_layer(model, family, lambda layer, taps: seen.update(taps) if layer == 0 else None),
    ):
        model(input_ids=inputs)
    assert torch.all(seen["blocks.0.attn.mixed"] == 0) and torch.all(seen["blocks.0.attn.output"] == 0)
    assert torch.all(seen["blocks.0.attn.weights"][..., 0] == 1)  # the capture records what replaced it
