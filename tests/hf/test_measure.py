"""`sinkexp measure` on Hugging Face causal LMs built here from configs (no download): the captured
attention equals transformers' eager attention, hand-set models give their closed-form metrics,
the command writes run directories `sinkexp report` reads, sweeps skip finished runs, and every
bad input is one line, exit 2, nothing written. tests/hf/test_export.py checks a trained sinkexp run."""

import math

import pandas as pd
import pytest
import torch
from hf_models import KINDS, sink_at_position_zero, tiny

from sinkexp.hf import families
from sinkexp.hf import measure as hf_measure
from sinkexp.hf.capture import layer_by_layer


@pytest.mark.parametrize("kind", KINDS)
def test_captured_attention_is_transformers_eager_attention(kind, tmp_path):
    from transformers import AutoModelForCausalLM

    folder = tiny(kind, tmp_path / kind)
    eager = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
    ours = hf_measure.load_model(folder, "float32", torch.device("cpu"))
    inputs = torch.randint(0, 256, (3, 9), generator=torch.Generator().manual_seed(1))
    captured = {}
    with (
        torch.no_grad(),
        layer_by_layer(ours, families.FAMILIES[kind], lambda layer, cache: captured.update({layer: dict(cache)})),
    ):
        logits = ours(input_ids=inputs, use_cache=False).logits
    reference = eager(input_ids=inputs, output_attentions=True, output_hidden_states=True)
    torch.testing.assert_close(logits, reference.logits)
    for layer in range(2):
        assert all(name.startswith(f"blocks.{layer}.") for name in captured[layer])  # one layer's taps at a time
        torch.testing.assert_close(captured[layer][f"blocks.{layer}.attn.weights"], reference.attentions[layer])
        if layer == 0:  # the stream after block 0 (the last hidden state has the final norm applied)
            torch.testing.assert_close(captured[0]["blocks.0.resid_post"], reference.hidden_states[1])


def zero_queries_and_keys(kind):
    """Scores 0 everywhere, so every query attends uniformly to the keys it sees: A[t, 0] = 1/(t+1)."""

    def edit(model):
        family = families.FAMILIES[kind]
        for layer in family.layer_modules(model):
            attn = family.attention_module(layer)
            if kind == "gpt2":
                attn.c_attn.weight[:, :32] = 0
                attn.c_attn.bias[:32] = 0
            elif kind == "gpt_neox":
                attn.query_key_value.weight.view(2, 3, 8, 16)[:, :2] = 0
                attn.query_key_value.bias.view(2, 3, 8)[:, :2] = 0
            else:
                attn.q_proj.weight.zero_()
                attn.k_proj.weight.zero_()

    return edit


def finals(rows):
    frame = pd.DataFrame(rows, columns=["step", "layer", "head", "query_type", "metric", "value"])
    return frame.groupby(["layer", "query_type", "metric"])["value"].mean()


@pytest.mark.parametrize("kind", KINDS)
def test_uniform_attention_reads_one_over_t_plus_one(kind, tmp_path):
    T = 8
    model = hf_measure.load_model(
        tiny(kind, tmp_path / kind, edit=zero_queries_and_keys(kind)), "float32", torch.device("cpu")
    )
    inputs = torch.randint(0, 256, (4, T), generator=torch.Generator().manual_seed(2))
    weights = []
    with (
        torch.no_grad(),
        layer_by_layer(
            model, families.FAMILIES[kind], lambda layer, cache: weights.append(cache[f"blocks.{layer}.attn.weights"])
        ),
    ):
        model(input_ids=inputs, use_cache=False)
    first = torch.tensor([1 / (t + 1) for t in range(T)])
    for layer_weights in weights:
        torch.testing.assert_close(layer_weights[..., 0], first.expand_as(layer_weights[..., 0]))
    values = finals(hf_measure.measure(model, inputs, step=5)[0])
    harmonic = sum(1 / (t + 1) for t in range(T))
    for layer in (0, 1):
        assert values[(layer, "text", "sink_attn")] == pytest.approx((harmonic - 1) / (T - 1), rel=1e-6)
        assert values[(layer, "all", "sink_score")] == pytest.approx(harmonic / T, rel=1e-6)  # 0.340 > 0.3
        assert values[(layer, "all", "sink_rate@0.3")] == 1.0 and values[(layer, "all", "sink_rate@0.8")] == 0.0


