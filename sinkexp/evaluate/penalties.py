"""Training penalties on the model's internals, added to the task loss (definitions: docs/metrics.md).

Each penalty is a config key `train.<name>` holding its weight lambda (0: off), the taps it reads
and a function of the captured tensors:

  bos_penalty          lambda x mean attention on BOS, over layers, heads and every query but BOS
                       itself (Ran-Milo 2026 warns that such a penalty breaks the softmax no-op)
  common_mode_penalty  lambda x sum over layers of the attention write's common-mode fraction
                       E(mean_i o_i) / (E(O) + 1e-12), E the mean squared entry (Fesser et al. 2026,
                       Eq. 5, summed over layers as their code does: lambda 1 here is 2 in Eq. 5)

The penalties see the training step's own forward pass (the taps record it), so their gradients
flow through the model like the task loss's. The logged train loss is the task loss alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from sinkexp.evaluate.metrics.head_writes import common_mode_fraction


@dataclass(frozen=True)
class Penalty:
    tap: str  # the tap read in every block, e.g. "attn.weights"
    value: Callable[[list[torch.Tensor]], torch.Tensor]  # the tapped tensors, one per layer -> scalar


def bos_attention(weights: list[torch.Tensor]) -> torch.Tensor:
    """Mean of A[b, h, i, 0] over layers, heads, sequences and queries i >= 1 (BOS is key 0)."""
    return torch.stack([w[:, :, 1:, 0].mean() for w in weights]).mean()


def common_mode(outputs: list[torch.Tensor]) -> torch.Tensor:
    return torch.stack([common_mode_fraction(o) for o in outputs]).sum()


PENALTIES = {
    "bos_penalty": Penalty("attn.weights", bos_attention),
    "common_mode_penalty": Penalty("attn.output", common_mode),
}


def active(train_cfg) -> dict[str, float]:
    """The penalties this run trains with: name -> lambda."""
    return {name: getattr(train_cfg, name) for name in PENALTIES if getattr(train_cfg, name) > 0}


def tap_names(weights: dict[str, float], n_layers: int) -> list[str]:
    return [f"blocks.{layer}.{PENALTIES[name].tap}" for name in weights for layer in range(n_layers)]


def total(weights: dict[str, float], cache: dict, n_layers: int) -> torch.Tensor:
    """sum over the active penalties of lambda x value, from the taps of one forward pass."""
    return sum(
        weight * PENALTIES[name].value([cache[f"blocks.{layer}.{PENALTIES[name].tap}"] for layer in range(n_layers)])
        for name, weight in weights.items()
    )
