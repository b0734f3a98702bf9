"""Barbero et al. 2025's perturbation (Sec. 3-4, Fig. 2): change one token and measure how much, and
how far down the sequence, each layer's representations move (docs/metrics.md, "Perturbation").
A sink limits the mixing, so with it the change should stay local. Tensors only: the forward passes
are the caller's (sinkexp/analysis/perturbation.py for sinkexp's models, sinkexp/hf/ for Hugging
Face ones).

    changed = swap_token(inputs, p)                # token p of each sequence := the next sequence's
    change, reach = spread(clean, perturbed, p)    # one layer's representations (B, T, D) of each
    change, reach = summarise(torch.cat(changes))   # relative_change of several chunks together
"""

from __future__ import annotations

import math

import torch


def perturbed_position(n_tokens: int) -> int:
    """Where the token is changed: a quarter of the way into the sequence (sinkexp's choice; the
    paper changes one word of a prompt), so that three quarters of the positions come after it."""
    return max(1, n_tokens // 4)


def swap_token(inputs: torch.Tensor, position: int) -> torch.Tensor:
    """inputs (B, T, ...) with each sequence's token at `position` replaced by the next sequence's
    (b + 1 mod B): a token of the task's own distribution, in the same context otherwise."""
    changed = inputs.clone()
    changed[:, position] = inputs.roll(-1, dims=0)[:, position]
    return changed


def relative_change(clean: torch.Tensor, perturbed: torch.Tensor, position: int) -> torch.Tensor:
    """||h'_i - h_i|| / ||h_i|| at every position i after `position`: (B, T - position - 1) from one
    layer's representations (B, T, D) without and with the change."""
    later = slice(position + 1, None)
    moved = (perturbed[:, later] - clean[:, later]).norm(dim=-1)
    return moved / clean[:, later].norm(dim=-1).clamp_min(torch.finfo(clean.dtype).tiny)


def spread(clean: torch.Tensor, perturbed: torch.Tensor, position: int) -> tuple[float, float]:
    """(perturb_change, perturb_reach) of one layer from its representations (B, T, D) without and
    with the change at `position` (summarise of relative_change)."""
    return summarise(relative_change(clean, perturbed, position))


def summarise(change: torch.Tensor) -> tuple[float, float]:
    """(perturb_change, perturb_reach) of relative changes (B, later positions): their mean over the
    positions and the sequences, and how far down the sequence the change reaches: the mean distance
    from the changed token weighted by the change, averaged over the sequences that changed (NaN if
    none did)."""
    change = change.double()
    distance = torch.arange(1, change.shape[1] + 1, dtype=change.dtype, device=change.device)
    total = change.sum(dim=1)
    moved = total > 0
    reach = ((change * distance).sum(dim=1)[moved] / total[moved]).mean().item() if moved.any() else math.nan
    return change.mean().item(), reach
