"""`sinkexp measure` on Hugging Face causal LMs built here from configs (no download): the captured
attention equals transformers' eager attention, hand-set models give their closed-form metrics,
the command writes run directories `sinkexp report` reads, sweeps skip finished runs, and every
bad input is one line, exit 2, nothing written. tests/test_export.py checks a trained sinkexp run."""
import json
import math
import sys

import numpy as np
import pandas as pd
import pytest
import torch
from test_cli import sinkexp

from sinkexp.evaluate.tables import METRICS
from sinkexp.hf import families
from sinkexp.hf import measure as H
from sinkexp.hf.capture import layer_by_layer
from sinkexp.hf.export import byte_tokenizer

SIZES = dict(vocab_size=257, hidden_size=16, num_attention_heads=2, num_hidden_layers=2, max_position_embeddings=32)


def config(kind: str, **changes):
    from transformers import GPT2Config, GPTNeoXConfig, LlamaConfig

    if kind == "gpt2":
        return GPT2Config(vocab_size=257, n_embd=16, n_head=2, n_layer=2, n_positions=32, bos_token_id=256,
                          eos_token_id=256, **changes)
    if kind == "gpt_neox":
        return GPTNeoXConfig(**SIZES, intermediate_size=32, bos_token_id=256, eos_token_id=256, **changes)
    return LlamaConfig(**{**SIZES, "num_attention_heads": 4}, num_key_value_heads=2, intermediate_size=32,
                       bos_token_id=256, eos_token_id=None, **changes)      # grouped-query: 4 query heads, 2 kv


def save(model, folder, bos: bool):
    model.save_pretrained(folder)
    byte_tokenizer(bos).save_pretrained(folder)
    return folder


