"""Task samplers: determinism per seed, and targets equal to a direct computation."""

import pytest
import torch
from helpers import sample

from sinkexp.errors import ConfigError
from sinkexp.tasks import TASKS
from sinkexp.tasks.broadcast import BroadcastConfig, BroadcastTask  # noqa: E402
from sinkexp.tasks.damping import ACTIVE, NOP, DampingConfig, DampingTask  # noqa: E402
from sinkexp.tasks.trigger import NON_TRIGGER, TRIGGER, TriggerConfig, TriggerTask


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


@pytest.mark.parametrize(
    "field,value", [("seq_len", 2), ("p_trigger", 1.5), ("p_trigger", -0.1), ("d_x", 0), ("mode", "sometimes")]
)
def test_trigger_refuses_impossible_settings(field, value):
    with pytest.raises(ConfigError, match=f"task.{field}"):
        TriggerTask.validate(TriggerConfig(**{field: value}))


def test_registry_names_match_config_names():
    for name, task in TASKS.items():
        assert task.Config().name == name


@pytest.mark.parametrize("name", sorted(TASKS))
def test_every_task_is_deterministic_per_seed(name):
    task = TASKS[name](TASKS[name].Config())
    a, b, c = sample(task, 0, 16), sample(task, 0, 16), sample(task, 1, 16)
    for field in ("inputs", "targets", "loss_mask", "query_type", "sink"):
        assert torch.equal(getattr(a, field), getattr(b, field)), field
    assert not torch.equal(a.inputs, c.inputs)


@pytest.mark.parametrize("gamma,p", [(0.0, 0.5), (0.1, 0.3), (1.0, 0.9)])
def test_damping_targets_match_the_gate(gamma, p):
    task = DampingTask(DampingConfig(gamma=gamma, p=p))
    batch = sample(task, 0, batch_size=512)
    x = batch.inputs
    assert torch.all(x[:, 0] == 0)
    damped = (x @ task.gate) > task.threshold
    damped[:, 0] = False
    assert torch.equal(batch.targets, torch.where(damped[..., None], gamma * x, x))  # the whole batch, exactly
    for b, i in [(0, 1), (3, 7), (100, 31)]:
        expected = gamma * x[b, i] if damped[b, i] else x[b, i]
        torch.testing.assert_close(batch.targets[b, i], expected)
        assert batch.query_type[b, i] == (ACTIVE if damped[b, i] else NOP)
    assert abs((batch.query_type == ACTIVE).float()[:, 1:].mean().item() - p) < 0.02  # lambda = Phi^-1(1-p)
    assert torch.isclose(task.gate.norm(), torch.tensor(1.0))


def test_damping_dynamics_form_counts_token_0_as_a_token():
    """task.form=dynamics (the source's dynamics notebook): token 0 is an ordinary N(0, I) token with a
    query type and a place in the loss; the targets follow the same gate everywhere."""
    task = DampingTask(DampingConfig(form="dynamics", gamma=0.1))
    batch = sample(task, 0, batch_size=512)
    x = batch.inputs
    assert x[:, 0].std().item() == pytest.approx(1.0, rel=0.05)
    damped = (x @ task.gate) > task.threshold
    assert torch.equal(batch.targets, torch.where(damped[..., None], 0.1 * x, x))
    assert torch.equal(batch.query_type, damped.long()) and batch.loss_mask.all()
    assert torch.equal(batch.sink, torch.zeros(512, dtype=torch.long))


def test_broadcast_targets_carry_the_rotated_hub():
    task = BroadcastTask(BroadcastConfig(alpha=0.5))
    batch = sample(task, 0, batch_size=8)
    R = task.rotation
    torch.testing.assert_close(R @ R.T, torch.eye(64), atol=1e-5, rtol=0)
    for b in range(8):
        hub = int(torch.argmax(batch.inputs[b] @ task.hub_direction))
        assert batch.sink[b] == hub
        torch.testing.assert_close(batch.targets[b], batch.inputs[b] + 0.5 * batch.inputs[b, hub] @ R)


@pytest.mark.parametrize(
    "Task,Config,attr", [(DampingTask, DampingConfig, "gate"), (BroadcastTask, BroadcastConfig, "hub_direction")]
)
def test_the_deciding_direction_is_visible_through_layernorm(Task, Config, attr):
    """A LayerNorm removes each token's channel mean, so <x, u> must not depend on it: for a centred
    u, adding any constant to every channel of x leaves <x, u> unchanged, on every structure seed."""
    x = torch.randn(16, 64, generator=torch.Generator().manual_seed(0))
    shift = torch.randn(16, 1, generator=torch.Generator().manual_seed(1)) * 10
    for structure_seed in range(5):
        u = getattr(Task(Config(structure_seed=structure_seed)), attr)
        assert torch.isclose(u.norm(), torch.tensor(1.0))
        assert abs(u.sum().item()) < 1e-5
        torch.testing.assert_close((x + shift) @ u, x @ u, atol=1e-4, rtol=0)
        raw = getattr(Task(Config(structure_seed=structure_seed, centred=False)), attr)
        assert abs(raw.sum().item()) > 1e-3  # the first release's draw kept a visible-to-nobody part
        assert torch.allclose(u, (raw - raw.mean()) / (raw - raw.mean()).norm(), atol=1e-6)
