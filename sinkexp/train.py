"""Trainers: fresh batches from seeded generators, one optimiser step each.

`Trainer` trains one model. `ReplicaTrainer` trains K independent replicas of one architecture,
each with its own initial weights and data stream (its own seed), in one process: the parameters
are stacked along a leading model axis and one vmapped forward and backward serves all K
(torch.func.stack_module_state + functional_call + vmap). Everything that couples parameters is
done per replica: the loss, gradient clipping (each replica's own norm) and the optimiser (AdamW
and SGD are elementwise), so replica k follows its lone run's trajectory up to floating-point
summation order. The point is the GPU, where tiny models are bound by kernel launches rather than
arithmetic (scripts/bench_gpu.py measures what K models cost against one).

Both share one loop (`TrainLoop.fit`) and know nothing about sinks. `fit` calls `on_eval(step)` at
step 0, every `eval_every` steps and at the last step; `on_log(step, losses)` every `log_every`
steps, with each model's mean train loss since the last log (a list: one entry per model);
`on_checkpoint(step)` every `checkpoint_every` steps and at the end. A lone trainer's
`state_dict()` and a replica view's hold what that model needs to continue bit-for-bit on the same
device (model, optimiser, data generator, step, the partial train-loss window) in one format, so a
checkpoint written by either resumes in either.
"""
from __future__ import annotations

import copy
import dataclasses
import itertools
import time
from collections import deque
from typing import Callable

import torch
from torch import nn
from torch.func import functional_call, stack_module_state, vmap
from tqdm import tqdm

from sinkexp import penalties
from sinkexp.config import TrainConfig
from sinkexp.model import capture
from sinkexp.tasks.base import Batch

# Optimiser state entries every replica shares: AdamW's step counter (all replicas step together).
# Every other tensor in the state has its parameter's shape, model axis included.
SHARED_OPTIMIZER_STATE = ("step",)
FIELDS = dataclasses.fields(Batch)


def make_optimizer(params, cfg: TrainConfig) -> torch.optim.Optimizer:
    params = list(params)
    if cfg.optim == "sgd":
        return torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
    return torch.optim.AdamW(params, lr=cfg.lr, betas=tuple(cfg.betas), weight_decay=cfg.weight_decay)


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
    """Training produced a non-finite loss or parameter; the message says where and what to try."""


class TrainLoop:
    """The loop both trainers share. A subclass sets `optimizer` and implements `draw(n)` (n examples
    of fresh data, split along `batch_dim`), `train_step()` (one step; the loss, one per model) and
    `parameters()` (every trained tensor, checked for divergence)."""

    batch_dim = 0                           # where a batch's examples run: after the model axis, if any

    def __init__(self, task, cfg: TrainConfig, device: torch.device, loss_shape: tuple):
        self.task, self.cfg, self.device = task, cfg, device
        self.step = 0
        self.window_sum = torch.zeros(loss_shape, device=device)   # train loss summed since the last log
        self.window_len = 0
        # The first step whose loss was not finite (0: none yet), tracked on the device so that no
        # step waits for the host; read at log, eval and checkpoint steps (check_finite).
        self.first_bad_step = torch.zeros(loss_shape, dtype=torch.long, device=device)
        self.batches: deque[Batch] = deque()   # drawn ahead by next_batch, never across a checkpoint

    def next_batch(self) -> Batch:
        """This step's batch. The sampler draws `train.data_chunk` steps' batches per call (fewer
        kernel launches on a GPU), never past the next checkpoint, so a resumed run draws what an
        uninterrupted one does."""
        if not self.batches:
            cfg = self.cfg
            to_checkpoint = cfg.checkpoint_every - self.step % cfg.checkpoint_every
            steps = max(1, min(cfg.data_chunk, to_checkpoint, cfg.steps - self.step))
            self.batches.extend(split_batch(self.draw(cfg.batch_size * steps), cfg.batch_size, dim=self.batch_dim))
        return self.batches.popleft()

    def check_finite(self) -> None:
        """Raise Diverged at the first non-finite training loss, or once a parameter is not finite."""
        first_bad = self.first_bad_step.max().item()
        if first_bad:
            raise Diverged(f"diverged at step {first_bad} (train loss not finite); try a lower train.lr "
                           f"(now {self.cfg.lr:g})")
        if not all(torch.isfinite(p).all() for p in self.parameters()):
            raise Diverged(f"diverged by step {self.step} (a parameter is not finite); try a lower train.lr "
                           f"(now {self.cfg.lr:g})")

    def progress(self, generator: torch.Generator, window_sum: torch.Tensor) -> dict:
        return {"generator": generator.get_state(), "step": self.step, "window_sum": window_sum.clone(),
                "window_len": self.window_len}

    def fit(self, *, eval_every: int, on_eval: Callable, on_log: Callable, on_checkpoint: Callable) -> float:
        """Train up to cfg.steps; returns the steps/s of this call (evaluation included)."""
        cfg = self.cfg
        if self.step == 0:
            on_eval(0)
        first, started = self.step, time.perf_counter()
        bar = tqdm(total=cfg.steps, initial=self.step, desc="train", unit="step",
                   dynamic_ncols=True, mininterval=1.0)
        while self.step < cfg.steps:
            # No host synchronisation here: the loss is summed on the device and read at log time.
            loss = self.train_step()
            self.window_sum += loss
            self.window_len += 1
            self.step += 1
            bad = ~torch.isfinite(loss) & (self.first_bad_step == 0)
            self.first_bad_step = torch.where(bad, self.step, self.first_bad_step)
            bar.update(1)
            last = self.step == cfg.steps
            log_now, eval_now, checkpoint_now = (last or self.step % every == 0
                                                 for every in (cfg.log_every, eval_every, cfg.checkpoint_every))
            if log_now or eval_now or checkpoint_now:   # nothing non-finite is logged, evaluated or saved
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
        bar.close()
        elapsed = time.perf_counter() - started
        return (self.step - first) / elapsed if elapsed > 0 else float("nan")


