"""The lone trainer's optimiser: torch's AdamW and SGD, their update rules called as torch's own
functional forms (torch.optim.adam.adam, torch.optim.sgd.sgd) behind a small class.

Why not torch.optim.AdamW itself: every method of torch's Optimizer is wrapped for torch.compile
and imports torch._dynamo at its first call (with sympy: scripts/bench_choices.py times the import,
docs/performance.md), which a run that does not compile its optimiser never uses. `Optimizer` keeps
what the trainer relies on in torch's form: `param_groups` (one group, torch's keys and defaults),
the per-parameter state entries (AdamW: step on the CPU, exp_avg, exp_avg_sq; SGD: momentum_buffer)
and the state_dict layout, so a checkpoint written by either resumes in the other.
tests/train/test_optimizer.py steps both side by side and compares them bit for bit.
"""

from __future__ import annotations

import copy

import torch
from torch.optim.adam import adam
from torch.optim.sgd import sgd

from sinkexp.config.schema import TrainConfig

# torch's param_groups entry for AdamW and SGD (torch/optim/adamw.py, sgd.py): the keys a state_dict
# holds, with torch's defaults for those sinkexp does not set.
ADAMW_DEFAULTS = dict(
    eps=1e-8,
    amsgrad=False,
    maximize=False,
    foreach=None,
    capturable=False,
    differentiable=False,
    fused=None,
    decoupled_weight_decay=True,
)
SGD_DEFAULTS = dict(dampening=0, nesterov=False, maximize=False, foreach=None, differentiable=False, fused=None)


def step_dtype() -> torch.dtype:
    """The dtype torch keeps AdamW's step count in (torch.optim.optimizer._get_scalar_dtype)."""
    return torch.float64 if torch.get_default_dtype() == torch.float64 else torch.float32


class Optimizer:
    """One parameter group, updated as torch.optim.AdamW (`adamw`) or SGD (`sgd`) updates it."""

    def __init__(self, params, kind: str, group: dict):
        self.kind = kind
        self.param_groups = [{"params": list(params), **group}]
        self.state: dict[torch.Tensor, dict] = {}  # keyed by the parameter itself, as torch keys it

    @property
    def params(self) -> list[torch.Tensor]:
        return self.param_groups[0]["params"]

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad.zero_()

    @torch.no_grad()
    def step(self) -> None:
        group = self.param_groups[0]
        params = [p for p in self.params if p.grad is not None]
        grads = [p.grad for p in params]
        if self.kind == "sgd":
            self._sgd_step(group, params, grads)
        else:
            self._adamw_step(group, params, grads)

    def _adamw_step(self, group: dict, params: list, grads: list) -> None:
        """torch's Adam.step and _init_group for one group, neither fused nor capturable: the step
        count a float tensor on the CPU, the moments zeros of each parameter's layout."""
        for p in params:
            if p not in self.state:
                self.state[p] = {
                    "step": torch.tensor(0.0, dtype=step_dtype(), device="cpu"),
                    "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                    "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format),
                }
        states = [self.state[p] for p in params]
        beta1, beta2 = group["betas"]
        adam(
            params,
            grads,
            [s["exp_avg"] for s in states],
            [s["exp_avg_sq"] for s in states],
            [],
            [s["step"] for s in states],
            foreach=group["foreach"],
            capturable=False,
            differentiable=False,
            fused=group["fused"],
            has_complex=any(torch.is_complex(p) for p in params),
            decoupled_weight_decay=True,
            amsgrad=False,
            beta1=beta1,
            beta2=beta2,
            lr=group["lr"],
            weight_decay=group["weight_decay"],
            eps=group["eps"],
            maximize=False,
        )

    def _sgd_step(self, group: dict, params: list, grads: list) -> None:
        """torch's SGD.step for one group: the momentum buffers (None before the first step) kept per parameter."""
        momentum = group["momentum"]
        buffers = [self.state.setdefault(p, {}).get("momentum_buffer") for p in params] if momentum != 0 else []
        sgd(
            params,
            grads,
            buffers,
            has_sparse_grad=False,
            foreach=group["foreach"],
            fused=group["fused"],
            weight_decay=group["weight_decay"],
            momentum=momentum,
            lr=group["lr"],
            dampening=group["dampening"],
            nesterov=False,
            maximize=False,
        )
        for p, buffer in zip(params, buffers):
            self.state[p]["momentum_buffer"] = buffer

    def state_dict(self) -> dict:
        """torch's layout: state by parameter index, the group with its parameters' indices."""
        index = {id(p): i for i, p in enumerate(self.params)}
        group = {key: value for key, value in self.param_groups[0].items() if key != "params"}
        return {
            "state": {index[id(p)]: entry for p, entry in self.state.items()},
            "param_groups": [{**group, "params": list(range(len(self.params)))}],
        }

    def load_state_dict(self, state_dict: dict) -> None:
        """Continue from a state_dict of this class or of torch's optimiser of the same kind: as torch
        loads one, the step count kept as saved, every other tensor moved to its parameter's device and dtype."""
        (saved,) = state_dict["param_groups"]
        if len(saved["params"]) != len(self.params):
            raise ValueError(
                f"the optimiser state holds {len(saved['params'])} parameters where the model has {len(self.params)}"
            )
        by_id = dict(zip(saved["params"], self.params))
        self.state = {
            by_id[i]: {
                key: value if key == "step" else value.to(dtype=by_id[i].dtype, device=by_id[i].device)
                for key, value in entry.items()
            }
            for i, entry in state_dict["state"].items()
        }
        self.param_groups = [{**copy.deepcopy(saved), "params": self.params}]


def make_optimizer(params, cfg: TrainConfig) -> Optimizer:
    """`train.optim`'s optimiser over `params`: AdamW (eps 1e-8, decoupled weight decay) or SGD
    (momentum without dampening or Nesterov), with train.lr, train.weight_decay and its own settings."""
    if cfg.optim == "sgd":
        group = dict(lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay, **SGD_DEFAULTS)
        return Optimizer(params, "sgd", group)
    group = dict(lr=cfg.lr, betas=tuple(cfg.betas), weight_decay=cfg.weight_decay, **ADAMW_DEFAULTS)
    return Optimizer(params, "adamw", group)