def tiny(kind: str, folder, seed: int = 0, edit=None, **changes):
    """A randomly initialised `kind` model (GPT-2, GPT-NeoX or grouped-query Llama) saved in `folder`
    with task=lm's byte tokenizer (a BOS in front of every text for Llama, as Llama's own does)."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config(kind, **changes))
    if edit is not None:
        with torch.no_grad():
            edit(model)
    return save(model, folder, bos=kind == "llama")


KINDS = ("gpt2", "gpt_neox", "llama")


@pytest.mark.parametrize("kind", KINDS)
def test_captured_attention_is_transformers_eager_attention(kind, tmp_path):
    from transformers import AutoModelForCausalLM

    folder = tiny(kind, tmp_path / kind)
    eager = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
    ours = H.load_model(folder, "float32", torch.device("cpu"))
    inputs = torch.randint(0, 256, (3, 9), generator=torch.Generator().manual_seed(1))
    captured = {}
    with torch.no_grad(), layer_by_layer(ours, families.FAMILIES[kind],
                                         lambda layer, cache: captured.update({layer: dict(cache)})):
        logits = ours(input_ids=inputs, use_cache=False).logits
    reference = eager(input_ids=inputs, output_attentions=True, output_hidden_states=True)
    torch.testing.assert_close(logits, reference.logits)
    for layer in range(2):
        assert all(name.startswith(f"blocks.{layer}.") for name in captured[layer])   # one layer's taps at a time
        torch.testing.assert_close(captured[layer][f"blocks.{layer}.attn.weights"], reference.attentions[layer])
        if layer == 0:   # the stream after block 0 (the last hidden state has the final norm applied)
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
    model = H.load_model(tiny(kind, tmp_path / kind, edit=zero_queries_and_keys(kind)), "float32", torch.device("cpu"))
    inputs = torch.randint(0, 256, (4, T), generator=torch.Generator().manual_seed(2))
    weights = []
    with torch.no_grad(), layer_by_layer(model, families.FAMILIES[kind],
                                         lambda layer, cache: weights.append(cache[f"blocks.{layer}.attn.weights"])):
        model(input_ids=inputs, use_cache=False)
    first = torch.tensor([1 / (t + 1) for t in range(T)])
    for layer_weights in weights:
        torch.testing.assert_close(layer_weights[..., 0], first.expand_as(layer_weights[..., 0]))
    values = finals(H.measure(model, inputs, step=5)[0])
    harmonic = sum(1 / (t + 1) for t in range(T))
    for layer in (0, 1):
        assert values[(layer, "text", "sink_attn")] == pytest.approx((harmonic - 1) / (T - 1), rel=1e-6)
        assert values[(layer, "all", "sink_score")] == pytest.approx(harmonic / T, rel=1e-6)   # 0.340 > 0.3
        assert values[(layer, "all", "sink_rate@0.3")] == 1.0 and values[(layer, "all", "sink_rate@0.8")] == 0.0


def sink_at_position_zero(model):
    """GPT-2 whose every head attends to position 0 alone: token embeddings 0, position 0's a large
    +-1 pattern e (its LayerNorm is e, every other position's is 0), W_K maps e to all-ones keys and a
    query bias of 100 gives position 0 a score of 100 * 8 / sqrt(8) = 283 over 0 elsewhere (e^-283
    is 0 in float32); the heads and MLPs write nothing, so every layer sees the same stream."""
    e = torch.tensor([1.0, -1.0] * 8)
    model.transformer.wte.weight.zero_()
    model.transformer.wpe.weight.zero_()
    model.transformer.wpe.weight[0] = 1000 * e
    for block in model.transformer.h:
        block.attn.c_attn.weight.zero_()
        block.attn.c_attn.bias.zero_()
        block.attn.c_attn.weight[:, 16:32] = torch.outer(e, torch.ones(16)) / 16
        block.attn.c_attn.bias[:16] = 100.0
        for projection in (block.attn.c_proj, block.mlp.c_proj):
            projection.weight.zero_()
            projection.bias.zero_()


def test_heads_set_to_attend_to_position_zero_read_sink_rate_one(tmp_path):
    model = H.load_model(tiny("gpt2", tmp_path / "sink", edit=sink_at_position_zero), "float32", torch.device("cpu"))
    values = finals(H.measure(model, torch.randint(0, 256, (3, 10)), step=0)[0])
    for layer in (0, 1):
        assert values[(layer, "text", "sink_attn")] == 1.0 and values[(layer, "all", "sink_score")] == 1.0
        assert values[(layer, "all", "sink_rate@0.3")] == 1.0 and values[(layer, "all", "sink_rate@0.8")] == 1.0
    assert values[(-1, "all", "sink_rate@0.8")] == 1.0


def test_chunks_give_the_whole_batch_means(tmp_path):
    """Means over sequences and queries do not depend on the chunk size (docs/measure.md)."""
    model = H.load_model(tiny("gpt_neox", tmp_path / "m"), "float32", torch.device("cpu"))
    inputs = torch.randint(0, 256, (6, 8), generator=torch.Generator().manual_seed(3))
    whole, chunked = (finals(H.measure(model, inputs, chunk=chunk)[0]) for chunk in (None, 4))
    for metric in ("sink_attn", "sink_score", "sink_rate@0.3", "logit_gap", "v_norm_sink", "resid_norm_rest"):
        pd.testing.assert_series_equal(whole.xs(metric, level="metric"), chunked.xs(metric, level="metric"),
                                       rtol=1e-5)


def run_dir_of(result):
    return result.stdout.strip().splitlines()[-1].removeprefix("run directory: ")


@pytest.mark.parametrize("kind", KINDS)
def test_measure_writes_a_run_directory_that_report_reads(kind, tmp_path):
    folder = tiny(kind, tmp_path / kind)
    result = sinkexp("measure", str(folder), "n=5", "seq_len=12", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "model: sink rate over all heads" in result.stdout and "on the measured text" in result.stdout
    run = tmp_path / run_dir_of(result)
    assert run.parent == tmp_path / "outputs/runs/measure" / kind
    for name in ("config.yaml", "meta.json", "metrics.csv", "losses.csv", "summary.json", "inputs.npz", "DONE"):
        assert (run / name).exists(), name
    inputs = np.load(run / "inputs.npz")["inputs"]
    text = (sinkexp_text()[: 11 * 5 if kind == "llama" else 12 * 5])
    assert inputs.shape == (5, 12) and (inputs[:, 0] == 256).all() == (kind == "llama")
    body = inputs[:, 1:] if kind == "llama" else inputs
    assert bytes(body.astype(np.uint8).ravel()) == text                       # consecutive windows of the text
    metrics = pd.read_csv(run / "metrics.csv")
    assert set(metrics["metric"]) <= set(METRICS) and "sink_score" in set(metrics["metric"])
    heads = 4 if kind == "llama" else 2
    assert len(metrics[(metrics["metric"] == "sink_attn") & (metrics["query_type"] == "text")]) == 2 * heads
    meta = json.loads((run / "meta.json").read_text())
    assert meta["model"]["weights"]["model.safetensors"] and meta["versions"]["transformers"]
    report = sinkexp("report", str(tmp_path / "outputs"), cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    assert pd.read_csv(tmp_path / "outputs/report/runs.csv")["status"].tolist() == ["done"]
    assert (tmp_path / "outputs/report/sink_attn_by_layer.png").exists()


def sinkexp_text() -> bytes:
    from sinkexp.hf.sources import read_text

    return read_text("kjv").encode()


def test_sweep_skips_finished_runs_and_report_draws_the_checkpoints(tmp_path):
    """Two checkpoints of one run (config.json's `sinkexp` step, as `sinkexp export` writes it): a
    sweep measures both, the same sweep again touches neither, and the report draws them by step."""
    for step, seed in ((100, 0), (300, 1)):
        tiny("gpt2", tmp_path / f"ckpt{step}", seed=seed, sinkexp={"step": step})
    args = ("measure", "-m", f"model={tmp_path / 'ckpt100'},{tmp_path / 'ckpt300'}", "n=3", "seq_len=8", "name=grid")
    first = sinkexp(*args, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    runs = sorted((tmp_path / "outputs/sweeps/grid/measure").glob("*/*/DONE"))
    assert [run.parent.parent.name for run in runs] == ["ckpt100", "ckpt300"]
    written = {run: run.stat().st_mtime_ns for run in runs}
    again = sinkexp(*args, cwd=tmp_path)
    assert again.returncode == 0 and again.stdout.count("finished already (DONE); skipped") == 2
    assert {run: run.stat().st_mtime_ns for run in runs} == written
    assert pd.read_csv(runs[1].parent / "metrics.csv")["step"].unique().tolist() == [300]
    assert sinkexp("report", str(tmp_path / "outputs/sweeps/grid"), cwd=tmp_path).returncode == 0
    assert (tmp_path / "outputs/sweeps/grid/report/checkpoints.png").exists()
    from sinkexp.report.steps import measured_checkpoints
    runs_table = pd.read_csv(tmp_path / "outputs/sweeps/grid/report/runs.csv")
    measured, lines = measured_checkpoints(runs_table, ["model", "step"])
    assert sorted(measured["step"]) == [100, 300] and lines == []     # one folder per step: one line, not two


def test_measure_checkpoint_for_claims_on_named_checkpoints(tmp_path, monkeypatch):
    """What a reproduce claim calls: on_disk first (no network), then the run directory, reused."""
    from sinkexp.hf.command import measure_checkpoint
    from sinkexp.hf.sources import on_disk
    from sinkexp.rundir.files import RunFiles

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = tiny("gpt2", tmp_path / "g")
    assert on_disk(str(folder)) and not on_disk("EleutherAI/pythia-14m", "step1000")
    run = measure_checkpoint(str(folder), tmp_path / "run", n=3, seq_len=8)
    summary = RunFiles(run).summary
    assert summary["step"] == -1 and set(summary["sink_rate"]) == {"0", "1", "model"}
    assert measure_checkpoint(str(folder), tmp_path / "run", n=3, seq_len=8) == run    # finished: reused


def not_a_causal_lm(tmp_path):
    from transformers import T5Config

    T5Config(vocab_size=257, d_model=16, num_layers=1, num_heads=2, d_ff=32).save_pretrained(tmp_path / "t5")
    return str(tmp_path / "t5")


BAD = {   # input -> (arguments, the words the one line must hold)
    "not a model": (lambda p: [str(p)], "no config.json"),
    "hub id not here": (lambda p: ["EleutherAI/pythia-14m", "revision=step1000"], "not on this machine"),
    "not a causal LM": (lambda p: [not_a_causal_lm(p)], "not a causal language model"),
    "T beyond the context": (lambda p: [str(tiny("gpt2", p / "g")), "seq_len=64"], "longer than"),
    "text too short": (lambda p: [str(tiny("gpt2", p / "g")), f"text={short_text(p)}", "seq_len=16"], "need 1600"),
    "unknown key": (lambda p: [str(tiny("gpt2", p / "g")), "sequences=5"], "choose one of: model, revision"),
    "sweep without -m": (lambda p: ["model=a,b"], "needs -m (sinkexp measure -m"),
    "a directory that cannot be made": (lambda p: [str(tiny("gpt2", p / "g")), "seq_len=8", "dir=/proc/sinkexp"],
                                        "/proc/sinkexp cannot be created (/proc is not a writable folder); "
                                        "choose another dir"),
}


def test_the_command_line_reads_as_train_reads_it():
    """config/compose.py's parsing and sweep order: quotes and escapes removed, the later key varying fastest."""
    from sinkexp.hf.settings import parse

    multirun, jobs = parse(["-m", "m", "text='my file.txt'", "n=3,4", "revision=null,'a b'"])
    assert multirun and [(job["n"], job["revision"]) for job in jobs] == [("3", "null"), ("3", "a b"),
                                                                          ("4", "null"), ("4", "a b")]
    assert {job["model"] for job in jobs} == {"m"} and {job["text"] for job in jobs} == {"my file.txt"}


def short_text(path):
    (path / "short.txt").write_text("too short")
    return path / "short.txt"


@pytest.mark.parametrize("case", BAD)
def test_bad_input_is_one_line_exit_2_nothing_written(case, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")          # no network here either way: fail at once
    args, words = BAD[case]
    result = sinkexp("measure", *args(tmp_path), cwd=tmp_path)
    assert result.returncode == 2 and words in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not (tmp_path / "outputs").exists()


def test_a_directory_of_another_settings_run_is_refused_before_anything_runs(tmp_path):
    """plan.check_run_dir, as for `sinkexp train`: the same directory with another n is another config."""
    folder = str(tiny("gpt2", tmp_path / "g"))
    assert sinkexp("measure", folder, "n=3", "seq_len=8", f"dir={tmp_path / 'run'}", cwd=tmp_path).returncode == 0
    written = {path: path.stat().st_mtime_ns for path in (tmp_path / "run").iterdir()}
    result = sinkexp("measure", folder, "n=4", "seq_len=8", f"dir={tmp_path / 'run'}", cwd=tmp_path)
    assert result.returncode == 2 and "of another config" in result.stderr
    assert "choose another dir or name" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert {path: path.stat().st_mtime_ns for path in (tmp_path / "run").iterdir()} == written


def test_attention_that_cannot_be_captured_and_missing_transformers(tmp_path, monkeypatch):
    from transformers import GPT2LMHeadModel

    folder = tiny("gpt2", tmp_path / "g")
    monkeypatch.setattr(GPT2LMHeadModel, "_supports_attention_backend", False)
    result = sinkexp("measure", str(folder), cwd=tmp_path)
    assert result.returncode == 2 and "attention weights cannot be returned" in result.stderr
    monkeypatch.setitem(sys.modules, "transformers", None)        # as if the hf extra were not installed
    result = sinkexp("measure", str(folder), cwd=tmp_path)
    assert result.returncode == 2 and "pip install -e .[hf]" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not (tmp_path / "outputs").exists()


def test_uniform_loss_reference_is_log_vocab():
    batch = H.text_batch(torch.tensor([[256, 3, 4]]))
    assert batch.loss_mask.tolist() == [[True, True, False]] and batch.targets[0, :2].tolist() == [3, 4]
    assert H.NextToken(257).baseline_loss(batch)[0, 0].item() == pytest.approx(math.log(257))