class Trainer(TrainLoop):
    """One model, one data generator. Penalties (train.bos_penalty, ...; sinkexp/penalties.py) read
    the step's own forward pass through its taps and join the loss it minimises."""

    def __init__(self, model: nn.Module, task, cfg: TrainConfig, generator: torch.Generator, device: torch.device):
        super().__init__(task, cfg, device, loss_shape=())
        self.model, self.generator = model, generator
        self.forward = maybe_compile(model, cfg, device)   # training only; evaluation calls self.model
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
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                **self.progress(self.generator, self.window_sum)}

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.generator.set_state(state["generator"])
        self.step, self.window_len = state["step"], state["window_len"]
        self.window_sum = state["window_sum"].reshape(()).to(self.device)


class ReplicaTrainer(TrainLoop):
    """K models of one architecture (their own weights and generators) along a model axis.

    `models` and `generators` are what K lone runs would build; they are read once, then the
    trainer owns stacked copies. Shapes: every parameter (K, ...), inputs (K, B, ...), losses (K,).
    `views()` gives each replica as a lone trainer's face: `.model` and `.state_dict()`.
    """

    batch_dim = 1

    def __init__(self, models: list[nn.Module], task, cfg: TrainConfig, generators: list, device: torch.device):
        super().__init__(task, cfg, device, loss_shape=(len(models),))
        self.generators = list(generators)
        self.params, self.buffers = stack_module_state(models)        # name -> (K, ...) leaf tensors
        self.model = copy.deepcopy(models[0])   # holds one replica's weights at a time, see replica()
        skeleton = copy.deepcopy(models[0]).to("meta")                # the architecture without storage

        def replica_loss(params, buffers, *batch_fields):
            batch = Batch(*batch_fields)
            return batch_loss(task, functional_call(skeleton, (params, buffers), (batch.inputs,)), batch)

        self.losses = maybe_compile(vmap(replica_loss), cfg, device)
        self.optimizer = make_optimizer(self.params.values(), cfg)

    def _stacked(self) -> dict[str, torch.Tensor]:
        return {**self.params, **self.buffers}

    def _tensors(self):
        return itertools.chain(self.model.named_parameters(), self.model.named_buffers())

    @torch.no_grad()
    def replica(self, k: int) -> nn.Module:
        """Replica k as a plain module with its current weights (one shared module: use it before asking for another)."""
        stacked = self._stacked()
        for name, tensor in self._tensors():
            tensor.copy_(stacked[name][k])
        return self.model

    def views(self) -> list["ReplicaView"]:
        return [ReplicaView(self, k) for k in range(len(self.generators))]

    def replica_state_dict(self, k: int) -> dict:
        model = {name: tensor.clone() for name, tensor in self.replica(k).state_dict().items()}
        return {"model": model, "optimizer": replica_optimizer_state(self.optimizer.state_dict(), k),
                **self.progress(self.generators[k], self.window_sum[k])}

    def load_state_dicts(self, states: list[dict]) -> None:
        """Continue from one lone-format state per replica (they must share the step)."""
        if len({(state["step"], state["window_len"]) for state in states}) != 1:
            raise ValueError("replicas resume together only from the same step")
        stacked = self._stacked()
        with torch.no_grad():
            for k, state in enumerate(states):
                self.model.load_state_dict(state["model"])             # checks names and shapes
                for name, tensor in self._tensors():
                    stacked[name][k].copy_(tensor)
        self.optimizer.load_state_dict(stack_optimizer_states([state["optimizer"] for state in states]))
        for generator, state in zip(self.generators, states):
            generator.set_state(state["generator"])
        self.step, self.window_len = states[0]["step"], states[0]["window_len"]
        self.window_sum = torch.stack([state["window_sum"].reshape(()) for state in states]).to(self.device)

    def parameters(self):
        return self.params.values()

    def draw(self, n: int) -> Batch:
        batches = [self.task.sample(n, generator, self.device) for generator in self.generators]
        return Batch(*(torch.stack([getattr(batch, field.name) for batch in batches]) for field in FIELDS))

    def train_step(self) -> torch.Tensor:
        batch = self.next_batch()
        losses = self.losses(self.params, self.buffers, *(getattr(batch, field.name) for field in FIELDS))  # (K,)
        self.optimizer.zero_grad(set_to_none=True)
        losses.sum().backward()      # replicas share no parameter: each gets its own loss's gradient
        if self.cfg.grad_clip > 0:
            clip_grad_norm_per_replica_(self.params.values(), self.cfg.grad_clip)
        self.optimizer.step()
        return losses.detach()


