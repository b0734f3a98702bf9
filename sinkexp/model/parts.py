"""The model's parts, one literal registry per axis (a new variant is one entry):

  model.norm       PLACEMENTS   where the norm sits: pre | post | sandwich | none
  model.norm_type  NORMS        layernorm | rmsnorm | dyt
  model.mlp        MLPS         none | gelu | relu | swiglu
  model.pos        POSITIONS    learned | sinusoidal | rope | none
  model.pos_into   POSITION_TARGETS   stream | first_attn: where added positions enter
  model.embed / model.readout   PROJECTIONS   linear | identity

transformer.py puts them together (the attention's axes: attention.py; the global pathway: pathway.py).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class DynamicTanh(nn.Module):
    """gamma * tanh(alpha x) + beta with a scalar alpha (init 0.5): DyT (Zhu et al. 2025, arXiv 2503.10622)."""

    def __init__(self, d_model: int, alpha: float = 0.5):
        super().__init__()
        self.alpha = nn.Parameter(torch.tensor(alpha))
        self.gamma = nn.Parameter(torch.ones(d_model))
        self.beta = nn.Parameter(torch.zeros(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.gamma * torch.tanh(self.alpha * x) + self.beta


# norm type -> (d_model) -> module. LayerNorm keeps its affine shift even when model.bias is off:
# `bias` means the Linear layers'.
NORMS = {"layernorm": nn.LayerNorm, "rmsnorm": nn.RMSNorm, "dyt": DynamicTanh}


class SwiGLU(nn.Module):
    """W_2 (SiLU(W_1 x) * W_3 x), hidden 8/3 d so the parameter count matches a 4d MLP (Shazeer 2020)."""

    def __init__(self, d_model: int, bias: bool):
        super().__init__()
        hidden = int(8 * d_model / 3)
        self.w1 = nn.Linear(d_model, hidden, bias=bias)
        self.w3 = nn.Linear(d_model, hidden, bias=bias)
        self.w2 = nn.Linear(hidden, d_model, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


def two_layer_mlp(activation):
    def make(d_model: int, bias: bool) -> nn.Module:
        return nn.Sequential(
            nn.Linear(d_model, 4 * d_model, bias=bias), activation(), nn.Linear(4 * d_model, d_model, bias=bias)
        )

    return make


# mlp -> (d_model, bias) -> module or None
MLPS = {
    "none": lambda d_model, bias: None,
    "gelu": two_layer_mlp(nn.GELU),
    "relu": two_layer_mlp(nn.ReLU),
    "swiglu": SwiGLU,
}


def sinusoidal_table(seq_len: int, d_model: int) -> torch.Tensor:
    """The fixed sin/cos table of Vaswani et al. 2017, (seq_len, d_model)."""
    position = torch.arange(seq_len)[:, None]
    frequency = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
    table = torch.zeros(seq_len, d_model)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency[: d_model // 2])
    return table


class AddedPositions(nn.Module):
    """x + table[:T]; the table is learned (a parameter) or fixed (a buffer, not saved)."""

    def __init__(self, table: torch.Tensor, learned: bool):
        super().__init__()
        if learned:
            self.table = nn.Parameter(table)
        else:
            self.register_buffer("table", table, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.table[: x.shape[1]]


# pos -> (length, d_model, init_std) -> module or None (init_std: the learned table's N(0, std^2)).
# rope adds nothing to the stream: Attention rotates q and k.
POSITIONS = {
    "learned": lambda length, d, std: AddedPositions(torch.randn(length, d) * std, learned=True),
    "sinusoidal": lambda length, d, std: AddedPositions(sinusoidal_table(length, d), learned=False),
    "rope": lambda length, d, std: None,
    "none": lambda length, d, std: None,
}

# pos_into -> what it means. `first_attn` (Fesser et al.'s broadcast source): the positions are added
# to the first attention's input, before its norm, and never to the residual stream, so no later
# layer and no identity readout sees them.
POSITION_TARGETS = {
    "stream": "added to the residual stream after the embedding",
    "first_attn": "added to block 0's attention input only (before its norm)",
}

# embed / readout -> (n_in, n_out, bias) -> module
PROJECTIONS = {
    "linear": lambda n_in, n_out, bias: nn.Linear(n_in, n_out, bias=bias),
    "identity": lambda n_in, n_out, bias: nn.Identity(),
}


def norm_first(x, f, norm_in, norm_out, residual: bool) -> torch.Tensor:
    """pre x + f(N(x)); sandwich x + N'(f(N(x))); none x + f(x) (an absent norm is the identity)."""
    update = norm_out(f(norm_in(x)))
    return x + update if residual else update


def norm_after(x, f, norm_in, norm_out, residual: bool) -> torch.Tensor:
    """post N(x + f(x)) (norm_in is the identity here, unless positions enter the input)."""
    update = f(norm_in(x))
    return norm_out(x + update if residual else update)


# norm placement -> (norm before the sub-layer, norm after it, how the sub-layer updates x)
PLACEMENTS = {
    "pre": (True, False, norm_first),
    "post": (False, True, norm_after),
    "sandwich": (True, True, norm_first),
    "none": (False, False, norm_first),
}
