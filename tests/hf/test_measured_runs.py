"""Measured runs beside trained ones (issue: measured runs are runs): `sinkexp report` sums a sweep
over measure's `n`, labels trained and measured runs by the settings each has, load_run and
intervene read a measured run, while export refuses it in one line that says what it is."""

import shutil

import pandas as pd
import pytest
from conftest import QUICK
from hf_models import tiny
from test_cli import sinkexp

from sinkexp.analysis.load import load_run
from sinkexp.analysis.measured import MeasuredRun
from sinkexp.jobs.runner import run
from sinkexp.rundir.files import CONFIG

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """A measure sweep over n=8,16 of one tiny GPT-2: (its folder, one of its run directories, its output)."""
    root = tmp_path_factory.mktemp("measured")
    folder = tiny("gpt2", root / "g2")
    result = sinkexp("measure", "-m", f"model={folder}", "n=8,16", "seq_len=32", "name=nsweep", cwd=root)
    assert result.returncode == 0, result.stderr
    sweep = root / "outputs/sweeps/nsweep"
    return sweep, next(p.parent for p in sweep.rglob(CONFIG)), result.stdout


def test_a_measure_sweep_over_n_is_summarised(measured, tmp_path):
    sweep, _, _ = measured
    result = sinkexp("report", str(sweep), "--out", str(tmp_path / "r"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    summary = pd.read_csv(tmp_path / "r" / "summary.csv")
    assert list(summary.columns[:2]) == ["n_setting", "layer"] and list(summary.columns[-3:]) == ["mean", "std", "n"]
    assert sorted(summary["n_setting"].unique()) == [8, 16] and set(summary["n"]) == {1}


def test_trained_and_measured_runs_are_labelled_by_the_settings_each_has(measured, tmp_path, make_config):
    sweep, _, _ = measured
    shutil.copytree(sweep / "measure", tmp_path / "both" / "measure")
    run(make_config(*QUICK), tmp_path / "both" / "trained")
    result = sinkexp("report", str(tmp_path / "both"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    labels = set(pd.read_csv(tmp_path / "both" / "report" / "finals.csv")["label"])
    assert labels == {"command=measure, n=8", "command=measure, n=16", "command=train"}  # the trained run has no n
    assert not [p.name for p in (tmp_path / "both" / "report").glob("*nan*")]


def test_load_run_and_intervene_read_a_measured_run_and_export_refuses_it_in_one_line(measured, tmp_path):
    _, run_dir, _ = measured
    assert isinstance(load_run(run_dir), MeasuredRun)  # its model and inputs: tests/analysis/test_measured.py
    result = sinkexp("intervene", str(run_dir), "--layer", "0", cwd=tmp_path)
    assert result.returncode == 0 and "zero_sink_value" in result.stdout, result.stderr
    result = sinkexp("export", str(run_dir), str(tmp_path / "out"), cwd=tmp_path)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "is a `sinkexp measure` run of" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


def test_a_checkpoint_of_unknown_step_says_so(measured):
    *_, printed = measured
    assert "loss at an unknown training step on the measured text" in printed and "step -1" not in printed


def test_a_measure_at_random_initialisation_says_so_and_loads_back_as_measured(tmp_path):
    """init=0 (the untrained value of a claim on a pre-trained checkpoint): its own config hash and
    folder beside the trained measurement, every table and meta.json saying no weights were read,
    and load_run rebuilding the same initialised model."""
    import json

    import torch

    from sinkexp.hf.measure import initialised

    folder = tiny("gpt2", tmp_path / "g2")
    result = sinkexp("measure", str(folder), "init=0", "skip=64", "n=4", "seq_len=16", "dir=i", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("weights: none trained: the architecture at random initialisation")
    assert "model: sink rate over all heads" in result.stdout and "[random initialisation, seed 0]" in result.stdout
    meta = json.loads((tmp_path / "i" / "meta.json").read_text())
    assert meta["model"]["weights"] == {"init": "transformers from_config, torch.manual_seed(0)"}
    run = load_run(tmp_path / "i")
    expected = initialised(folder, "float32", torch.device("cpu"), 0).state_dict()
    assert all(torch.equal(value, expected[name]) for name, value in run.model.state_dict().items())
    assert (run.cfg.init, run.cfg.skip) == (0, 64)