@dataclasses.dataclass
class ReplicaView:
    """Replica k of a ReplicaTrainer, seen as a lone run: its module now, its lone-format state."""
    trainer: ReplicaTrainer
    k: int

    @property
    def model(self) -> nn.Module:
        return self.trainer.replica(self.k)

    def state_dict(self) -> dict:
        return self.trainer.replica_state_dict(self.k)


def split_batch(batch: Batch, size: int, dim: int) -> list[Batch]:
    """Cut a batch into batches of `size` examples along `dim` (views, no copies)."""
    parts = [torch.split(getattr(batch, field.name), size, dim=dim) for field in FIELDS]
    return [Batch(*fields) for fields in zip(*parts)]


def clip_grad_norm_per_replica_(params, max_norm: float) -> None:
    """torch.nn.utils.clip_grad_norm_ applied to each replica alone (the model axis is dim 0)."""
    grads = [p.grad for p in params if p.grad is not None]
    K = grads[0].shape[0]
    norms = torch.stack([g.reshape(K, -1).norm(dim=1) for g in grads]).norm(dim=0)     # (K,)
    scale = (max_norm / (norms + 1e-6)).clamp(max=1.0)
    for g in grads:
        g.mul_(scale.view(K, *[1] * (g.dim() - 1)))


def _per_replica(key: str, value) -> bool:
    return torch.is_tensor(value) and key not in SHARED_OPTIMIZER_STATE


def replica_optimizer_state(stacked: dict, k: int) -> dict:
    """Replica k's share of a stacked optimiser's state_dict: what a lone model's optimiser holds."""
    state = {index: {key: value[k].clone() if _per_replica(key, value) else copy.deepcopy(value)
                     for key, value in entry.items()}
             for index, entry in stacked["state"].items()}
    return {"state": state, "param_groups": copy.deepcopy(stacked["param_groups"])}


def stack_optimizer_states(states: list[dict]) -> dict:
    """The inverse of replica_optimizer_state: K lone optimiser state_dicts -> one stacked one."""
    first = states[0]
    state = {index: {key: torch.stack([s["state"][index][key] for s in states]) if _per_replica(key, value)
                     else value for key, value in entry.items()}
             for index, entry in first["state"].items()}
    return {"state": state, "param_groups": first["param_groups"]}