def test_heads_set_to_attend_to_position_zero_read_sink_rate_one(tmp_path):
    model = hf_measure.load_model(
        tiny("gpt2", tmp_path / "sink", edit=sink_at_position_zero), "float32", torch.device("cpu")
    )
    values = finals(hf_measure.measure(model, torch.randint(0, 256, (3, 10)), step=0)[0])
    for layer in (0, 1):
        assert values[(layer, "text", "sink_attn")] == 1.0 and values[(layer, "all", "sink_score")] == 1.0
        assert values[(layer, "all", "sink_rate@0.3")] == 1.0 and values[(layer, "all", "sink_rate@0.8")] == 1.0
    assert values[(-1, "all", "sink_rate@0.8")] == 1.0


def test_chunks_give_the_whole_batch_means(tmp_path):
    """Means over sequences and queries do not depend on the chunk size (docs/measure.md)."""
    model = hf_measure.load_model(tiny("gpt_neox", tmp_path / "m"), "float32", torch.device("cpu"))
    inputs = torch.randint(0, 256, (6, 8), generator=torch.Generator().manual_seed(3))
    whole, chunked = (finals(hf_measure.measure(model, inputs, chunk=chunk)[0]) for chunk in (None, 4))
    for metric in ("sink_attn", "sink_score", "sink_rate@0.3", "logit_gap", "v_norm_sink", "resid_norm_rest"):
        pd.testing.assert_series_equal(whole.xs(metric, level="metric"), chunked.xs(metric, level="metric"), rtol=1e-5)


def test_uniform_loss_reference_is_log_vocab():
    batch = hf_measure.text_batch(torch.tensor([[256, 3, 4]]))
    assert batch.loss_mask.tolist() == [[True, True, False]] and batch.targets[0, :2].tolist() == [3, 4]
    assert hf_measure.NextToken(257).baseline_loss(batch)[0, 0].item() == pytest.approx(math.log(257))


def test_the_loss_a_few_sequences_at_a_time_is_the_whole_batchs_bit_for_bit(monkeypatch):
    logits = torch.randn(7, 5, 300, generator=torch.Generator().manual_seed(4))
    batch = hf_measure.text_batch(torch.randint(0, 300, (7, 5), generator=torch.Generator().manual_seed(5)))
    whole = torch.nn.functional.cross_entropy(logits.view(-1, 300), batch.targets.flatten(), reduction="none")
    monkeypatch.setattr(hf_measure, "LOSS_ELEMENTS", 2 * 5 * 300)  # two sequences a call: 4 calls
    assert torch.equal(hf_measure.NextToken(300).loss(logits, batch), whole.view(7, 5))


def test_the_loss_is_within_float32s_rounding_of_float64s_at_a_large_vocabulary():
    """Each position's V logits reduced as one contiguous row: at V = 50304 and logits of scale 3 the
    float32 loss stays within 1e-5 nats of float64's (a (B, V, T) view reduced term by term: 5.9e-5 here)."""
    logits = 3 * torch.randn(2, 8, 50304, generator=torch.Generator().manual_seed(6))
    batch = hf_measure.text_batch(torch.randint(0, 50304, (2, 8), generator=torch.Generator().manual_seed(7)))
    targets = batch.targets.flatten()
    exact = torch.nn.functional.cross_entropy(logits.double().view(-1, 50304), targets, reduction="none")
    loss = hf_measure.NextToken(50304).loss(logits, batch)
    assert (loss.double().flatten() - exact).abs().max().item() < 1e-5


