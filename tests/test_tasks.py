"""Task samplers: determinism per seed, and targets equal to a direct computation."""
import pytest
import torch

from sinkexp.errors import ConfigError
from sinkexp.tasks import TASKS
from sinkexp.tasks.trigger import NON_TRIGGER, TRIGGER, TriggerConfig, TriggerTask


def sample(task, seed, batch_size=64):
    return task.sample(batch_size, torch.Generator().manual_seed(seed), "cpu")


@pytest.mark.parametrize("mode", ["single", "bernoulli"])
def test_trigger_same_seed_same_batch(mode):
    task = TriggerTask(TriggerConfig(mode=mode, p_trigger=0.3))
    a, b, c = sample(task, 0), sample(task, 0), sample(task, 1)
    for field in ("inputs", "targets", "loss_mask", "query_type", "sink"):
        assert torch.equal(getattr(a, field), getattr(b, field))
    assert not torch.equal(a.inputs, c.inputs)


@pytest.mark.parametrize("mode", ["single", "bernoulli"])
def test_trigger_targets_match_a_direct_loop(mode):
    cfg = TriggerConfig(seq_len=12, d_x=3, mode=mode, p_trigger=0.4)
    batch = sample(TriggerTask(cfg), 3, batch_size=32)
    for b in range(32):
        seen = []
        for i in range(cfg.seq_len):
            z, is_bos, is_trigger = batch.inputs[b, i, :3], batch.inputs[b, i, 3], batch.inputs[b, i, 4]
            if i == 0:
                assert is_bos == 1 and is_trigger == 0 and batch.query_type[b, i] == -1
                assert not batch.loss_mask[b, i]
                continue
            assert is_bos == 0 and batch.loss_mask[b, i]
            if is_trigger:
                assert i >= 2 and torch.all(z == 0) and batch.query_type[b, i] == TRIGGER
                expected = torch.stack(seen).mean(0) if seen else torch.zeros(3)
                torch.testing.assert_close(batch.targets[b, i], expected)
            else:
                assert batch.query_type[b, i] == NON_TRIGGER
                assert torch.all(batch.targets[b, i] == 0)
                seen.append(z)
    assert torch.all(batch.sink == 0)


def test_trigger_single_mode_has_at_most_one_trigger_at_rate_p():
    batch = sample(TriggerTask(TriggerConfig(p_trigger=0.5)), 0, batch_size=4000)
    per_sequence = (batch.query_type == TRIGGER).sum(1)
    assert per_sequence.max() == 1
    assert abs(per_sequence.float().mean().item() - 0.5) < 0.03


def test_trigger_baseline_is_the_zero_predictor():
    task = TriggerTask(TriggerConfig())
    batch = sample(task, 0)
    torch.testing.assert_close(task.baseline_loss(batch), task.loss(torch.zeros_like(batch.targets), batch))
    assert task.baseline_loss(batch)[batch.query_type == NON_TRIGGER].abs().max() == 0


@pytest.mark.parametrize("field,value", [("seq_len", 2), ("p_trigger", 1.5), ("p_trigger", -0.1),
                                         ("d_x", 0), ("mode", "sometimes")])
def test_trigger_refuses_impossible_settings(field, value):
    with pytest.raises(ConfigError, match=f"task.{field}"):
        TriggerTask.validate(TriggerConfig(**{field: value}))


def test_registry_names_match_config_names():
    for name, task in TASKS.items():
        assert task.Config().name == name
