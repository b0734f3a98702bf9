"""load_run: a run directory back as config, task, model, held-out batch and tables."""

import pytest
import torch
from conftest import QUICK

from sinkexp import load_run
from sinkexp.evaluate.evaluator import loss_rows
from sinkexp.jobs.runner import run
from sinkexp.rundir.lifecycle import RunDirError


@pytest.fixture(scope="module")
def finished(tmp_path_factory, make_config):
    path = tmp_path_factory.mktemp("run")
    run(make_config(*QUICK, "model.n_heads=2", "train.keep_checkpoints=true"), path)
    return path


@pytest.mark.parametrize("step", [None, 0, 10, 20])
def test_the_loaded_model_reproduces_the_recorded_evaluation(finished, step):
    """Step 0 has no checkpoint: the untrained model is rebuilt from the seed, as training initialised
    it (what every step-0 measure of reproduce reads), and gives the run's recorded step-0 losses."""
    loaded = load_run(finished, step=step)
    assert loaded.step == (30 if step is None else step) and not loaded.model.training
    pred, cache = loaded.forward(["blocks.0.attn.weights"])
    assert cache["blocks.0.attn.weights"].shape == (32, 2, 32, 32)
    recorded = loaded.losses[(loaded.losses["step"] == loaded.step) & loaded.losses["split"].str.contains("/")]
    again = {split: loss for _, split, loss in loss_rows(loaded.task, pred, loaded.batch, loaded.step)}
    assert again == pytest.approx(dict(zip(recorded["split"], recorded["loss"])), rel=1e-6)
    assert loaded.kept_steps() == [10, 20, 30]
    assert loaded.summary["step"] == 30 and loaded.cfg.model.n_heads == 2


def test_a_step_without_a_kept_checkpoint_is_refused_with_the_steps_there_are(finished):
    with pytest.raises(RunDirError, match="step_000010"):
        load_run(finished, step=15)
    with pytest.raises(FileNotFoundError, match="not a run directory"):
        load_run(finished / "checkpoints")


def test_loading_is_safe_and_exact_on_the_weights(finished):
    state = torch.load(finished / "checkpoint.pt", weights_only=True)
    loaded = load_run(finished)
    for name, tensor in loaded.model.state_dict().items():
        torch.testing.assert_close(tensor, state["trainer"]["model"][name], rtol=0, atol=0)
