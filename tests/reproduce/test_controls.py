"""The four-head controls' model options: no W_O (model.attn_out=identity: each head writes its
own slice of the stream) and a readout fixed at its initialisation (model.freeze_readout)."""

import pytest
import torch

from sinkexp.errors import ConfigError
from sinkexp.jobs.runner import make_trainer
from sinkexp.model import Transformer
from sinkexp.tasks import TASKS


def test_without_w_o_each_head_writes_its_own_slice(make_config):
    cfg = make_config("model.n_heads=4", "model.attn_out=identity")
    task = TASKS["trigger"](cfg.task)
    model = Transformer(cfg.model, cfg.attn, task)
    attn = model.blocks[0].attn
    assert isinstance(attn.out, torch.nn.Identity)
    assert torch.equal(attn.projections()[2], torch.eye(cfg.model.d_model))  # W_O, as the metrics read it
    x = torch.randn(2, task.seq_len, cfg.model.d_model)
    visible = torch.ones(task.seq_len, task.seq_len, dtype=torch.bool).tril()
    from sinkexp.model import capture

    with capture(model, ["blocks.0.attn.mixed", "blocks.0.attn.output"]) as cache:
        attn(x, visible)
    mixed = cache["blocks.0.attn.mixed"]  # (B, H, T, D)
    assert torch.allclose(cache["blocks.0.attn.output"], mixed.transpose(1, 2).reshape(2, task.seq_len, -1))


def test_a_frozen_readout_keeps_its_initial_weights_while_the_rest_trains(make_config):
    cfg = make_config("model.n_heads=4", "model.freeze_readout=true", "train.weight_decay=0.1")
    (_,), trainer = make_trainer([cfg], torch.device("cpu"))
    readout, attention = trainer.model.readout.weight.clone(), trainer.model.blocks[0].attn.qkv.weight.clone()
    for _ in range(3):
        trainer.train_step()
    assert torch.equal(trainer.model.readout.weight, readout)  # no gradient, no update, no decay
    assert not torch.equal(trainer.model.blocks[0].attn.qkv.weight, attention)


def test_a_frozen_readout_is_refused_where_it_cannot_hold(make_config):
    from sinkexp.config.validate import validate

    with pytest.raises(ConfigError, match="model.freeze_readout=true needs"):
        validate(make_config("model.freeze_readout=true", "train.replicas=2"))
