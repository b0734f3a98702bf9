"""The learning-rate schedule (sinkexp/schedule.py): closed forms, and the rate the optimiser takes."""
import math

import pytest
import torch

from sinkexp.schedule import lr_factor


def test_warmup_and_cosine_closed_forms():
    assert [lr_factor(s, 100, 4, "constant") for s in range(6)] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
    assert lr_factor(0, 100, 0, "constant") == 1.0
    assert lr_factor(10, 110, 10, "cosine") == pytest.approx(1.0)             # the first step after the warm-up
    assert lr_factor(60, 110, 10, "cosine") == pytest.approx(0.5)             # half way: (1 + cos(pi / 2)) / 2
    assert lr_factor(110, 110, 10, "cosine") == pytest.approx(0.0, abs=1e-12)
    assert lr_factor(35, 110, 10, "cosine") == pytest.approx(0.5 * (1 + math.cos(math.pi / 4)))


def test_the_optimiser_takes_the_scheduled_rate_each_step(make_config):
    from sinkexp.runner import make_trainer

    cfg = make_config("train.steps=6", "train.warmup=3", "train.schedule=cosine", "train.lr=0.01",
                      "train.log_every=1", "device=cpu")
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
    from sinkexp.rundir import config_hash

    base = config_hash(make_config())
    assert config_hash(make_config("train.warmup=0", "train.schedule=constant")) == base
    assert config_hash(make_config("train.warmup=10")) != base != config_hash(make_config("train.schedule=cosine"))