@pytest.mark.parametrize("kind", KINDS)
def test_perturbation_rows_are_the_metric_of_the_hidden_states_in_any_chunking(kind, tmp_path):
    """perturb=true: each layer's perturb_change and perturb_reach as evaluate/perturbation.spread
    gives them on transformers' own hidden states, the same over 2 chunks as over one."""
    from sinkexp.evaluate.perturbation import perturbed_position, spread, swap_token

    model = hf_measure.load_model(tiny(kind, tmp_path / kind), "float32", torch.device("cpu"))
    inputs = torch.randint(0, 256, (4, 12), generator=torch.Generator().manual_seed(2))
    at = perturbed_position(12)
    with torch.no_grad():
        clean = model(input_ids=inputs, output_hidden_states=True).hidden_states[1:]
        changed = model(input_ids=swap_token(inputs, at), output_hidden_states=True).hidden_states[1:]
    rows = {(layer, metric): value for _, layer, _, _, metric, value in hf_measure.perturbation_rows(model, inputs, 5)}
    for layer, (h, h_changed) in enumerate(zip(clean, changed)):
        change, reach = spread(h, h_changed, at)
        assert rows[layer, "perturb_change"] == pytest.approx(change) and rows[layer, "perturb_reach"] == pytest.approx(
            reach
        )
    chunked = hf_measure.perturbation_rows(model, inputs, 5, chunk=2)
    assert [row[:5] for row in chunked] == [(5, layer, -1, "all", metric) for layer, metric in rows]
    assert [row[5] for row in chunked] == pytest.approx(list(rows.values()))


def test_init_measures_the_architecture_at_its_own_seeded_random_initialisation(tmp_path, monkeypatch):
    """init=S: transformers' initialisation of the folder's config after torch.manual_seed(S), the
    same weights for the same seed, none of the folder's; the global generator is left as it was.
    Drawn once, then read from the cache: the second load of seed 0 draws nothing."""
    from transformers import AutoConfig, AutoModelForCausalLM

    monkeypatch.setenv("SINKEXP_CACHE", str(tmp_path / "cache"))
    folder = tiny("llama", tmp_path / "llama", seed=3)
    config = AutoConfig.from_pretrained(folder)
    cpu = torch.device("cpu")
    torch.manual_seed(7)
    expected_next = torch.rand(1)
    torch.manual_seed(7)
    first = hf_measure.initialised(folder, "float32", cpu, 0).state_dict()
    assert torch.equal(torch.rand(1), expected_next)  # the caller's generator untouched
    assert len(list((tmp_path / "cache" / "init").glob("*/config.json"))) == 1
    with monkeypatch.context() as drawing:  # from the cache: nothing drawn
        drawing.setattr(AutoModelForCausalLM, "from_config", lambda *_, **__: pytest.fail("drawn again"))
        again = hf_measure.initialised(folder, "float32", cpu, 0).state_dict()
    other = hf_measure.initialised(folder, "float32", cpu, 1).state_dict()
    trained = AutoModelForCausalLM.from_pretrained(folder).state_dict()
    torch.manual_seed(0)  # what from_config draws after the seed: transformers' own initialisation
    direct = AutoModelForCausalLM.from_config(config).state_dict()
    weights = [name for name in first if name.endswith("proj.weight")]
    assert all(torch.equal(first[name], again[name]) and torch.equal(first[name], direct[name]) for name in first)
    assert all(not torch.equal(first[name], other[name]) for name in weights)
    assert all(not torch.equal(first[name], trained[name]) for name in weights)
    _, model = hf_measure.load_checkpoint(str(folder), None, "float32", cpu, init=0)
    assert all(torch.equal(value, first[name]) for name, value in model.state_dict().items())


def test_earlier_runs_keep_their_hashes_and_a_later_key_set_changes_it():
    """hf/identity.measure_hash: keys added after runs were measured leave their hashes, change it where set."""
    import dataclasses
    import hashlib
    import json

    from sinkexp.config.settings import MeasureConfig
    from sinkexp.hf.identity import UNHASHED, measure_hash

    cfg = MeasureConfig(model="m")  # the hash as written before the keys existed: every setting but UNHASHED
    later = ("perturb", "skip", "init")  # keys added after runs were measured: at their defaults, not hashed
    before = {k: v for k, v in dataclasses.asdict(cfg).items() if k not in (*UNHASHED, *later)}
    before.update(model="d", text="t", revision=None, chunk=None)
    digest = hashlib.sha256(json.dumps(before, sort_keys=True).encode()).hexdigest()[:8]
    later_set = (("perturb", True), ("skip", 64), ("init", 0))
    changed = [dataclasses.replace(cfg, **{key: value}) for key, value in later_set]
    assert measure_hash(cfg, "d", "t") == digest
    assert len({digest, *(measure_hash(c, "d", "t") for c in changed)}) == 4
