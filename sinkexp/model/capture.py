"""Named capture points: identity modules that record what passes through them on request.

The model calls each `Tap` on the tensors evaluators care about (attention scores, weights,
values, the residual stream); a tap's name is its module path, e.g. `blocks.0.attn.weights`
(the TransformerLens hook-name idea). Outside `capture(...)` a tap costs one attribute check, so
training and evaluation share one forward pass: there is no separate "analysis forward" to drift.

    with capture(model, ["blocks.0.attn.weights"]) as cache:
        model(inputs)
    cache["blocks.0.attn.weights"]   # (B, H, T, S)
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterable, Iterator

import torch
from torch import nn


class Tap(nn.Module):
    def __init__(self):
        super().__init__()
        self.cache: dict | None = None
        self.key = ""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.cache is not None:
            self.cache[self.key] = x
        return x


def tap_names(model: nn.Module) -> list[str]:
    return [name for name, module in model.named_modules() if isinstance(module, Tap)]


@contextmanager
def capture(model: nn.Module, names: Iterable[str] | None = None) -> Iterator[dict]:
    """Record the named taps (all taps when `names` is None) during the forward passes inside."""
    taps = {name: module for name, module in model.named_modules() if isinstance(module, Tap)}
    wanted = list(taps) if names is None else list(names)
    unknown = [name for name in wanted if name not in taps]
    if unknown:
        raise KeyError(f"unknown capture point(s) {unknown}; available: {', '.join(taps)}")
    cache: dict[str, torch.Tensor] = {}
    for name in wanted:
        taps[name].key, taps[name].cache = name, cache
    try:
        yield cache
    finally:
        for tap in taps.values():
            tap.cache = None
