"""`ReplicaTrainer`: K independent replicas of one architecture trained in one process, each with its
own initial weights and data stream (its seed) and, in a pack (`pack=`), its own learning rate,
weight decay and task scalars (`Task.packable`: task.gamma, task.structure_seed, ...).

The parameters are stacked along a leading model axis and one vmapped forward and backward serves
all K (torch.func.stack_module_state + functional_call + vmap). Everything that couples parameters
is done per replica: the loss, gradient clipping (each replica's own norm) and the optimiser
(`PerReplicaOptimizer`: AdamW and SGD are elementwise, with a learning rate and weight decay per
replica), so replica k follows its lone run's trajectory up to floating-point rounding order. The
point is the GPU, where tiny models are bound by kernel launches rather than arithmetic
(scripts/bench_gpu.py measures what K models cost against one). Each replica's state has the lone
trainer's format (train/loop.py), so a checkpoint written by either resumes in either.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools

import torch
from torch import nn
from torch.func import functional_call, stack_module_state, vmap

from sinkexp.config.schema import TrainConfig
from sinkexp.tasks.base import Batch
from sinkexp.train.loop import FIELDS, TrainLoop, batch_loss, maybe_compile
from sinkexp.train.optimizer import make_optimizer

# Optimiser state entries every replica shares: AdamW's step counter (all replicas step together).
# Every other tensor in the state has its parameter's shape, model axis included.
SHARED_OPTIMIZER_STATE = ("step",)


class PerReplicaOptimizer:
    """torch.optim.AdamW or SGD (as `train.optim` chooses) over parameters stacked along a model
    axis, with replica k's learning rate and weight decay from cfgs[k]. It keeps torch's state entries
    (AdamW: step, exp_avg, exp_avg_sq; SGD: momentum_buffer) and their update rules, with a
    (K, 1, ...) tensor where torch has a Python number; `replica_state_dict(k)` is the state_dict
    of replica k's lone optimiser (make_optimizer), and `load_replica_state_dicts` its inverse."""

    def __init__(self, params, cfgs: list[TrainConfig]):
        self.params, self.cfg = list(params), cfgs[0]
        self.base_lr = [c.lr for c in cfgs]
        self.weight_decay = [c.weight_decay for c in cfgs]
        self.factor = 1.0  # the schedule's factor (TrainLoop.set_lr_factor)
        # The same numbers as (K,) tensors on the parameters' device, built once: a step derives its
        # per-replica factors from them there, with its host numbers (the schedule's factor, AdamW's
        # bias corrections) as kernel arguments, so it never copies to the device or waits for it.
        # In double, as torch computes with its Python-number settings, rounded once to the parameters' dtype.
        device = self.params[0].device
        self.lr_vector, self.decay_vector = (
            torch.tensor(values, dtype=torch.float64, device=device) for values in (self.base_lr, self.weight_decay)
        )
        self.state: dict[int, dict] = {i: {} for i in range(len(self.params))}
        # Each replica's lone param_groups entry (its hyper-parameters, torch's keys), for its state_dict.
        self.groups = [make_optimizer([torch.zeros(())], c).state_dict()["param_groups"][0] for c in cfgs]

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        cfg = self.cfg
        lr = self.lr_vector * self.factor  # (K,) float64, on the device
        vectors: dict = {}  # each per-replica factor of this step, computed once

        def per_replica(name: str, values, p: torch.Tensor) -> torch.Tensor:
            """A (K,) float64 tensor (a function making it) in p's dtype, as (K, 1, ...)."""
            if name not in vectors:
                vectors[name] = values().to(p.dtype)
            return vectors[name].view(-1, *[1] * (p.dim() - 1))

        for p, state in zip(self.params, self.state.values()):
            if p.grad is None:
                continue
            g = p.grad
            if cfg.optim == "sgd":  # torch.optim.SGD: coupled weight decay, momentum without dampening
                d_p = g.addcmul(p, per_replica("decay", lambda: self.decay_vector, p))
                if cfg.momentum != 0:
                    if "momentum_buffer" not in state:
                        state["momentum_buffer"] = d_p.clone()
                    else:
                        state["momentum_buffer"].mul_(cfg.momentum).add_(d_p)
                    d_p = state["momentum_buffer"]
                p.addcmul_(d_p, per_replica("-lr", lambda: -lr, p))
                continue
            beta1, beta2 = cfg.betas  # torch.optim.AdamW: decoupled weight decay, eps 1e-8
            if not state:
                state.update(step=torch.tensor(0.0), exp_avg=torch.zeros_like(p), exp_avg_sq=torch.zeros_like(p))
            state["step"] += 1
            step = state["step"].item()  # on the CPU, as torch keeps it (after a resume too): no wait for the device
            p.mul_(per_replica("decay", lambda: 1 - lr * self.decay_vector, p))
            state["exp_avg"].lerp_(g, 1 - beta1)
            state["exp_avg_sq"].mul_(beta2).addcmul_(g, g, value=1 - beta2)
            denom = (state["exp_avg_sq"].sqrt() / (1 - beta2**step) ** 0.5).add_(1e-8)
            step_size = per_replica(f"step size {step}", lambda: -lr / (1 - beta1**step), p)
            p.addcdiv_(state["exp_avg"] * step_size, denom)

    def replica_state_dict(self, k: int) -> dict:
        """What replica k's lone optimiser's state_dict() would hold."""
        state = {
            i: {
                key: value.clone() if key in SHARED_OPTIMIZER_STATE else value[k].clone()
                for key, value in entry.items()
            }
            for i, entry in self.state.items()
            if entry
        }
        group = {
            **copy.deepcopy(self.groups[k]),
            "lr": self.base_lr[k] * self.factor,
            "params": list(range(len(self.params))),
        }
        return {"state": state, "param_groups": [group]}

    def load_replica_state_dicts(self, states: list[dict]) -> None:
        """Continue from one lone optimiser state_dict per replica (the inverse of replica_state_dict)."""
        for i, p in enumerate(self.params):
            entries = [s["state"].get(i, s["state"].get(str(i))) for s in states]
            if entries[0] is None:
                continue
            # The shared step stays on the CPU, as torch's AdamW keeps it: step() reads it every step.
            self.state[i] = {
                key: value.clone().cpu()
                if key in SHARED_OPTIMIZER_STATE
                else torch.stack([e[key] for e in entries]).to(p.device)
                for key, value in entries[0].items()
            }


