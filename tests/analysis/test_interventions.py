"""Causal interventions: each replacement on hand-built tensors, then on a trained run, where the
unchanged model reproduces the run's own final losses and a sink that takes all the attention,
once its value is zeroed, makes the head write nothing."""

import pytest
import torch
from conftest import QUICK
from helpers import sinkexp

from sinkexp.analysis.interventions import INTERVENTIONS, random_other_keys, run_interventions
from sinkexp.analysis.load import load_run
from sinkexp.jobs.runner import run
from sinkexp.model import capture, intervene

B, H, S, D = 3, 2, 5, 4
SINK = torch.tensor([0, 2, 4])  # a different sink key in every sequence
OTHER = torch.tensor([1, 3, 0])


def values():
    return torch.arange(B * H * S * D, dtype=torch.float).view(B, H, S, D)


def test_value_replacements_touch_only_the_chosen_key():
    v = values()
    cases = {
        "zero_sink_value": (SINK, torch.zeros(B, H, D)),
        "donor_sink_value": (SINK, v[torch.arange(B), :, SINK].roll(-1, dims=0)),
        "donor_value_at_sink": (SINK, v[torch.arange(B), :, OTHER].roll(-1, dims=0)),
        "zero_random_value": (OTHER, torch.zeros(B, H, D)),
    }
    for name, (key, expected) in cases.items():
        out = INTERVENTIONS[name](SINK, OTHER)["v"](v)
        for b in range(B):
            torch.testing.assert_close(out[b, :, key[b]], expected[b])
            untouched = [s for s in range(S) if s != key[b]]
            torch.testing.assert_close(out[b, :, untouched], v[b, :, untouched])
    assert torch.equal(v, values())  # the captured tensor itself is never modified


def test_redirect_on_uniform_attention_only_renormalises_and_keeps_each_rows_total():
    weights = torch.full((B, H, S, S), 1 / S)
    out = INTERVENTIONS["redirect"](SINK, OTHER)["weights"](weights)
    for b in range(B):
        assert torch.all(out[b, :, :, SINK[b]] == 0)
        rest = [s for s in range(S) if s != SINK[b]]
        torch.testing.assert_close(out[b, :, :, rest], torch.full((H, S, S - 1), 1 / (S - 1)))
    unnormalised = torch.rand(B, H, S, S, generator=torch.Generator().manual_seed(0)) * 3  # ReLU-like rows
    kept = INTERVENTIONS["redirect"](SINK, OTHER)["weights"](unnormalised)
    torch.testing.assert_close(kept.sum(-1), unnormalised.sum(-1))  # each row's total kept
    onto_sink = torch.zeros(B, H, S, S)
    onto_sink[torch.arange(B), :, :, SINK] = 1.0
    assert torch.all(INTERVENTIONS["redirect"](SINK, OTHER)["weights"](onto_sink) == 0)  # nothing else to attend to


def test_random_other_keys_are_task_tokens_and_never_the_sink():
    tokens = torch.tensor([0, 3, 4, 5, 6])  # the task's tokens after 2 registers at 1, 2
    sink = tokens[torch.tensor([0, 2, 4] * 100)]
    other = random_other_keys(sink, tokens, seed=0)
    assert torch.all(other != sink) and torch.isin(other, tokens).all()
    assert len(other.unique()) == len(tokens)  # every key can be drawn (4 per sink, 3 sinks)


@pytest.fixture(scope="module")
def trained(tmp_path_factory, make_config):
    path = tmp_path_factory.mktemp("run")
    run(make_config("attn=softmax", *QUICK, "train.steps=60"), path)
    return load_run(path)


def test_interventions_on_a_trained_run(trained):
    table = run_interventions(trained, layer=0).set_index(["intervention", "query_type"])
    losses = trained.losses[trained.losses["step"] == trained.losses["step"].max()].set_index("split")["loss"]
    for query_type in ("trigger", "non_trigger", "all"):
        assert table.loc[("none", query_type), "loss"] == pytest.approx(losses[f"eval/{query_type}"], rel=1e-5)
        assert table.loc[("none", query_type), "rms_change"] == 0
    assert set(table.index.get_level_values(0)) == {"none", *INTERVENTIONS}
    # all attention on BOS, then BOS's value zeroed: the head writes nothing at any query
    model, batch = trained.model, trained.batch
    onto_bos = {"blocks.0.attn.weights": lambda w: torch.zeros_like(w).index_fill_(-1, torch.tensor([0]), 1.0)}
    zero = {"blocks.0.attn.v": INTERVENTIONS["zero_sink_value"](batch.sink, batch.sink)["v"]}
    with intervene(model, {**onto_bos, **zero}), capture(model, ["blocks.0.attn.mixed"]) as cache:
        model(batch.inputs)
    assert torch.all(cache["blocks.0.attn.mixed"] == 0)


def test_broadcast_payload_transfer(make_config, tmp_path):
    """The payload it reads from a batch is alpha x_{j*} R at every token, and the transfer's cosine
    and common-energy share are a cosine and a share."""
    from sinkexp.analysis.interventions import payload_transfer

    run(make_config("task=broadcast", *QUICK, "train.steps=20"), tmp_path)
    trained = load_run(tmp_path)
    batch, task = trained.batch, trained.task
    hub = batch.inputs[torch.arange(len(batch.sink)), batch.sink]
    for i in (0, 5, 31):
        torch.testing.assert_close(
            batch.targets[:, i] - batch.inputs[:, i], task.cfg.alpha * hub @ task.rotation, atol=1e-5, rtol=1e-5
        )
    transfer = payload_transfer(trained, 1)
    assert -1 <= transfer["cosine"] <= 1 and 0 <= transfer["common_energy"] <= 1


