"""Training penalties: closed-form values on hand-built attention, and a training step that
minimises the task loss plus lambda x penalty (gradients through the step's own forward pass)."""

import pytest
import torch

from sinkexp.evaluate import penalties as evaluate_penalties
from sinkexp.evaluate.metrics.head_writes import common_mode_fraction
from sinkexp.jobs.runner import make_trainer
from sinkexp.model import capture
from sinkexp.train.loop import batch_loss


def test_bos_attention_on_uniform_causal_attention():
    """Query i sees i + 1 keys: uniform attention puts 1 / (i + 1) on BOS; BOS's own row is left out."""
    T = 5
    weights = torch.ones(T, T).tril()
    weights = (weights / weights.sum(-1, keepdim=True)).expand(2, 3, T, T)  # (B, H, T, T)
    expected = sum(1 / (i + 1) for i in range(1, T)) / (T - 1)
    assert evaluate_penalties.bos_attention([weights, weights]).item() == pytest.approx(expected)
    all_on_bos = torch.zeros(1, 1, T, T)
    all_on_bos[..., 0] = 1.0
    assert evaluate_penalties.bos_attention([all_on_bos, weights]).item() == pytest.approx(
        (1 + expected) / 2
    )  # mean over layers


def test_common_mode_fraction_closed_forms():
    broadcast = torch.randn(2, 1, 4).expand(2, 6, 4)  # every token receives its sequence's vector
    assert common_mode_fraction(broadcast).item() == pytest.approx(1.0)
    opposite = torch.randn(2, 1, 4) * torch.tensor([1.0, -1.0]).repeat(3).view(1, 6, 1)  # pairs cancel
    assert common_mode_fraction(opposite).item() == pytest.approx(0.0, abs=1e-7)
    one_token = torch.zeros(1, 4, 3)
    one_token[0, 0] = torch.tensor([1.0, 2.0, 2.0])  # a write at one of T = 4 tokens: mean = o / 4
    assert common_mode_fraction(one_token).item() == pytest.approx(1 / 4)
    summed = evaluate_penalties.common_mode([broadcast, one_token]).item()  # summed over layers
    assert summed == pytest.approx(1.25)
    assert common_mode_fraction(torch.zeros(1, 3, 2)).item() == 0.0  # nothing written: 0, not NaN


@pytest.mark.parametrize(
    "overrides,penalty",
    [
        (("task=trigger", "train.bos_penalty=2.0"), "bos_penalty"),
        (("task=broadcast", "model.n_layers=2", "train.common_mode_penalty=2.0"), "common_mode_penalty"),
    ],
)
def test_a_step_minimises_the_loss_plus_lambda_times_the_penalty(make_config, overrides, penalty):
    """One SGD step from the same weights on the same batch: the update is -lr x grad(task loss + 2 x
    penalty), computed here by hand from the captured forward pass; the step returns the task loss."""
    cfg = make_config(
        *overrides, "train.optim=sgd", "train.momentum=0", "train.grad_clip=0", "train.batch_size=8", "device=cpu"
    )
    (task,), trainer = make_trainer([cfg], torch.device("cpu"))
    model = trainer.model
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    batch = task.sample(8, torch.Generator().manual_seed(cfg.seed), "cpu")  # the trainer's first batch
    taps = evaluate_penalties.tap_names({penalty: 2.0}, len(model.blocks))
    with capture(model, taps) as cache:
        loss = batch_loss(task, model(batch.inputs), batch)
    value = evaluate_penalties.PENALTIES[penalty].value([cache[name] for name in taps])
    assert value.item() > 0.01  # the penalty matters here
    grads = torch.autograd.grad(loss + 2.0 * value, list(model.parameters()))
    returned = trainer.train_step()
    assert returned.item() == pytest.approx(loss.item(), rel=1e-5)  # task loss only
    for (name, p), grad in zip(model.named_parameters(), grads):
        torch.testing.assert_close(p.detach(), before[name] - cfg.train.lr * grad, rtol=1e-4, atol=1e-6)


def test_every_penalty_is_a_train_key_that_is_off_by_default(make_config):
    cfg = make_config()
    assert all(getattr(cfg.train, name) == 0.0 for name in evaluate_penalties.PENALTIES)
    assert evaluate_penalties.active(cfg.train) == {}
    assert evaluate_penalties.active(make_config("train.bos_penalty=0.5").train) == {"bos_penalty": 0.5}
