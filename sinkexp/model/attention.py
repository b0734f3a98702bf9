"""Multi-head attention whose sink-relevant choices are independent axes, each a literal registry:

  normaliser  scores -> weights            NORMALISERS: softmax, relu, sigmoid, softmax1, ...
  slot        an extra learned key/value   SLOTS: none | learned (Gu et al. 2025; Sun et al. 2024)
  gate        output gate before W_O       GATES: none | headwise | elementwise (Qiu et al. 2025)
  qk_norm     RMSNorm on q and k per head; rope: rotary positions on q and k (Su et al. 2021)

Shape legend: B batch, H heads, T queries, S keys, D head dim (d_model / H).
    x (B, T, d_model) -> q, k, v (B, H, T|S, D) -> scores (B, H, T, S[+1]) -> weights (B, H, T, S[+1])
      -> mixed (B, H, T, D) -> output (B, T, d_model)
`visible` (T, S) bool says which keys each query may see (the causal mask, or all True). A slot,
when present, is the last key (index S) and every query sees it. Rows of the non-normalised
variants need not sum to 1; the metrics report raw weights and the row-normalised share.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from sinkexp.model.capture import Tap

# Every normaliser is f(scores (B, H, T, S), visible (T, S), attn: AttnConfig) -> weights (B, H, T, S);
# `attn` carries a variant's own settings (only the sigmoids have one so far: attn.sigmoid_bias).


def softmax(scores: torch.Tensor, visible: torch.Tensor, attn=None) -> torch.Tensor:
    return scores.masked_fill(~visible, float("-inf")).softmax(dim=-1)


def relu(scores: torch.Tensor, visible: torch.Tensor, attn=None) -> torch.Tensor:
    """ReLU(s_ij) / n_i with n_i the number of keys query i sees (Guo et al. 2024, arXiv 2410.13835)."""
    n_visible = visible.sum(dim=-1, keepdim=True)  # (T, 1)
    return relu_raw(scores, visible) / n_visible


def relu_len(scores: torch.Tensor, visible: torch.Tensor, attn=None) -> torch.Tensor:
    """ReLU(s_ij) / L with L the sequence length (Wortsman et al. 2023, arXiv 2309.08586)."""
    return relu_raw(scores, visible) / visible.shape[-1]


def relu_raw(scores: torch.Tensor, visible: torch.Tensor, attn=None) -> torch.Tensor:
    """ReLU(s_ij), not normalised (Ran-Milo 2026's "non-normalized ReLU attention")."""
    return F.relu(scores).masked_fill(~visible, 0.0)


def sigmoid(scores: torch.Tensor, visible: torch.Tensor, attn=None) -> torch.Tensor:
    """sigma(s_ij + b), b = attn.sigmoid_bias, by default -log(L) (Ramapuram et al. 2024, arXiv 2409.04431)."""
    bias = getattr(attn, "sigmoid_bias", None)
    b = -math.log(visible.shape[-1]) if bias is None else bias
    return torch.sigmoid(scores + b).masked_fill(~visible, 0.0)


def sigmoid_norm(scores: torch.Tensor, visible: torch.Tensor, attn=None) -> torch.Tensor:
    """sigma(s_ij + b) / sum_j sigma(s_ij + b): sigmoid with row normalisation (Gu et al. 2025's
    `attention_normalize=True`, sail-sg/Attention-Sink lit_gpt/model_attn_sim.py); b as in `sigmoid`."""
    weights = sigmoid(scores, visible, attn)
    return weights / weights.sum(dim=-1, keepdim=True)  # > 0: sigmoid never reaches 0


def softmax1(scores: torch.Tensor, visible: torch.Tensor, attn=None) -> torch.Tensor:
    """e^{s_ij} / (1 + sum_j e^{s_ij}): softmax with an extra zero logit (Miller 2023, "off by one")."""
    masked = scores.masked_fill(~visible, float("-inf"))
    shift = masked.amax(dim=-1, keepdim=True).clamp_min(0.0)  # the zero logit joins the max
    numerator = (masked - shift).exp()
    return numerator / ((-shift).exp() + numerator.sum(dim=-1, keepdim=True))


def softpick(scores: torch.Tensor, visible: torch.Tensor, attn=None) -> torch.Tensor:
    """ReLU(e^{s_ij} - 1) / sum_j |e^{s_ij} - 1| over visible keys (Zuhri et al. 2025, arXiv 2504.20966).

    Computed as ReLU(e^{s-m} - e^{-m}) / sum |e^{s-m} - e^{-m}| (the factor e^m cancels); 0/0 := 0.
    """
    shift = scores.masked_fill(~visible, float("-inf")).amax(dim=-1, keepdim=True).clamp_min(0.0)
    shifted = ((scores - shift).exp() - (-shift).exp()).masked_fill(~visible, 0.0)
    total = shifted.abs().sum(dim=-1, keepdim=True)
    return F.relu(shifted) / total.clamp_min(torch.finfo(scores.dtype).tiny)


NORMALISERS = {
    "softmax": softmax,
    "relu": relu,
    "relu_len": relu_len,
    "relu_raw": relu_raw,
    "sigmoid": sigmoid,
    "sigmoid_norm": sigmoid_norm,
    "softmax1": softmax1,
    "softpick": softpick,
}


class LearnedSlot(nn.Module):
    """A key and a value per head that every query sees, appended after the last key."""

    def __init__(self, n_heads: int, d_head: int):
        super().__init__()
        self.k = nn.Parameter(torch.randn(n_heads, 1, d_head) * 0.02)
        self.v = nn.Parameter(torch.randn(n_heads, 1, d_head) * 0.02)


# slot name -> (n_heads, d_head) -> module or None
SLOTS = {"none": lambda n_heads, d_head: None, "learned": LearnedSlot}
# gate name -> (n_heads, d_head) -> gate outputs per token (0: no gate)
GATES = {
    "none": lambda n_heads, d_head: 0,
    "headwise": lambda n_heads, d_head: n_heads,
    "elementwise": lambda n_heads, d_head: n_heads * d_head,
}


def rotary(x: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """Rotate channel pairs (i, i + D/2) of x (B, H, T, D) by position-dependent angles (RoPE)."""
    T, D = x.shape[-2], x.shape[-1]
    frequency = base ** (-torch.arange(0, D // 2, device=x.device, dtype=x.dtype) * 2 / D)
    angle = torch.arange(T, device=x.device, dtype=x.dtype)[:, None] * frequency  # (T, D/2)
    cos, sin = angle.cos(), angle.sin()
    first, second = x[..., : D // 2], x[..., D // 2 :]
    return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)


class Attention(nn.Module):
    """`fused=True` lets plain softmax attention run as PyTorch's fused kernel whenever nobody
    captures or replaces its scores or weights (training steps); evaluation captures them and takes
    the explicit path. Other normalisers, and a slot, always take the explicit path."""

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        attn,
        *,
        bias: bool = False,
        qk_norm: bool = False,
        rope: bool = False,
        fused: bool = True,
        mix_heads: bool = True,
    ):
        super().__init__()
        self.cfg = attn
        self.n_heads, self.d_head = n_heads, d_model // n_heads
        self.normalise = NORMALISERS[attn.normaliser]
        self.rope = rope
        self.fused = fused and attn.normaliser == "softmax" and attn.slot == "none"
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        # W_O mixes the heads' outputs; without it (model.attn_out=identity) head h writes only its own
        # slice of the stream, so a linear readout after it is one readout per head, summed.
        self.out = nn.Linear(d_model, d_model, bias=bias) if mix_heads else nn.Identity()
        self.q_norm = nn.RMSNorm(self.d_head) if qk_norm else nn.Identity()
        self.k_norm = nn.RMSNorm(self.d_head) if qk_norm else nn.Identity()
        self.slot = SLOTS[attn.slot](n_heads, self.d_head)
        n_gates = GATES[attn.gate](n_heads, self.d_head)
        # The gate has a bias so that it can sit fully open or shut (sigma(+-inf)), as in Qiu et al.
        self.gate = nn.Linear(d_model, n_gates) if n_gates else None
        self.gates = Tap() if n_gates else None
        self.scores, self.weights, self.k, self.v, self.mixed = Tap(), Tap(), Tap(), Tap(), Tap()
        self.output = Tap()  # what the sub-layer writes, W_O A V (B, T, d_model)

    def projections(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(W_Q, W_K, W_O) weights: W_Q and W_K (H * D, d_model), W_O (d_model, H * D)."""
        w_q, w_k, _ = self.qkv.weight.chunk(3, dim=0)
        w_o = self.out.weight if isinstance(self.out, nn.Linear) else torch.eye(w_q.shape[1], device=w_q.device)
        return w_q, w_k, w_o

    def qk_gain(self) -> torch.Tensor | None:
        """g_q * g_k (D,) of the q/k norm's gains, None without one (metrics/spectrum.py)."""
        if not isinstance(self.q_norm, nn.RMSNorm):
            return None
        return (self.q_norm.weight * self.k_norm.weight).detach()

    def forward(self, x: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
        B, T, d_model = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_heads, self.d_head).permute(2, 0, 3, 1, 4)  # 3x (B, H, T, D)
        q, k = self.q_norm(q), self.k_norm(k)
        if self.rope:
            q, k = rotary(q), rotary(k)
        k, v = self.k(k), self.v(v)
        if self.fused and not (self.scores.active or self.weights.active):
            mixed = F.scaled_dot_product_attention(q, k, v, attn_mask=visible)  # (B, H, T, D)
        else:
            mixed = self.explicit(q, k, v, visible)
        if self.gate is not None:
            gates = torch.sigmoid(self.gate(x)).view(B, T, self.n_heads, -1).transpose(1, 2)  # (B, H, T, 1|D)
            mixed = mixed * self.gates(gates)
        mixed = self.mixed(mixed)
        return self.output(self.out(mixed.transpose(1, 2).reshape(B, T, d_model)))  # (B, T, d_model)

    def explicit(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
        """scores -> normaliser -> weights -> mixed, with the scores and weights taps."""
        T = q.shape[2]
        scores = q @ k.transpose(-2, -1)  # (B, H, T, S)
        if self.slot is not None:
            slot_scores = q @ self.slot.k.transpose(-2, -1)  # (B, H, T, 1)
            scores = torch.cat([scores, slot_scores], dim=-1)  # (B, H, T, S+1)
            visible = torch.cat([visible, visible.new_ones(T, 1)], dim=-1)
        scores = self.scores(scores * self.d_head**-0.5)
        weights = self.weights(self.normalise(scores, visible, self.cfg))
        mixed = weights[..., :T] @ v  # (B, H, T, D)
        if self.slot is not None:
            # slot's share of its value
            mixed = mixed + weights[..., T:] * self.slot.v
        return mixed
