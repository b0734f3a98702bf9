"""A forward pass of a transformers causal LM with sinkexp's capture points, one layer at a time.

transformers sends every supported model's attention through its AttentionInterface (the
`attention_interface(self, query, key, value, attention_mask, scaling=...)` call in each
modeling file). `register()` adds an implementation named ATTENTION there: eager attention as the
models' own `eager_attention_forward` computes it (scaled scores, the additive causal mask, a
float32 softmax, weights @ values), which also hands the layer's tensors to the capture in
progress. Loading a model with `attn_implementation=ATTENTION` gives the same outputs as eager
attention (tests/hf/test_measure.py checks the logits) with sinkexp's taps:

    blocks.{l}.attn.scores   (B, H, T, S) scaled q.k before the mask (sinkexp's `scores` tap)
    blocks.{l}.attn.weights  (B, H, T, S) after the softmax
    blocks.{l}.attn.k / .v   (B, H, S, D) keys after the positions (RoPE), values; key/value heads
                             repeated for the query heads that share them (grouped-query attention)
    blocks.{l}.attn.mixed    (B, H, T, D) weights @ v
    blocks.{l}.attn.output   (B, T, d_model) what the attention writes into the stream (after W_O, and
                             after the norm that follows it where the family has one: Gemma's)
    blocks.{l}.attn.visible  (T, S) which keys each query sees, from the layer's own mask (a sliding
                             window's layers differ from the full ones); absent without a mask
    blocks.{l}.resid_post    (B, T, d_model) the layer's output (the residual stream after the block)

`layer_by_layer(model, family, on_layer)` calls on_layer(l, taps) as soon as layer l has finished
and then drops its taps, so a pass holds one layer's attention maps at a time. Taps are float32.
`intervene(model, family, {tap: fn})` replaces `blocks.{l}.attn.v`, `blocks.{l}.attn.weights` or
`blocks.{l}.resid_post` with fn(tensor) in the passes inside, as sinkexp.model.intervene does for
sinkexp's own models (analysis/lm_interventions.py).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

import torch

ATTENTION = "sinkexp"  # the attn_implementation name models are loaded with
TAP = "_sinkexp_tap"  # attribute set on an attention module while a capture is on
REPLACE = "_sinkexp_replace"  # {"v" or "weights": fn} set on an attention module while an intervention is on
REPLACEABLE = ("attn.v", "attn.weights", "resid_post")  # the taps `intervene` replaces


class NotCaptured(RuntimeError):
    """A layer finished without its attention passing through the ATTENTION implementation."""


def attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, softcap=None, **kwargs):
    """Eager attention, as transformers' eager_attention_forward; records the layer's taps when a
    capture is on. query (B, H, T, D), key and value (B, H_kv, S, D); returns ((B, T, H, D), weights)."""
    groups = query.shape[1] // key.shape[1]
    k = key.repeat_interleave(groups, dim=1)  # (B, H, S, D)
    v = value.repeat_interleave(groups, dim=1)
    replace = getattr(module, REPLACE, {})
    if "v" in replace:
        v = replace["v"](v)
    scaling = query.shape[-1] ** -0.5 if scaling is None else scaling
    scores = (query @ k.transpose(-2, -1)) * scaling  # (B, H, T, S)
    if softcap:  # Gemma-2's logit soft-capping
        scores = softcap * torch.tanh(scores / softcap)
    masked = scores if attention_mask is None else scores + attention_mask[..., : k.shape[-2]]
    weights = masked.softmax(dim=-1, dtype=torch.float32).to(query.dtype)
    if "weights" in replace:
        weights = replace["weights"](weights)
    mixed = weights @ v  # (B, H, T, D)
    tap = getattr(module, TAP, None)
    if tap is not None:
        seen = {} if attention_mask is None else {"visible": attention_mask[0, 0, :, : k.shape[-2]] == 0}
        tap(scores=scores, weights=weights, k=k, v=v, mixed=mixed, **seen)
    return mixed.transpose(1, 2).contiguous(), weights


def register() -> None:
    """Make ATTENTION a valid attn_implementation (its mask: the eager additive mask); idempotent."""
    from transformers import AttentionInterface  # lazy: transformers is the hf extra
    from transformers.masking_utils import AttentionMaskInterface, eager_mask

    AttentionInterface.register(ATTENTION, attention)
    AttentionMaskInterface.register(ATTENTION, eager_mask)


def _first(output):
    return output[0] if isinstance(output, tuple) else output


@contextmanager
def layer_by_layer(model, family, on_layer: Callable[[int, dict], None]) -> Iterator[None]:
    """During the forward passes inside, call on_layer(l, {tap name: tensor}) once layer l is done."""
    cache: dict[str, torch.Tensor] = {}
    handles, attentions = [], []

    def record(prefix: str, **tensors) -> None:
        cache.update({f"{prefix}.{name}": tensor.float() for name, tensor in tensors.items()})

    def finished(layer: int, output) -> None:
        if f"blocks.{layer}.attn.weights" not in cache:
            raise NotCaptured(
                f"layer {layer}'s attention did not go through transformers' attention interface, "
                "so its weights cannot be captured"
            )
        cache[f"blocks.{layer}.resid_post"] = _first(output).float()
        try:
            on_layer(layer, cache)
        finally:
            cache.clear()

    for layer, module in enumerate(family.layer_modules(model)):
        attn = family.attention_module(module)
        setattr(attn, TAP, lambda layer=layer, **tensors: record(f"blocks.{layer}.attn", **tensors))
        attentions.append(attn)
        write = getattr(module, family.write) if family.write else attn  # what the stream receives
        handles.append(
            write.register_forward_hook(
                lambda _, __, output, layer=layer: record(f"blocks.{layer}.attn", output=_first(output))
            )
        )
        handles.append(module.register_forward_hook(lambda _, __, output, layer=layer: finished(layer, output)))
    with removed_after(handles, attentions, TAP):
        yield


@contextmanager
def intervene(model, family, replacements: dict[str, Callable[[torch.Tensor], torch.Tensor]]) -> Iterator[None]:
    """During the forward passes inside, replace the tensor at each named tap (REPLACEABLE, e.g.
    blocks.2.attn.v) with fn(tensor); the model's weights are held fixed. A capture entered inside
    (layer_by_layer) records the replaced tensors, as sinkexp.model.capture does."""
    layers = family.layer_modules(model)
    valid = [f"blocks.{layer}.{tap}" for layer in range(len(layers)) for tap in REPLACEABLE]
    unknown = [name for name in replacements if name not in valid]
    if unknown:
        raise KeyError(
            f"unknown capture point(s) {unknown}; these can be replaced: blocks.<0..{len(layers) - 1}>."
            + ", ".join(REPLACEABLE)
        )
    handles, attentions = [], []
    for name, fn in replacements.items():
        layer, tap = int(name.split(".")[1]), name.split(".", 2)[2]
        if tap == "resid_post":  # the layer's output: what the later layers and the final norm read
            handles.append(layers[layer].register_forward_hook(lambda _, __, out, fn=fn: _replace_first(out, fn)))
        else:
            attn = family.attention_module(layers[layer])
            setattr(attn, REPLACE, {**getattr(attn, REPLACE, {}), tap.removeprefix("attn."): fn})
            attentions.append(attn)
    with removed_after(handles, attentions, REPLACE):
        yield


def _replace_first(output, fn):
    return (fn(output[0]), *output[1:]) if isinstance(output, tuple) else fn(output)


@contextmanager
def removed_after(handles: list, attentions: list, attribute: str) -> Iterator[None]:
    """Yield, then remove the hooks and the attribute set on each attention module (TAP or REPLACE)."""
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()
        for attn in attentions:
            if hasattr(attn, attribute):
                delattr(attn, attribute)
