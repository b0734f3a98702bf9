"""The model types `sinkexp measure` reads, each a literal entry: where its decoder layers and
attention modules are, and its attention weights in sinkexp's layout (evaluate/metrics/):
W_Q and W_K (H * D, d_model) with one row block per query head, W_O (d_model, H * D).

Only the weights need a per-type entry (and, where the type has them, its q/k norm's gains and the
norm after the attention): the attention itself is captured for every type through transformers'
attention interface (capture.py). Grouped-query models (fewer key/value heads) get
each key head's W_K repeated for the query heads that share it, as their attention does.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Callable

import torch


@dataclass(frozen=True)
class Family:
    layers: str  # the decoder layers, an attribute path on the model's base model
    attention: str  # the attention module's attribute on a layer
    weights: Callable  # (attention module, n_heads) -> (W_Q, W_K, W_O)
    qk_gain: Callable | None = None  # (attention module) -> g_q * g_k (D,) of a q/k RMSNorm (metrics/spectrum.py)
    write: str | None = None  # the layer's module whose output the stream receives from the attention, when
    # a norm follows it (Gemma's post_attention_layernorm); None: the attention module's own output

    def layer_modules(self, model) -> list:
        return list(operator.attrgetter(self.layers)(model.base_model))

    def attention_module(self, layer):
        return getattr(layer, self.attention)


def separate(out: str) -> Callable:
    """q_proj, k_proj and an output projection named `out` (nn.Linear: weight is (out, in))."""

    def weights(attn, n_heads: int):
        keys = expand_keys(attn.k_proj.weight, attn.q_proj.weight, n_heads)
        return attn.q_proj.weight, keys, getattr(attn, out).weight

    return weights


def expand_keys(w_k: torch.Tensor, w_q: torch.Tensor, n_heads: int) -> torch.Tensor:
    """W_K with one row block per query head: key heads = H * (rows of W_K / rows of W_Q)."""
    kv_heads = n_heads * w_k.shape[0] // w_q.shape[0]
    return w_k.view(kv_heads, -1, w_k.shape[1]).repeat_interleave(n_heads // kv_heads, dim=0).reshape(w_q.shape)


def gpt2(attn, n_heads: int):
    """GPT-2's Conv1D computes x @ W + b, so its weights are the transposes of Linear's: c_attn (d, 3d)."""
    w_q, w_k, _ = attn.c_attn.weight.T.chunk(3, dim=0)
    return w_q, w_k, attn.c_proj.weight.T


def gpt_neox(attn, n_heads: int):
    """query_key_value's rows are per head, (q, k, v) within each head: (H, 3, D, d) (modeling_gpt_neox.py)."""
    w = attn.query_key_value.weight
    per_head = w.view(n_heads, 3, -1, w.shape[1])
    return per_head[:, 0].reshape(-1, w.shape[1]), per_head[:, 1].reshape(-1, w.shape[1]), attn.dense.weight


def gemma_qk_gain(attn) -> torch.Tensor:
    """Gemma's RMSNorm multiplies by (1 + weight) (modeling_gemma3.py, Gemma3RMSNorm)."""
    return (1 + attn.q_norm.weight.float()) * (1 + attn.k_norm.weight.float())


LLAMA = Family("layers", "self_attn", separate("o_proj"))
FAMILIES = {
    "llama": LLAMA,
    "mistral": LLAMA,
    "qwen2": LLAMA,
    "gpt2": Family("h", "attn", gpt2),
    "gpt_neox": Family("layers", "attention", gpt_neox),  # Pythia
    "opt": Family("decoder.layers", "self_attn", separate("out_proj")),
    # Gemma-3: Llama's projections, with a q/k RMSNorm per head and a norm on the attention's output
    # before the residual add; sliding-window layers come with their own mask (capture.py records it).
    "gemma3_text": Family(
        "layers", "self_attn", separate("o_proj"), qk_gain=gemma_qk_gain, write="post_attention_layernorm"
    ),
}
