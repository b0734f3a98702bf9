"""The vectors at the sink against the others: the norms of keys, values and the residual stream,
how constant the sink's key is across sequences, and the stream's massive activations
(docs/metrics.md: `resid_norm_*`, `massive_*`, `sink_key_cos`, `key_cos_rest`, `k_norm_*`,
`v_norm_*`). Pure tensor functions; conventions in metrics/__init__.py."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F


def norms_at_sink(x: torch.Tensor, sink: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per head (H,), the mean over sequences of ||x_s|| and over sequences and positions j != s of ||x_j||,
    of x (B, H, S, D), keys or values (Gu et al. 2025, Fig. 2: the first token's key and value norms)."""
    norms = x.norm(dim=-1)  # (B, H, S)
    B, H, S = norms.shape
    at = norms.gather(-1, sink.view(B, 1, 1).expand(B, H, 1)).squeeze(-1)  # (B, H)
    rest = (norms.sum(-1) - at) / (S - 1)
    return at.mean(0), rest.mean(0)


def resid_norms(resid: torch.Tensor, sink: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean ||h_s||, mean over j != s of ||h_j||) of a residual stream (B, T, d), as scalars."""
    at, rest = norms_at_sink(resid[:, None], sink)
    return at[0], rest[0]


def massive_ratio(resid: torch.Tensor) -> torch.Tensor:
    """max |h| / median |h| over every entry of a residual stream (Sun et al. 2024's massive activations);
    infinite when more than half the entries are exactly 0 (the evaluator then writes no row)."""
    magnitude = resid.abs().flatten()
    return magnitude.max() / lower_median(magnitude)


def lower_median(values: torch.Tensor) -> torch.Tensor:
    """torch.median of a flat tensor (the entry at (n - 1) // 2 in sorted order, NaN where one is NaN):
    on the CPU numpy's selection finds the same entry, 3-6x faster than torch's sort."""
    if values.device.type != "cpu" or values.dtype not in (torch.float32, torch.float64) or values.requires_grad:
        return values.median()
    middle = (values.numel() - 1) // 2
    chosen = np.partition(values.numpy(), middle)  # NaN orders last, as in torch's sort: any lies after middle
    nan = np.isnan(chosen[middle:]).any()
    return values.new_tensor(float("nan")) if nan else torch.from_numpy(chosen[middle : middle + 1]).reshape(())


def massive_location(resid: torch.Tensor, sink: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Where the massive activation sits. resid (B, T, d), sink (B,): the position and the channel of
    the largest |h| entry over the whole batch, and the share of sequences whose own largest |h|
    entry sits at their sink position (Sun et al. 2024: at the first token, in a few fixed channels)."""
    magnitude = resid.abs()
    _, T, d = magnitude.shape
    largest = magnitude.flatten().argmax()
    at_sink = magnitude.amax(dim=-1).argmax(dim=-1) == sink  # (B,)
    return (largest // d) % T, largest % d, at_sink.float().mean()


def key_alignment(k: torch.Tensor, sink: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """How constant keys are across sequences, per head: (at the sink, elsewhere), each (H,), of k
    (B, H, S, D), sink (B,). The mean over sequences of cos(k_b, mean over sequences of k) at each
    sequence's sink, and the same at every other position against its own mean, averaged over them.
    1 when every sequence has the same key there; a sink key near 1 while others are not is Sun et
    al.'s spike-to-sink path (the spiking token's normalised state, hence its key, barely varies)."""
    B, H, S, _ = k.shape
    rows = torch.arange(B, device=k.device)
    at_sink = k[rows, :, sink]  # (B, H, D)
    sink_cos = F.cosine_similarity(at_sink, at_sink.mean(0, keepdim=True), dim=-1).mean(0)
    others = torch.ones(B, S, dtype=torch.bool, device=k.device)
    others[rows, sink] = False
    mean = (k * others[:, None, :, None]).sum(0) / others.sum(0).clamp_min(1)[None, :, None]  # (H, S, D)
    cos = F.cosine_similarity(k, mean.expand_as(k), dim=-1)  # (B, H, S)
    rest = (cos * others[:, None]).sum((0, 2)) / others.sum().clamp_min(1)
    return sink_cos, rest
