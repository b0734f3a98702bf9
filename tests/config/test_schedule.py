"""The learning-rate schedule (sinkexp/config/schedule.py): closed forms, and the rate the optimiser takes."""

import math

import pytest
import torch

from sinkexp.config.schedule import Checkpoints, log_steps, lr_factor
from sinkexp.errors import ConfigError


def test_warmup_and_cosine_closed_forms():
    assert [lr_factor(s, 100, 4, "constant") for s in range(6)] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
    assert lr_factor(0, 100, 0, "constant") == 1.0
    assert lr_factor(10, 110, 10, "cosine") == pytest.approx(1.0)  # the first step after the warm-up
    assert lr_factor(60, 110, 10, "cosine") == pytest.approx(0.5)  # half way: (1 + cos(pi / 2)) / 2
    assert lr_factor(110, 110, 10, "cosine") == pytest.approx(0.0, abs=1e-12)
    assert lr_factor(35, 110, 10, "cosine") == pytest.approx(0.5 * (1 + math.cos(math.pi / 4)))


def test_the_optimiser_takes_the_scheduled_rate_each_step(make_config):
    from sinkexp.jobs.runner import make_trainer

    cfg = make_config(
        "train.steps=6", "train.warmup=3", "train.schedule=cosine", "train.lr=0.01", "train.log_every=1", "device=cpu"
    )
    _, trainer = make_trainer([cfg], torch.device("cpu"))
    taken = []
    original = trainer.train_step

    def step():
        taken.append(trainer.optimizer.param_groups[0]["lr"])
        return original()

    trainer.train_step = step
    trainer.fit(eval_every=100, on_eval=lambda s: None, on_log=lambda s, l: None, on_checkpoint=lambda s: None)
    assert taken == pytest.approx([0.01 * lr_factor(s, 6, 3, "cosine") for s in range(6)])
    assert taken[:3] == pytest.approx([0.01 / 3, 0.02 / 3, 0.01])


def test_a_schedule_is_a_new_run_and_the_default_keeps_earlier_names(make_config):
    from sinkexp.config.identity import config_hash

    base = config_hash(make_config())
    assert config_hash(make_config("train.warmup=0", "train.schedule=constant")) == base
    assert config_hash(make_config("train.warmup=10")) != base != config_hash(make_config("train.schedule=cosine"))


def test_log_checkpoints_are_dense_where_sinks_form():
    assert log_steps(500) == [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384]  # 17 before 500
    every = Checkpoints(500, 1200, "log")
    assert [s for s in range(1, 1201) if s in every] == [*log_steps(500), 500, 1000, 1200]
    assert [every.after(s) for s in (0, 1, 5, 384, 500, 1000)] == [1, 2, 6, 500, 1000, 1200]
    listed = Checkpoints(500, 1200, [7, 600, 5000])  # 5000 lies past the run: ignored
    assert [s for s in range(1, 1201) if s in listed] == [7, 500, 600, 1000, 1200]


@pytest.mark.parametrize("value", ["often", "[0,5]", "[1.5]"])
def test_a_bad_checkpoint_schedule_names_the_key(make_config, value):
    with pytest.raises(ConfigError, match=r"^train.checkpoint_steps=.* choose null, log, or a list of steps >= 1"):
        make_config(f"train.checkpoint_steps={value}")


def test_a_run_keeps_and_evaluates_its_log_checkpoints(make_config, tmp_path):
    """train.checkpoint_steps=log with keep_checkpoints and eval.at_checkpoints: every checkpoint is
    kept, evaluated, and opens with load_run(step=N)."""
    import pandas as pd
    from conftest import QUICK

    from sinkexp import load_run
    from sinkexp.jobs.runner import run

    run(
        make_config(*QUICK, "train.checkpoint_steps=log", "train.keep_checkpoints=true", "eval.at_checkpoints=true"),
        tmp_path,
    )  # 30 steps, checkpoint_every 10, eval every 10
    steps = [1, 2, 3, 4, 6, 8, 10, 20, 30]
    assert load_run(tmp_path).kept_steps() == steps
    assert sorted(pd.read_csv(tmp_path / "metrics.csv")["step"].unique()) == [0, *steps]
    for step in (1, 6):
        assert load_run(tmp_path, step=step).step == step