class ReplicaTrainer(TrainLoop):
    """K models of one architecture (their own weights, generators, tasks and optimiser settings)
    along a model axis.

    `models`, `tasks`, `cfgs` and `generators` are what K lone runs would build; they are read once,
    then the trainer owns stacked copies. The tasks may differ only in their `packable` settings
    (the data, never the loss), so one vmapped loss serves all. Shapes: every parameter (K, ...),
    inputs (K, B, ...), losses (K,). `views()` gives each replica as a lone trainer's face: `.model`
    and `.state_dict()`.
    """

    batch_dim = 1

    def __init__(
        self, models: list[nn.Module], tasks: list, cfgs: list[TrainConfig], generators: list, device: torch.device
    ):
        super().__init__(tasks[0], cfgs[0], device, loss_shape=(len(models),))
        self.tasks, self.generators = list(tasks), list(generators)
        self.params, self.buffers = stack_module_state(models)  # name -> (K, ...) leaf tensors
        self.model = copy.deepcopy(models[0])  # holds one replica's weights at a time, see replica()
        skeleton = copy.deepcopy(models[0]).to("meta")  # the architecture without storage
        task = tasks[0]

        def replica_loss(params, buffers, *batch_fields):
            batch = Batch(*batch_fields)
            return batch_loss(task, functional_call(skeleton, (params, buffers), (batch.inputs,)), batch)

        self.losses = maybe_compile(vmap(replica_loss), cfgs[0], device)
        self.optimizer = PerReplicaOptimizer(self.params.values(), cfgs)

    def set_lr_factor(self, factor: float) -> None:
        self.optimizer.factor = factor

    def _stacked(self) -> dict[str, torch.Tensor]:
        return {**self.params, **self.buffers}

    def _tensors(self):
        return itertools.chain(self.model.named_parameters(), self.model.named_buffers())

    @torch.no_grad()
    def replica(self, k: int) -> nn.Module:
        """Replica k as a plain module with its current weights (one shared module: use it before asking
        for another)."""
        stacked = self._stacked()
        for name, tensor in self._tensors():
            tensor.copy_(stacked[name][k])
        return self.model

    def views(self) -> list["ReplicaView"]:
        return [ReplicaView(self, k) for k in range(len(self.generators))]

    def replica_state_dict(self, k: int) -> dict:
        model = {name: tensor.clone() for name, tensor in self.replica(k).state_dict().items()}
        return {
            "model": model,
            "optimizer": self.optimizer.replica_state_dict(k),
            **self.progress(self.generators[k], self.window_sum[k]),
        }

    def load_state_dicts(self, states: list[dict]) -> None:
        """Continue from one lone-format state per replica (they must share the step)."""
        if len({(state["step"], state["window_len"]) for state in states}) != 1:
            raise ValueError("replicas resume together only from the same step")
        stacked = self._stacked()
        with torch.no_grad():
            for k, state in enumerate(states):
                self.model.load_state_dict(state["model"])  # checks names and shapes
                for name, tensor in self._tensors():
                    stacked[name][k].copy_(tensor)
        self.optimizer.load_replica_state_dicts([state["optimizer"] for state in states])
        for generator, state in zip(self.generators, states):
            generator.set_state(state["generator"])
        self.step, self.window_len = states[0]["step"], states[0]["window_len"]
        self.window_sum = torch.stack([state["window_sum"].reshape(()) for state in states]).to(self.device)

    def parameters(self):
        return self.params.values()

    def finite_models(self) -> torch.Tensor:
        return torch.stack([torch.isfinite(p).flatten(1).all(1) for p in self.parameters()]).all(0)  # (K,)

    def draw(self, n: int) -> Batch:
        batches = [task.sample(n, generator, self.device) for task, generator in zip(self.tasks, self.generators)]
        return Batch(*(torch.stack([getattr(batch, field.name) for batch in batches]) for field in FIELDS))

    def train_step(self) -> torch.Tensor:
        batch = self.next_batch()
        losses = self.losses(self.params, self.buffers, *(getattr(batch, field.name) for field in FIELDS))  # (K,)
        self.optimizer.zero_grad(set_to_none=True)
        losses.sum().backward()  # replicas share no parameter: each gets its own loss's gradient
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


def clip_grad_norm_per_replica_(params, max_norm: float) -> None:
    """torch.nn.utils.clip_grad_norm_ applied to each replica alone (the model axis is dim 0)."""
    grads = [p.grad for p in params if p.grad is not None]
    K = grads[0].shape[0]
    norms = torch.stack([g.reshape(K, -1).norm(dim=1) for g in grads]).norm(dim=0)  # (K,)
    scale = (max_norm / (norms + 1e-6)).clamp(max=1.0)
    for g in grads:
        g.mul_(scale.view(K, *[1] * (g.dim() - 1)))
