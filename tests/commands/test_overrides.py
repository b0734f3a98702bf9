"""The command layer's reading of overrides (commands/overrides.py) into the Sweep jobs/plan.py
composes (config/sweep.py): split as plan() needs it, its jobs in the order of Hydra's basic
sweeper, a config's sweeper params first."""

import pytest

from sinkexp.commands.overrides import read_sweep
from sinkexp.config.compose import expand, params_choices
from sinkexp.errors import ConfigError


def test_the_overrides_are_read_once_into_what_plan_composes():
    given = [
        "experiment=trigger_grid",
        "train.steps=1e3",
        "attn=softmax,relu",
        "hydra.sweep.dir=x",
        "hydra/launcher=basic",
    ]
    sweep = read_sweep(given, multirun=True)
    assert sweep.overrides == ("+experiment=trigger_grid", "train.steps=1000", *given[2:])
    assert sweep.master == ("+experiment=trigger_grid", "train.steps=1000", "hydra.sweep.dir=x", "hydra/launcher=basic")
    assert sweep.own == ("+experiment=trigger_grid", "train.steps=1000", "attn=softmax,relu")
    assert sweep.choices == (
        ("+experiment", ("+experiment=trigger_grid",)),
        ("train.steps", ("train.steps=1000",)),
        ("attn", ("attn=softmax", "attn=relu")),
    )
    assert sweep.hydra == ("hydra.sweep.dir=x", "hydra/launcher=basic") and sweep.size == 2
    assert sweep.hydra_keys == sweep.master_hydra_keys == ("hydra.sweep.dir",)  # hydra/launcher is a group
    assert read_sweep(["pack={seed:[3,4]}"], multirun=False).overrides == ("pack={seed:[3,4]}", "seed=3")


def test_a_configs_sweeper_params_come_first_and_the_command_lines_values_win_in_their_place():
    params = {"attn": "softmax,relu,sigmoid", "seed": "0,1"}
    sweep = read_sweep(["train.steps=2e3,3e3", "attn=relu,softmax"], multirun=True)
    jobs = sweep.jobs(params_choices(params))
    assert jobs == expand(list(sweep.own), True, params)  # measure's expansion is the same
    assert len(jobs) == 2 * 2 * 2 and sweep.size == 4
    assert jobs[:2] == [["attn=relu", "seed=0", "train.steps=2000"], ["attn=relu", "seed=0", "train.steps=3000"]]


def test_a_sweep_without_multirun_is_refused_in_one_line():
    with pytest.raises(ConfigError, match=r"^seed=0,1: a sweep needs -m \(sinkexp train -m \.\.\.\)$"):
        read_sweep(["task=trigger", "seed=0,1"], multirun=False)
    assert read_sweep(["task=trigger", "seed=1"], multirun=False).jobs() == [["task=trigger", "seed=1"]]
