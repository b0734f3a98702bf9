"""Named capture points: identity modules that record, or replace, what passes through them on request.

The model calls each `Tap` on the tensors evaluators care about (attention scores, weights,
values, the residual stream); a tap's name is its module path, e.g. `blocks.0.attn.weights`
(the TransformerLens hook-name idea). Outside `capture(...)` and `intervene(...)` a tap costs two
attribute checks, so training, evaluation and interventions share one forward pass: there is no
separate "analysis forward" to drift.

    with capture(model, ["blocks.0.attn.weights"]) as cache:
        model(inputs)
    cache["blocks.0.attn.weights"]   # (B, H, T, S)

    with intervene(model, {"blocks.0.attn.v": lambda v: v * 0}):   # the forward pass with v replaced
        model(inputs)

An intervention replaces the tensor for everything downstream of its tap (and what `capture`
records there); the weights of the model are held fixed.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterable, Iterator

import torch
from torch import nn


class Tap(nn.Module):
    def __init__(self):
        super().__init__()
        self.cache: dict | None = None
        self.key = ""
        self.replace: Callable[[torch.Tensor], torch.Tensor] | None = None

    @property
    def active(self) -> bool:
        """Whether this forward pass must materialise the tensor (captured or replaced)."""
        return self.cache is not None or self.replace is not None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.replace is not None:
            x = self.replace(x)
        if self.cache is not None:
            self.cache[self.key] = x
        return x


def tap_names(model: nn.Module) -> list[str]:
    return [name for name, module in model.named_modules() if isinstance(module, Tap)]


def _taps(model: nn.Module, wanted: Iterable[str]) -> dict[str, Tap]:
    taps = {name: module for name, module in model.named_modules() if isinstance(module, Tap)}
    unknown = [name for name in wanted if name not in taps]
    if unknown:
        raise KeyError(f"unknown capture point(s) {unknown}; available: {', '.join(taps)}")
    return taps


@contextmanager
def intervene(model: nn.Module, replacements: dict[str, Callable[[torch.Tensor], torch.Tensor]]) -> Iterator[None]:
    """Replace the tensor at each named tap with fn(tensor) during the forward passes inside."""
    taps = _taps(model, replacements)
    for name, fn in replacements.items():
        taps[name].replace = fn
    try:
        yield
    finally:
        for name in replacements:
            taps[name].replace = None


@contextmanager
def capture(model: nn.Module, names: Iterable[str] | None = None) -> Iterator[dict]:
    """Record the named taps (all taps when `names` is None) during the forward passes inside."""
    names = None if names is None else list(names)
    taps = _taps(model, names or [])
    wanted = list(taps) if names is None else names
    cache: dict[str, torch.Tensor] = {}
    for name in wanted:
        taps[name].key, taps[name].cache = name, cache
    try:
        yield cache
    finally:
        for tap in taps.values():
            tap.cache = None
