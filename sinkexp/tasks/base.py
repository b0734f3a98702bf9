"""The batch every task sampler returns, and the per-position loss the regression tasks share."""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class Batch:
    inputs: torch.Tensor      # (B, T, input_dim) float, or (B, T) long for token tasks
    targets: torch.Tensor     # (B, T, output_dim) float, or (B, T) long
    loss_mask: torch.Tensor   # (B, T) bool: positions that count in the loss
    query_type: torch.Tensor  # (B, T) long: index into the task's query_types, -1 = not a query
    sink: torch.Tensor        # (B,) long: the sink position of each sequence (BOS = 0)


def mse(pred: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Squared error averaged over the channels: (B, T, C) x2 -> (B, T)."""
    return (pred - targets).pow(2).mean(-1)
