"""Fesser et al.'s global pathway: a second, non-attention route for global information beside
each attention (model.global_pathway), so that attention need not broadcast through a sink."""

from __future__ import annotations

import torch
from torch import nn

from sinkexp.model.capture import Tap


class GlobalPathway(nn.Module):
    """Fesser et al. 2026 (arXiv 2606.08105), Eq. 4: a route for global information that is not attention.

    From the attention's own (normalised) input z: pool pi_j = softmax_j(z_j . w_P) over the
    sequence, state g = sum_j pi_j W_VG z_j, and write gamma_i W_OG g at every token i, with the
    recipient gate gamma_i = sigmoid(z_i . w_gamma + b_gamma) (`learned`, b_gamma = 0 at init) or 1
    (`fixed`). Weights N(0, 0.02^2) (the source's trunc_normal_(std=0.02), cut at +-2), no biases but
    the gate's, as in the source (Kempner toy/global_pathway/common.py). The pool sees every token, so
    only bidirectional tasks may use it (config validation refuses causal ones).
    """

    def __init__(self, d_model: int, gate: str, state_dim: int | None = None):
        super().__init__()
        state_dim = state_dim or d_model
        self.w_p = nn.Linear(d_model, 1, bias=False)
        self.w_vg = nn.Linear(d_model, state_dim, bias=False)
        self.w_og = nn.Linear(state_dim, d_model, bias=False)
        self.gate = nn.Linear(d_model, 1) if gate == "learned" else None
        for linear in (self.w_p, self.w_vg, self.w_og, self.gate):
            if linear is not None:
                nn.init.trunc_normal_(linear.weight, std=0.02)
        if self.gate is not None:
            nn.init.zeros_(self.gate.bias)  # gamma = 1/2 at init
        self.pool, self.output = Tap(), Tap()

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        pool = self.pool(self.w_p(z).squeeze(-1).softmax(dim=-1))  # (B, T)
        state = torch.einsum("bt,bte->be", pool, self.w_vg(z))  # (B, state_dim)
        gamma = 1.0 if self.gate is None else torch.sigmoid(self.gate(z))  # (B, T, 1)
        return self.output(gamma * self.w_og(state)[:, None])  # (B, T, d_model)


# global_pathway -> (d_model) -> module or None
GLOBAL_PATHWAYS = {
    "none": lambda d_model: None,
    "learned": lambda d_model: GlobalPathway(d_model, gate="learned"),
    "fixed": lambda d_model: GlobalPathway(d_model, gate="fixed"),
}
