"""Interventions on a measured language model: the massive-activation replacements on hand-built
tensors; the sink interventions and the first position's removal on a measured export of a trained
sinkexp run, equal to the trained-run interventions on the same sequences (two implementations,
sinkexp's taps and hf/capture.py's, one answer); and the massive ablation on a model whose
massive activation is a fixed BOS entry, where setting it to its mean changes nothing."""

import dataclasses

import pytest
import torch
from conftest import QUICK
from hf_models import tiny
from test_cli import sinkexp

from sinkexp.analysis import lm_interventions as lm
from sinkexp.analysis.interventions import INTERVENTIONS, run_interventions, without_bos
from sinkexp.analysis.load import load_run
from sinkexp.hf.export import export
from sinkexp.jobs.runner import run

pytest.importorskip("transformers")


def test_massive_entries_are_those_100x_their_sequences_median():
    h = torch.ones(2, 3, 4)
    h[0, 0, 1], h[0, 2, 3], h[1, 0, 1] = 100.0, -250.0, 99.0  # the medians stay 1
    assert lm.massive_mask(h).nonzero().tolist() == [[0, 0, 1], [0, 2, 3]]  # 99 x is not massive; |-250| is
    assert not lm.massive_mask(torch.zeros(1, 2, 2)).any()  # a silent stream has none


def test_mean_replacement_uses_the_channels_mean_at_the_first_and_the_later_positions():
    entries = torch.tensor([[0, 0, 1], [1, 0, 1], [0, 2, 1], [1, 3, 0]])
    means = torch.tensor([[0.0, 10.0], [7.0, 20.0]])  # row 0: first position; row 1: later ones
    massive = lm.Massive(entries, torch.zeros(4), means, entries[:0])
    assert lm.mean_values(massive, entries).tolist() == [10.0, 10.0, 20.0, 7.0]
    h = torch.zeros(2, 4, 2)
    out = lm.massive_mean(massive, entries, entries[:0])(h)
    assert out[0, 0, 1] == 10 and out[0, 2, 1] == 20 and out[1, 3, 0] == 7 and out.sum() == 47
    assert h.sum() == 0  # the tensor passed in is never modified
    assert lm.massive_zero(massive, entries, entries[:0])(h + 5)[1, 3, 0] == 0
    assert set(lm.DEFINITIONS) >= set(lm.MASSIVE_INTERVENTIONS)  # every intervention says what it does


@pytest.fixture(scope="module")
def pair(tmp_path_factory, make_config):
    """(a model=llama task=lm run trained 5 steps, loaded; its export measured on 6 x 16 bytes, loaded)."""
    root = tmp_path_factory.mktemp("pair")
    short = ("train.steps=5", "eval.every=5", "train.checkpoint_every=5", "train.warmup=1", "task.seq_len=16")
    run(make_config("task=lm", *QUICK, *short, "eval.batch_size=8"), root / "run")
    export(root / "run", root / "hf")
    result = sinkexp("measure", str(root / "hf"), "n=6", "seq_len=16", f"dir={root / 'm'}", cwd=root)
    assert result.returncode == 0, result.stderr
    measured = load_run(root / "m")
    trained = load_run(root / "run")
    return dataclasses.replace(trained, batch=measured.batch), measured  # the trained model on the measured bytes


def test_sink_interventions_equal_the_trained_runs_on_the_same_sequences(pair):
    trained, measured = pair
    ours = lm.lm_interventions(measured, [0, 2], names=tuple(INTERVENTIONS)).set_index(
        ["layer", "intervention", "query_type"]
    )
    for layer in (0, 2):
        theirs = run_interventions(trained, layer).set_index(["layer", "intervention", "query_type"])
        for key, row in theirs.iterrows():
            assert ours.loc[key, "loss"] == pytest.approx(row["loss"], rel=1e-5), key
            assert ours.loc[key, "rms_change"] == pytest.approx(row["rms_change"], rel=1e-3, abs=1e-6), key
    recorded = measured.losses.set_index("split")["loss"]
    assert ours.loc[(0, "none", "all"), "loss"] == pytest.approx(recorded["eval/all"], rel=1e-6)
    assert (ours.xs("none", level="intervention")[["rms_change", "kl"]] == 0).all().all()
    assert (ours.xs("zero_sink_value", level="intervention")["kl"] > 0).all()


def test_first_position_removed_equals_the_trained_runs_bos_removal(pair):
    trained, measured = pair
    ours, theirs = lm.first_token_removed(measured), without_bos(trained)
    for mine, its in (("first", "bos"), ("no_first", "no_bos")):
        assert ours[f"first_attn_{mine}"] == pytest.approx(theirs[f"first_attn_{its}"], rel=1e-5)
        assert ours[f"loss_{mine}"] == pytest.approx(theirs[f"loss_{its}"], rel=1e-5)


def bos_channel(model):
    """Llama whose BOS embedding (id 256) holds 1e4 in channel 3: a massive entry at position 0 of
    every stream, the same in every sequence (BOS first, causal attention)."""
    model.model.embed_tokens.weight[256, 3] = 1e4


def test_a_fixed_massive_activation_set_to_its_mean_changes_nothing_and_zero_does(tmp_path):
    folder = tiny("llama", tmp_path / "ll", edit=bos_channel)
    result = sinkexp("measure", str(folder), "n=4", "seq_len=16", f"dir={tmp_path / 'm'}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    measured = load_run(tmp_path / "m")
    found = lm.find_massive(measured, [0, 1])
    for layer in (0, 1):
        assert found[layer].entries[:, 1:].unique(dim=0).tolist() == [[0, 3]]  # position 0, channel 3
        assert len(found[layer].entries) == 4 and len(found[layer].control) == 4
        assert not (found[layer].control[:, 1:] == torch.tensor([0, 3])).all(1).any()  # the control is elsewhere
        values = found[layer].values
        assert values.max() - values.min() < 1e-3 * values.abs().max()  # the same entry in every sequence
        assert (
            found[layer].means[0, 3] == pytest.approx(values.mean().item()) and found[layer].means.count_nonzero() == 1
        )
    table = lm.lm_interventions(measured, [0], names=tuple(lm.MASSIVE_INTERVENTIONS), massive=found)
    change = table[table["query_type"] == "all"].set_index("intervention")["rms_change"]
    assert change["massive_mean"] == pytest.approx(0, abs=1e-5) and change["massive_zero"] > 1e-3
    chunked = lm.lm_interventions(measured, [0], names=tuple(lm.MASSIVE_INTERVENTIONS), massive=found, chunk=1)
    torch.testing.assert_close(torch.tensor(chunked["loss"].values), torch.tensor(table["loss"].values))


def test_intervene_prints_a_measured_runs_rows_and_refuses_bad_settings(pair, tmp_path):
    trained, measured = pair
    result = sinkexp("intervene", str(trained.path), "--sequences", "3", cwd=tmp_path)
    assert result.returncode == 2 and "--sequences applies to a sinkexp measure run only" in result.stderr
    result = sinkexp("intervene", str(measured.path), "--layer", "1", "--sequences", "3", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    printed = result.stdout
    assert "3 sequences of 16 tokens" in printed and "first position removed at inference" in printed
    assert all(name in printed for name in ("zero_sink_value", "redirect", "kl"))
    for bad, said in ((("--layer", "9"), "--layer 9 is not valid"), (("--sequences", "7"), "--sequences 7")):
        result = sinkexp("intervene", str(measured.path), *bad, cwd=tmp_path)
        assert result.returncode == 2 and said in result.stderr and len(result.stderr.strip().splitlines()) == 1
