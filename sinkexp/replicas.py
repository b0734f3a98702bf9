"""`ReplicaTrainer`: K independent replicas of one architecture, each with its own initial weights
and data stream (its own seed), trained in one process.

The parameters are stacked along a leading model axis and one vmapped forward and backward serves
all K (torch.func.stack_module_state + functional_call + vmap). Everything that couples parameters
is done per replica: the loss, gradient clipping (each replica's own norm) and the optimiser (AdamW
and SGD are elementwise), so replica k follows its lone run's trajectory up to floating-point
summation order. The point is the GPU, where tiny models are bound by kernel launches rather than
arithmetic (scripts/bench_gpu.py measures what K models cost against one). Each replica's state
has the lone trainer's format (train.py), so a checkpoint written by either resumes in either.
"""
from __future__ import annotations

import copy
import dataclasses
import itertools

import torch
from torch import nn
from torch.func import functional_call, stack_module_state, vmap

from sinkexp.config import TrainConfig
from sinkexp.tasks.base import Batch
from sinkexp.train import FIELDS, TrainLoop, batch_loss, make_optimizer, maybe_compile

# Optimiser state entries every replica shares: AdamW's step counter (all replicas step together).
# Every other tensor in the state has its parameter's shape, model axis included.
SHARED_OPTIMIZER_STATE = ("step",)


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
