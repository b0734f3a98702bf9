"""Errors that guide (sinkexp/errors.py and its callers): a misspelt name is answered with the
closest valid one, a key given twice is refused, a sweep's bad job is named, and the valid keys
are never an empty list."""

import signal

import pytest
from helpers import sinkexp

from sinkexp.commands.overrides import read_sweep
from sinkexp.errors import ConfigError, choices_error, closest, refuse
from sinkexp.jobs.plan import plan
from sinkexp.machine import preemption


def test_the_closest_choice_is_offered_only_when_it_is_close():
    assert closest("sofmax", ["relu", "softmax", "sigmoid"]) == " (did you mean softmax?)"
    assert closest("tanh", ["relu", "softmax", "sigmoid"]) == ""
    assert str(choices_error("attn", "sofmax", ["relu", "softmax"])) == (
        "attn='sofmax' is not valid (did you mean softmax?); choose one of: relu, softmax"
    )


def test_a_refusal_is_one_line_on_stderr_and_its_exit_code(capsys):
    assert refuse(ConfigError("n is given twice")) == 2 and refuse("no run finished", 1) == 1
    out, err = capsys.readouterr()
    assert out == "" and err == "sinkexp: error: n is given twice\nsinkexp: error: no run finished\n"


def test_a_refusal_after_a_stopping_signal_is_that_stop(monkeypatch, capsys):
    """CI saw Ctrl-C during plan() lose its exception and Hydra fail later on the state it cut short:
    the refusal of that failure must not be a second line beside the stop's."""
    monkeypatch.setattr(preemption, "_stopping", signal.SIGINT)
    with pytest.raises(preemption.Interrupted) as stop:
        refuse(ConfigError("defaults: 'NoneType' object has no attribute '_invalidate_flags_cache'"))
    assert stop.value.signum == signal.SIGINT and capsys.readouterr().err == ""


@pytest.mark.parametrize(
    "override, says",
    [
        ("trian.steps=200", "trian.steps: unknown key (did you mean train.steps?); valid keys at the top level: attn,"),
        ("train.stpes=200", "train.stpes: unknown key (did you mean train.steps?); valid keys under 'train': batch"),
        ("model.nlayers=2", "model.nlayers: unknown key (did you mean model.n_layers?); valid keys under 'model'"),
        ("sed=1", "sed: unknown key (did you mean seed?); valid keys at the top level: attn,"),
        ("task.p_trigr=0.3", "task.p_trigr: unknown key (did you mean task.p_trigger?); valid keys under 'task'"),
        ("model.norm=sandwhich", "model.norm='sandwhich' is not valid (did you mean sandwich?); choose one of:"),
        ("zzz=1", "zzz: unknown key; valid keys at the top level: attn,"),
    ],
)
def test_an_unknown_key_or_choice_names_the_closest_valid_one(override, says):
    with pytest.raises(ConfigError) as err:
        plan(read_sweep([override], multirun=False))
    assert str(err.value).startswith(says) and "\n" not in str(err.value)


def test_a_sweeps_bad_job_is_named_by_its_values():
    with pytest.raises(ConfigError) as err:
        plan(read_sweep(["task=trigger,damping", "task.p_trigger=0.3"], multirun=True))
    said = str(err.value)
    assert said.startswith("task.p_trigger: unknown key; valid keys under 'task': centred,")
    assert said.endswith("(the job task=damping task.p_trigger=0.3)")


def test_a_key_given_twice_is_refused_before_anything_runs(tmp_path):
    result = sinkexp("train", "train.lr=1e-2", "train.steps=5", "train.lr=1e-3", cwd=tmp_path)
    assert result.returncode == 2 and list(tmp_path.iterdir()) == []
    assert result.stderr.strip() == (
        "sinkexp: error: train.lr is given twice (train.lr=1e-2 and train.lr=1e-3); give it once"
    )


@pytest.mark.parametrize(
    "overrides, key",
    [
        (["hydra.run.dir=${oops}"], "hydra.run.dir"),
        (["-m", "hydra.sweep.dir=${oc.env:SINKEXP_NOT_SET}", "seed=0,1"], "hydra.sweep.dir"),
        (["hydra.job.name=${oops}"], "hydra.job.name"),
    ],
)
def test_an_interpolation_in_a_hydra_key_that_does_not_resolve_is_one_line_naming_it(tmp_path, overrides, key):
    result = sinkexp("train", *overrides, "train.steps=5", cwd=tmp_path)
    (line,) = result.stderr.strip().splitlines()
    assert result.returncode == 2 and line.startswith(f"sinkexp: error: {key}: ") and "${...}" in line, line
    assert list(tmp_path.iterdir()) == []
