"""Trainers: fresh batches from seeded generators, one optimiser step each.

`Trainer` trains one model; `ReplicaTrainer` (train/replicas.py) trains K models of one architecture
(seeds and packed settings) in one vmapped step. Both share one loop (`TrainLoop.fit`) and know nothing
about sinks. `fit` calls `on_eval(step)` at step 0, every `eval_every` steps and at the last step (and
at every checkpoint with `eval_at_checkpoints`); `on_log(step, losses)` every `log_every` steps, with each model's mean
train loss since the last log (a list: one entry per model); `on_checkpoint(step)` at the
checkpoint steps (`schedule.Checkpoints`: every `checkpoint_every`, the last, `checkpoint_steps`). When
`stop()` turns true (a scheduler's pre-timeout signal: machine/preemption.py), the loop trains on to the
next step with no data drawn ahead, calls `on_checkpoint(step, keep=False)` there and raises
Requeue (outside submitit: Interrupted), so the resumed run draws what an uninterrupted one does.
Ctrl-C or SIGTERM leaves `fit` as preemption.Interrupted naming the step, the progress bar closed
first, so that no message lands inside the bar's line. A lone trainer's
`state_dict()` and a replica view's hold what that model needs to continue bit-for-bit on the same
device (model, optimiser, data generator, step, the partial train-loss window) in one format, so a
checkpoint written by either resumes in either.
"""

from __future__ import annotations

import dataclasses
import time
from collections import deque
from typing import Callable

import torch
from torch import nn
from tqdm import tqdm

from sinkexp.config.schedule import Checkpoints, lr_factor
from sinkexp.config.schema import TrainConfig
from sinkexp.evaluate import penalties
from sinkexp.machine.preemption import Interrupted, stopped, stopping
from sinkexp.model import capture
from sinkexp.tasks.base import Batch
from sinkexp.train.optimizer import make_optimizer

FIELDS = dataclasses.fields(Batch)


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (values * mask).sum() / mask.sum().clamp_min(1)


def batch_loss(task, pred: torch.Tensor, batch: Batch) -> torch.Tensor:
    """The training objective: the task's per-position loss, averaged over the loss mask."""
    return masked_mean(task.loss(pred, batch), batch.loss_mask)


def maybe_compile(fn, cfg: TrainConfig, device: torch.device):
    """torch.compile when train.compile is set: with CUDA graphs on a GPU (mode reduce-overhead;
    training shapes are static), plain inductor on the CPU."""
    if not cfg.compile:
        return fn
    return torch.compile(fn, mode="reduce-overhead" if device.type == "cuda" else "default")


class Diverged(RuntimeError):
    """Training produced a non-finite loss or parameter; the message says where (the runner adds
    what to try). `replicas`: which of a pack's models diverged (None: a lone model)."""

    def __init__(self, message: str, replicas: tuple[int, ...] | None = None):
        super().__init__(message)
        self.replicas = replicas


