"""Barbero et al.'s perturbation on a trained run (analysis/perturbation.py): the same change with BOS
and with BOS removed, read at every block's output, and a causal model leaves every representation
before the changed token as it was."""

import math

import pytest
import torch
from conftest import QUICK

from sinkexp.analysis.load import load_run
from sinkexp.analysis.perturbation import perturbation, representations
from sinkexp.evaluate.perturbation import perturbed_position, swap_token
from sinkexp.jobs.runner import run


@pytest.fixture(scope="module")
def trained(tmp_path_factory, make_config):
    path = tmp_path_factory.mktemp("run")
    run(make_config("attn=softmax", *QUICK, "train.steps=60", "model.n_layers=2"), path)
    return load_run(path)


def test_positions_before_the_change_do_not_move_and_later_ones_do(trained):
    inputs = trained.batch.inputs
    at = perturbed_position(inputs.shape[1])
    with torch.no_grad():
        clean, changed = representations(trained.model, inputs), representations(trained.model, swap_token(inputs, at))
    assert len(clean) == 2 and clean[0].shape[:2] == inputs.shape[:2]
    for before, after in zip(clean, changed):
        assert torch.equal(before[:, :at], after[:, :at]) and not torch.equal(before[:, at + 1 :], after[:, at + 1 :])


def test_both_settings_per_layer(trained):
    values = perturbation(trained)
    assert sorted(values) == sorted(
        f"{k}_{s}_{layer}" for k in ("change", "reach") for s in ("bos", "no_bos") for layer in (0, 1)
    )
    assert all(math.isfinite(value) and value > 0 for value in values.values())


def test_the_claims_measure_is_the_ratio_of_the_layer_means_without_and_with_bos(trained):
    import pandas as pd

    from sinkexp.reproduce.finished import FinishedRun
    from sinkexp.reproduce.measures import perturbation_spread

    values = perturbation(trained)
    expected = (values["change_no_bos_0"] + values["change_no_bos_1"]) / (
        values["change_bos_0"] + values["change_bos_1"]
    )
    finished = FinishedRun(trained.path, {"seed": 0}, pd.DataFrame())
    assert perturbation_spread().of(finished) == pytest.approx(expected)
    untrained = perturbation(load_run(trained.path, step=0))  # what "could it fail?" reads
    assert perturbation_spread().of(finished.initial) == pytest.approx(
        (untrained["change_no_bos_0"] + untrained["change_no_bos_1"])
        / (untrained["change_bos_0"] + untrained["change_bos_1"])
    )


def test_on_a_measured_lm_the_spread_is_read_off_its_hidden_states(tmp_path):
    """On a measured tiny Llama: measured_perturbation's per-layer values are evaluate/perturbation.py's
    spread of the decoder's own hidden states (output_hidden_states), with its first position and without."""
    pytest.importorskip("transformers")
    from hf_models import tiny

    from sinkexp.analysis.perturbation import measured_perturbation
    from sinkexp.evaluate.perturbation import spread
    from sinkexp.hf.runner import measure_checkpoint

    run = load_run(measure_checkpoint(str(tiny("llama", tmp_path / "tiny")), tmp_path / "run", n=4, seq_len=12))
    values = measured_perturbation(run)
    at = perturbed_position(run.inputs.shape[1])
    for name, inputs, position in (("bos", run.inputs, at), ("no_bos", run.inputs[:, 1:], at - 1)):
        with torch.no_grad():
            clean, changed = (
                run.model.base_model(input_ids=x, output_hidden_states=True).hidden_states[1:]
                for x in (inputs, swap_token(inputs, position))
            )
        layers = len(clean)
        for layer in range(layers - 1):  # the last hidden state is after the final norm: not a block's output
            change, reach = spread(clean[layer], changed[layer], position)
            assert values[f"change_{name}_{layer}"] == pytest.approx(change, rel=1e-4)
            assert values[f"reach_{name}_{layer}"] == pytest.approx(reach, rel=1e-4)
        assert f"change_{name}_{layers - 1}" in values and f"change_{name}_{layers}" not in values