def test_without_bos_drops_position_0_and_keeps_the_runs_own_numbers_with_it(trained):
    from sinkexp.analysis.interventions import drop_first, without_bos

    dropped = drop_first(trained.batch)
    assert dropped.inputs.shape[1] == trained.batch.inputs.shape[1] - 1
    torch.testing.assert_close(dropped.inputs, trained.batch.inputs[:, 1:])
    assert torch.equal(dropped.query_type, trained.batch.query_type[:, 1:])
    values = without_bos(trained)
    losses = trained.losses[trained.losses["step"] == trained.losses["step"].max()].set_index("split")["loss"]
    assert values["loss_bos"] == pytest.approx(losses["eval/all"], rel=1e-5)
    metrics = trained.metrics
    bos = metrics[
        (metrics["step"] == metrics["step"].max())
        & (metrics["metric"] == "sink_attn")
        & (metrics["query_type"] == "all")
        & (metrics["head"] >= 0)
    ]["value"].mean()
    assert values["first_attn_bos"] == pytest.approx(bos, rel=1e-4)  # every query i >= 1 of the task
    assert 0 <= values["first_attn_no_bos"] <= 1


def test_without_bos_compares_an_lms_losses_over_the_same_targets(make_config, tmp_path):
    """task=lm counts BOS's prediction of the first byte; without BOS nothing predicts it, so both
    losses leave it out: the loss with BOS is the mean over positions 1.. of the trained batch."""
    from sinkexp.analysis.interventions import without_bos

    run(make_config("task=lm", "task.seq_len=16", "model.n_layers=1", "train.warmup=0", *QUICK), tmp_path)
    lm = load_run(tmp_path)
    assert lm.batch.loss_mask[:, 0].all()  # BOS's prediction counts in training
    pred = lm.model.eval()(lm.batch.inputs)
    values = without_bos(lm)
    assert values["loss_bos"] == pytest.approx(lm.task.loss(pred, lm.batch)[:, 1:].mean().item(), rel=1e-5)


def test_the_command_prints_the_table_and_refuses_a_missing_layer(trained):
    import subprocess
    import sys

    ok = subprocess.run(
        [sys.executable, "-m", "sinkexp.cli", "intervene", str(trained.path)], capture_output=True, text=True
    )
    assert ok.returncode == 0, ok.stderr
    assert "redirect" in ok.stdout and "BOS removed at inference" in ok.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "sinkexp.cli", "intervene", str(trained.path), "--layer", "3"],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "--layer 3 is not valid" in bad.stderr and "0..0" in bad.stderr


def test_the_command_refuses_an_unfinished_run_unless_asked_and_then_says_which_step(
    make_config, tmp_path, kill_at_step, capsys
):
    from sinkexp.analysis.intervene import main
    from sinkexp.train.loop import Trainer

    kill_at_step(Trainer, 25)  # FAILED at step 24; the last checkpoint is step 20's
    with pytest.raises(KeyboardInterrupt):
        run(make_config("attn=softmax", *QUICK), tmp_path)
    assert main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"sinkexp: error: {tmp_path} has not finished (interrupted: stopped by Ctrl-C at step 24); "
        "finish it with the sinkexp train command that started it, or pass --unfinished to read its last "
        "checkpoint, step 20 of train.steps=30\n"
    )
    assert main([str(tmp_path), "--unfinished"]) == 0
    out = capsys.readouterr().out
    assert (
        out.startswith(
            f"{tmp_path} has not finished (interrupted: stopped by Ctrl-C at step 24): reading "
            "its last checkpoint, step 20 of train.steps=30\n"
        )
        and "redirect" in out
    )


def test_the_help_is_whole_and_defines_each_intervention(tmp_path):
    from sinkexp.analysis.interventions import DEFINITIONS

    result = sinkexp("intervene", "--help", cwd=tmp_path, process=True)
    assert result.returncode == 0 and "in the one forward pass, never a second model." in " ".join(
        result.stdout.split()
    )
    assert all(f"  {name}" in result.stdout and text in result.stdout for name, text in DEFINITIONS.items())


def test_each_intervention_is_defined_once_and_the_docs_table_and_the_legend_read_it(trained, capsys):
    import re
    from pathlib import Path

    from sinkexp.analysis.intervene import print_interventions
    from sinkexp.analysis.interventions import DEFINITIONS

    assert list(DEFINITIONS) == ["none", *INTERVENTIONS]  # every row of the table, in its order
    docs = (Path(__file__).parents[2] / "docs/reproduce.md").read_text()
    section = docs.partition("## Causal interventions")[2].partition("\n## ")[0]
    assert dict(re.findall(r"^\| `(\w+)` \| (.+) \|$", section, re.M)) == DEFINITIONS
    print_interventions(trained, [0], seed=0)
    printed = capsys.readouterr().out
    for name, text in DEFINITIONS.items():
        assert re.search(rf"^  {name} +{re.escape(text)}$", printed, re.M), name