class TrainLoop:
    """The loop both trainers share. A subclass sets `optimizer` and implements `draw(n)` (n examples
    of fresh data, split along `batch_dim`), `train_step()` (one step; the loss, one per model) and
    `parameters()` (every trained tensor, checked for divergence)."""

    batch_dim = 0  # where a batch's examples run: after the model axis, if any

    def __init__(self, task, cfg: TrainConfig, device: torch.device, loss_shape: tuple):
        self.task, self.cfg, self.device = task, cfg, device
        self.step = 0
        self.window_sum = torch.zeros(loss_shape, device=device)  # train loss summed since the last log
        self.window_len = 0
        # The first step whose loss was not finite (0: none yet), tracked on the device so that no
        # step waits for the host; read at log, eval and checkpoint steps (check_finite).
        self.first_bad_step = torch.zeros(loss_shape, dtype=torch.long, device=device)
        self.batches: deque[Batch] = deque()  # drawn ahead by next_batch, never across a checkpoint
        self.checkpoints = Checkpoints(cfg.checkpoint_every, cfg.steps, cfg.checkpoint_steps)

    def next_batch(self) -> Batch:
        """This step's batch. The sampler draws `train.data_chunk` steps' batches per call (fewer
        kernel launches on a GPU), never past the next checkpoint, so a resumed run draws what an
        uninterrupted one does."""
        if not self.batches:
            cfg = self.cfg
            steps = max(1, min(cfg.data_chunk, self.checkpoints.after(self.step) - self.step))
            self.batches.extend(split_batch(self.draw(cfg.batch_size * steps), cfg.batch_size, dim=self.batch_dim))
        return self.batches.popleft()

    def set_lr_factor(self, factor: float) -> None:
        """The learning rate is train.lr x factor (sinkexp/config/schedule.py) from the next step on."""
        for group in self.optimizer.param_groups:
            group["lr"] = self.cfg.lr * factor

    def check_finite(self) -> None:
        """Raise Diverged at the first non-finite training loss, or once a parameter is not finite,
        naming the models that diverged."""
        first_bad = self.first_bad_step.reshape(-1)
        bad = first_bad > 0
        if bad.any():
            low, high = first_bad[bad].min().item(), first_bad[bad].max().item()
            when = f"at step {low}" if low == high else f"by step {high}"  # a pack's models may differ
            raise Diverged(f"diverged {when} (train loss not finite)", self.which(bad))
        finite = self.finite_models()
        if not finite.all():
            raise Diverged(f"diverged by step {self.step} (a parameter is not finite)", self.which(~finite))

    def finite_models(self) -> torch.Tensor:
        """Per model (one entry for a lone one): whether all its parameters are finite."""
        return torch.stack([torch.isfinite(p).all() for p in self.parameters()]).all().reshape(1)

    def which(self, models: torch.Tensor) -> tuple[int, ...] | None:
        """The indices of `models` (a boolean per model) that are set; None for a lone model."""
        return tuple(models.nonzero().flatten().tolist()) if self.first_bad_step.dim() else None

    def progress(self, generator: torch.Generator, window_sum: torch.Tensor) -> dict:
        return {
            "generator": generator.get_state(),
            "step": self.step,
            "window_sum": window_sum.clone(),
            "window_len": self.window_len,
        }

    def fit(
        self,
        *,
        eval_every: int,
        on_eval: Callable,
        on_log: Callable,
        on_checkpoint: Callable,
        eval_at_checkpoints: bool = False,
        stop: Callable[[], bool] = lambda: False,
    ) -> float:
        """Train up to cfg.steps; returns the steps/s of this call (evaluation included)."""
        cfg = self.cfg
        bar = tqdm(total=cfg.steps, initial=self.step, desc="train", unit="step", dynamic_ncols=True, mininterval=1.0)
        scheduled = cfg.warmup > 0 or cfg.schedule != "constant"
        try:  # a signal during the step-0 evaluation stops the run at step 0 too
            if self.step == 0:
                on_eval(0)
            first, started = self.step, time.perf_counter()
            while self.step < cfg.steps:
                if stopping() is not None:  # a signal whose exception a finaliser swallowed (preemption.check)
                    raise Interrupted(stopping(), self.step)
                if scheduled:  # from the step alone: a resumed run takes the rates an uninterrupted one does
                    self.set_lr_factor(lr_factor(self.step, cfg.steps, cfg.warmup, cfg.schedule))
                # No host synchronisation here: the loss is summed on the device and read at log time.
                loss = self.train_step()
                self.window_sum += loss
                self.window_len += 1
                self.step += 1
                bad = ~torch.isfinite(loss) & (self.first_bad_step == 0)
                self.first_bad_step = torch.where(bad, self.step, self.first_bad_step)
                bar.update(1)
                last = self.step == cfg.steps
                log_now, eval_now = (last or self.step % every == 0 for every in (cfg.log_every, eval_every))
                checkpoint_now = self.step in self.checkpoints
                eval_now = eval_now or (eval_at_checkpoints and checkpoint_now)
                if log_now or eval_now or checkpoint_now:  # nothing non-finite is logged, evaluated or saved
                    self.check_finite()
                if log_now:
                    mean_losses = (self.window_sum / self.window_len).reshape(-1).tolist()
                    self.window_sum.zero_()
                    self.window_len = 0
                    bar.set_postfix(loss=f"{mean_losses[0]:.4g}")
                    on_log(self.step, mean_losses)
                if eval_now:
                    on_eval(self.step)
                if checkpoint_now:
                    on_checkpoint(self.step)
                if not last and not self.batches and stop():
                    if not checkpoint_now:
                        self.check_finite()
                        on_checkpoint(self.step, keep=False)  # not a scheduled step: no kept copy
                    raise stopped(self.step)  # Requeue, or Interrupted outside submitit
        except KeyboardInterrupt as err:  # Ctrl-C or SIGTERM: FAILED says at which step
            raise Interrupted.at(err, self.step) from None
        finally:
            bar.close()  # before anyone prints: a message never lands inside the bar's line
        elapsed = time.perf_counter() - started
        return (self.step - first) / elapsed if elapsed > 0 else float("nan")


class Trainer(TrainLoop):
    """One model, one data generator. Penalties (train.bos_penalty, ...; sinkexp/evaluate/penalties.py) read
    the step's own forward pass through its taps and join the loss it minimises."""

    def __init__(self, model: nn.Module, task, cfg: TrainConfig, generator: torch.Generator, device: torch.device):
        super().__init__(task, cfg, device, loss_shape=())
        self.model, self.generator = model, generator
        self.forward = maybe_compile(model, cfg, device)  # training only; evaluation calls self.model
        self.optimizer = make_optimizer(model.parameters(), cfg)
        self.penalties = penalties.active(cfg)
        self.n_layers = len(model.blocks)

    def draw(self, n: int) -> Batch:
        return self.task.sample(n, self.generator, self.device)

    def parameters(self):
        return self.model.parameters()

    def train_step(self) -> torch.Tensor:
        """One optimiser step; returns the task's training loss, penalties left out (a 0-d tensor on the device)."""
        batch = self.next_batch()
        if self.penalties:
            with capture(self.model, penalties.tap_names(self.penalties, self.n_layers)) as cache:
                loss = batch_loss(self.task, self.forward(batch.inputs), batch)
            objective = loss + penalties.total(self.penalties, cache, self.n_layers)
        else:
            loss = objective = batch_loss(self.task, self.forward(batch.inputs), batch)
        self.optimizer.zero_grad(set_to_none=True)
        objective.backward()
        if self.cfg.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip)
        self.optimizer.step()
        return loss.detach()

    def state_dict(self) -> dict:
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            **self.progress(self.generator, self.window_sum),
        }

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.generator.set_state(state["generator"])
        self.step, self.window_len = state["step"], state["window_len"]
        self.window_sum = state["window_sum"].reshape(()).to(self.device)


def split_batch(batch: Batch, size: int, dim: int) -> list[Batch]:
    """Cut a batch into batches of `size` examples along `dim` (views, no copies)."""
    parts = [torch.split(getattr(batch, field.name), size, dim=dim) for field in FIELDS]
    return [Batch(*fields) for fields in zip(*parts)]
