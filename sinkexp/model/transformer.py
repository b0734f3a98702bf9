"""The block stack, configured by independent axes (norm placement and type, MLP, positions,
residual); one file for every variant.

    inputs -> embed (+ positions) -> [block] x n_layers -> (final norm) -> readout -> prediction

Capture points (see capture.py): `embed` (residual stream entering block 0), and per block
`blocks.{l}.attn.{scores,weights,v,mixed}` and `blocks.{l}.resid_post` (residual after the block).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from sinkexp.config import AttnConfig, ModelConfig
from sinkexp.model.attention import Attention
from sinkexp.model.capture import Tap


class DynamicTanh(nn.Module):
    """gamma * tanh(alpha x) + beta with a scalar alpha (init 0.5): DyT (Zhu et al. 2025, arXiv 2503.10622)."""

    def __init__(self, d_model: int, alpha: float = 0.5):
        super().__init__()
        self.alpha = nn.Parameter(torch.tensor(alpha))
        self.gamma = nn.Parameter(torch.ones(d_model))
        self.beta = nn.Parameter(torch.zeros(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.gamma * torch.tanh(self.alpha * x) + self.beta


# LayerNorm keeps its affine shift even when model.bias is off: `bias` means the Linear layers'.
NORMS = {"layernorm": nn.LayerNorm, "rmsnorm": nn.RMSNorm, "dyt": DynamicTanh}


def make_norm(kind: str, d_model: int) -> nn.Module:
    return NORMS[kind](d_model)


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


def make_mlp(kind: str, d_model: int, bias: bool) -> nn.Module | None:
    if kind == "none":
        return None
    if kind == "swiglu":
        return SwiGLU(d_model, bias)
    activation = {"gelu": nn.GELU, "relu": nn.ReLU}[kind]
    return nn.Sequential(nn.Linear(d_model, 4 * d_model, bias=bias), activation(),
                         nn.Linear(4 * d_model, d_model, bias=bias))


def sinusoidal_positions(seq_len: int, d_model: int) -> torch.Tensor:
    """The fixed sin/cos table of Vaswani et al. 2017, (seq_len, d_model)."""
    position = torch.arange(seq_len)[:, None]
    frequency = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
    table = torch.zeros(seq_len, d_model)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency[: d_model // 2])
    return table


class Block(nn.Module):
    """One attention sub-layer and an optional MLP sub-layer.

    norm placement: pre       x + f(N(x))
                    post      N(x + f(x))
                    sandwich  x + N'(f(N(x)))
                    none      x + f(x)
    With `residual=False` the `x +` is dropped (bare layers, as some tasks' theory uses).
    """

    def __init__(self, cfg: ModelConfig, attn: AttnConfig):
        super().__init__()
        self.placement, self.residual = cfg.norm, cfg.residual
        self.attn = Attention(cfg.d_model, cfg.n_heads, attn, bias=cfg.bias, qk_norm=cfg.qk_norm,
                              rope=cfg.pos == "rope")
        self.mlp = make_mlp(cfg.mlp, cfg.d_model, cfg.bias)
        n_sublayers = 1 if self.mlp is None else 2
        norm = lambda: make_norm(cfg.norm_type, cfg.d_model)  # noqa: E731
        identity = [nn.Identity() for _ in range(n_sublayers)]
        self.norms_in = nn.ModuleList([norm() for _ in range(n_sublayers)]
                                      if cfg.norm in ("pre", "sandwich") else identity)
        self.norms_out = nn.ModuleList([norm() for _ in range(n_sublayers)]
                                       if cfg.norm in ("post", "sandwich") else identity)
        self.resid_post = Tap()

    def sublayer(self, i: int, x: torch.Tensor, f) -> torch.Tensor:
        norm_in, norm_out = self.norms_in[i], self.norms_out[i]
        if self.placement == "post":
            return norm_out(x + f(x) if self.residual else f(x))
        update = norm_out(f(norm_in(x)))
        return x + update if self.residual else update

    def forward(self, x: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
        x = self.sublayer(0, x, lambda h: self.attn(h, visible))
        if self.mlp is not None:
            x = self.sublayer(1, x, self.mlp)
        return self.resid_post(x)


class Transformer(nn.Module):
    """`task` supplies input_dim or vocab_size, output_dim, seq_len, causal and has_bos.

    Registers (Darcet et al. 2023, arXiv 2309.16588): `n_registers` learned tokens inserted after
    BOS (at the front for tasks without one) and dropped before the readout. Capture points see the
    model's whole sequence; `token_positions` says where the task's tokens sit in it.
    """

    def __init__(self, cfg: ModelConfig, attn: AttnConfig, task):
        super().__init__()
        d = cfg.d_model
        self.causal = task.causal
        self.register_at, self.n_registers = (1 if task.has_bos else 0), cfg.n_registers
        self.registers = nn.Parameter(torch.randn(cfg.n_registers, d) * 0.02) if cfg.n_registers else None
        length = task.seq_len + cfg.n_registers
        if task.vocab_size is not None:
            self.embed_in = nn.Embedding(task.vocab_size, d)
        elif cfg.embed == "linear":
            self.embed_in = nn.Linear(task.input_dim, d, bias=cfg.bias)
        else:
            self.embed_in = nn.Identity()
        if cfg.pos == "learned":
            self.pos = nn.Parameter(torch.randn(length, d) * 0.02)
        elif cfg.pos == "sinusoidal":
            self.register_buffer("pos", sinusoidal_positions(length, d), persistent=False)
        else:
            self.pos = None                                                 # none, or rope inside attention
        self.bos_vector = nn.Parameter(torch.randn(d) * 0.02) if cfg.bos_vector else None
        self.embed = Tap()
        self.blocks = nn.ModuleList([Block(cfg, attn) for _ in range(cfg.n_layers)])
        self.final_norm = make_norm(cfg.norm_type, d) if cfg.final_norm else nn.Identity()
        self.readout = nn.Linear(d, task.output_dim, bias=cfg.bias) if cfg.readout == "linear" else nn.Identity()

    def use_fused_attention(self, enabled: bool) -> None:
        """Whether softmax layers may train with the fused kernel (they do by default)."""
        for block in self.blocks:
            block.attn.fusable = enabled and block.attn.fusable_by_config

    def visible(self, T: int, device) -> torch.Tensor:
        """(T, T) bool: which keys each query sees."""
        ones = torch.ones(T, T, dtype=torch.bool, device=device)
        return ones.tril() if self.causal else ones

    def token_positions(self, T: int, device=None) -> torch.Tensor:
        """(T,) indices of the task's T tokens in the model's sequence of T + n_registers."""
        position = torch.arange(T, device=device)
        return torch.where(position < self.register_at, position, position + self.n_registers)

    def register_positions(self, device=None) -> torch.Tensor:
        return torch.arange(self.register_at, self.register_at + self.n_registers, device=device)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        x = self.embed_in(inputs)                                           # (B, T, d_model)
        B, T_tokens, d = x.shape
        if self.registers is not None:
            at = self.register_at
            x = torch.cat([x[:, :at], self.registers.expand(B, -1, -1), x[:, at:]], dim=1)  # (B, T + R, d)
        T = x.shape[1]
        if self.pos is not None:
            x = x + self.pos[:T]
        if self.bos_vector is not None:
            x = torch.cat([x[:, :1] + self.bos_vector, x[:, 1:]], dim=1)
        x = self.embed(x)
        visible = self.visible(T, x.device)
        for block in self.blocks:
            x = block(x, visible)
        if self.registers is not None:
            x = x[:, self.token_positions(T_tokens, x.device)]              # (B, T_tokens, d)
        return self.readout(self.final_norm(x))                             # (B, T_tokens, output_dim)
