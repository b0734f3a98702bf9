"""reproduce's command step for its experiments (reproduce/sweeps.py, command.decided): each
experiment's overrides written (the user's winning) and read once into its Sweep, at the scale run
and at the CPU sizes the cost estimate times; the words' weights=DIR and the folders decided once."""

from pathlib import Path
from types import SimpleNamespace

from sinkexp.commands.overrides import read_sweep
from sinkexp.reproduce.command import decided
from sinkexp.reproduce.declare import Experiment
from sinkexp.reproduce.sweeps import experiment_overrides


def test_scale_paper_drops_the_cpu_sizes_and_user_overrides_win():
    exp = Experiment(name="e", overrides={"task": "damping"}, grid={"seed": (0, 1, 2)}, cpu={"train.steps": 500})
    cpu = experiment_overrides(exp, Path("out"), decided(["hydra/launcher=basic"]))
    paper = experiment_overrides(exp, Path("out"), decided(["hydra/launcher=basic", "scale=paper"]))
    mine = experiment_overrides(exp, Path("out"), decided(["hydra/launcher=basic", "seed=7"]))
    assert "train.steps=500" in cpu and "train.steps=500" not in paper and "scale=paper" in paper
    assert "seed=0,1,2" in cpu and "seed=0,1,2" not in mine and "seed=7" in mine
    assert "hydra.sweep.dir=out" in cpu


def test_each_experiment_is_read_once_at_its_scale_and_at_the_cpu_sizes(tmp_path):
    sized = Experiment(name="sized", grid={"seed": (0, 1)}, cpu={"train.steps": 500}, reach={"train.steps": 900})
    plain = Experiment(name="plain", grid={"seed": (0, 1)}, cpu={"train.steps": 500})  # no reach size
    paper = SimpleNamespace(name="p", experiments=[sized, plain], claims=[])
    at_reach = decided(["scale=reach", "weights=w2", "seed=4,5"], [paper], docs=tmp_path, root=tmp_path)
    assert (at_reach.weights, at_reach.docs, at_reach.root, at_reach.papers) == (
        Path("w2"),
        tmp_path,
        tmp_path,
        (paper,),
    )
    assert at_reach.lines() == ["scale=reach", "seed=4,5"] and at_reach.pack is False  # on the CPU: no packing
    assert list(at_reach.sweeps) == list(at_reach.sweeps_at_cpu) == [("p", "sized")]  # reach trains the sized one
    expected = experiment_overrides(sized, tmp_path / "p" / "sized", at_reach)
    assert at_reach.sweeps["p", "sized"] == read_sweep(expected, multirun=True)
    assert "train.steps=900" in expected and at_reach.sweeps["p", "sized"].size == 2  # the user's two seeds
    cpu = at_reach.sweeps_at_cpu["p", "sized"]
    assert "train.steps=500" in cpu.overrides and "scale=reach" not in cpu.overrides
    assert at_reach.at_cpu().sweeps == at_reach.sweeps_at_cpu and at_reach.at_cpu().scale == "cpu"
    at_cpu = decided([], [paper], root=tmp_path, pack=True)
    assert list(at_cpu.sweeps) == [("p", "sized"), ("p", "plain")] and at_cpu.sweeps_at_cpu is None
    assert at_cpu.at_cpu().sweeps == at_cpu.sweeps and at_cpu.pack
    assert "pack={seed:[0,1]}" in at_cpu.sweeps["p", "plain"].overrides
