"""Multi-head attention with the normaliser (scores -> weights) chosen from a registry.

Shape legend: B batch, H heads, T queries, S keys, D head dim (d_model / H).
    x (B, T, d_model) -> q, k, v (B, H, T|S, D) -> scores (B, H, T, S) -> weights (B, H, T, S)
      -> mixed (B, H, T, D) -> out (B, T, d_model)
`visible` (T, S) bool says which keys each query may see (the causal mask, or all True).

Each normaliser is a small function of (scores, visible). Rows of the non-normalised variants
need not sum to 1; the metrics report raw weights and the row-normalised share.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from sinkexp.model.capture import Tap


def softmax(scores: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
    return scores.masked_fill(~visible, float("-inf")).softmax(dim=-1)


def relu(scores: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
    """ReLU(s_ij) / n_i with n_i the number of keys query i sees (Guo et al. 2024, arXiv 2410.13835)."""
    n_visible = visible.sum(dim=-1, keepdim=True)                       # (T, 1)
    return relu_raw(scores, visible) / n_visible


def relu_len(scores: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
    """ReLU(s_ij) / L with L the sequence length (Wortsman et al. 2023, arXiv 2309.08586)."""
    return relu_raw(scores, visible) / visible.shape[-1]


def relu_raw(scores: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
    """ReLU(s_ij), not normalised (Ran-Milo 2026's "non-normalized ReLU attention")."""
    return F.relu(scores).masked_fill(~visible, 0.0)


NORMALISERS = {
    "softmax": softmax,
    "relu": relu,
    "relu_len": relu_len,
    "relu_raw": relu_raw,
}


class Attention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, normaliser: str, bias: bool = False):
        super().__init__()
        self.n_heads, self.d_head = n_heads, d_model // n_heads
        self.normalise = NORMALISERS[normaliser]
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)
        self.scores, self.weights, self.v, self.mixed = Tap(), Tap(), Tap(), Tap()

    def forward(self, x: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
        B, T, d_model = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_heads, self.d_head).permute(2, 0, 3, 1, 4)  # 3x (B, H, T, D)
        v = self.v(v)
        scores = self.scores(q @ k.transpose(-2, -1) * self.d_head ** -0.5)                   # (B, H, T, S)
        weights = self.weights(self.normalise(scores, visible))                              # (B, H, T, S)
        mixed = self.mixed(weights @ v)                                                      # (B, H, T, D)
        return self.out(mixed.transpose(1, 2).reshape(B, T, d_model))                        # (B, T, d_model)
