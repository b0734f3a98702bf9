"""The block stack, configured by independent axes, each a literal registry: the norm's placement
and type, the MLP, the positions and the projections (parts.py), the attention's normaliser, slot
and gate (attention.py), and model.global_pathway, a second, non-attention route (pathway.py).

    inputs -> embed (+ positions, BOS vector) -> (embed norm) -> [block] x n_layers -> (final norm) -> readout

Capture points (see capture.py): `embed` (residual stream entering block 0), and per block
`blocks.{l}.attn.{scores,weights,k,v,mixed,output}` (k after RoPE and the q/k norm),
`blocks.{l}.pathway.{pool,output}` (with a global pathway) and `blocks.{l}.resid_post` (residual after the block).
`Transformer.anatomy` hands evaluators what they need to know about the sequence and the weights.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from sinkexp.model.attention import Attention
from sinkexp.model.capture import Tap
from sinkexp.model.parts import MLPS, NORMS, PLACEMENTS, POSITIONS, PROJECTIONS
from sinkexp.model.pathway import GLOBAL_PATHWAYS, GlobalPathway


class Block(nn.Module):
    """One attention sub-layer and an optional MLP sub-layer, combined with x as PLACEMENTS says.
    With `residual=False` the `x +` is dropped (bare layers, as some tasks' theory uses)."""

    def __init__(self, cfg, attn, fused: bool = True):
        super().__init__()
        self.residual = cfg.residual
        has_in, has_out, self.combine = PLACEMENTS[cfg.norm]
        self.attn = Attention(
            cfg.d_model,
            cfg.n_heads,
            attn,
            bias=cfg.bias,
            qk_norm=cfg.qk_norm,
            rope=cfg.pos == "rope",
            fused=fused,
            mix_heads=cfg.attn_out == "linear",
        )
        self.mlp = MLPS[cfg.mlp](cfg.d_model, cfg.bias if cfg.mlp_bias is None else cfg.mlp_bias)
        n_sublayers = 1 if self.mlp is None else 2

        def norms(wanted: bool) -> nn.ModuleList:
            return nn.ModuleList(
                [NORMS[cfg.norm_type](cfg.d_model) if wanted else nn.Identity() for _ in range(n_sublayers)]
            )

        self.norms_in, self.norms_out = norms(has_in), norms(has_out)
        self.pathway: GlobalPathway | None = None  # set by Transformer (model.global_pathway)
        self.resid_post = Tap()

    def sublayer(self, i: int, x: torch.Tensor, f) -> torch.Tensor:
        return self.combine(x, f, self.norms_in[i], self.norms_out[i], self.residual)

    def forward(self, x: torch.Tensor, visible: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        """`positions` (model.pos_into=first_attn): added to the attention's input, not to x. A global
        pathway reads the attention's input and adds its write to the attention's."""

        def attn_input(h: torch.Tensor) -> torch.Tensor:
            return self.norms_in[0](h if positions is None else h + positions)

        def attend(z: torch.Tensor) -> torch.Tensor:
            update = self.attn(z, visible)
            return update if self.pathway is None else update + self.pathway(z)

        x = self.combine(x, attend, attn_input, self.norms_out[0], self.residual)
        if self.mlp is not None:
            x = self.sublayer(1, x, self.mlp)
        return self.resid_post(x)


@dataclass
class LayerAnatomy:
    n_heads: int
    w_q: torch.Tensor  # (H * D, d_model)
    w_k: torch.Tensor  # (H * D, d_model)
    w_o: torch.Tensor  # (d_model, H * D)
    has_slot: bool  # the last key of every row is a learned slot
    has_gate: bool  # the layer has a `gates` tap
    has_pathway: bool  # the layer has a global pathway (`pathway.*` taps)
    qk_gain: torch.Tensor | None = None  # (D,) g_q * g_k of a q/k RMSNorm's gains (metrics/spectrum.py)


@dataclass
class Anatomy:
    """Where the task's T tokens sit in the model's sequence, and each layer's weights."""

    tokens: torch.Tensor  # (T,) positions of the task's tokens (registers shift them)
    registers: torch.Tensor  # (R,) positions of the registers
    n_keys: int  # T + R; a slot, when present, is key n_keys
    visible: torch.Tensor  # (T, T) bool: which of the task's tokens each query sees
    layers: list[LayerAnatomy]


class Transformer(nn.Module):
    """`task` supplies input_dim or vocab_size, output_dim, seq_len, causal and has_bos.

    Registers (Darcet et al. 2023, arXiv 2309.16588): `n_registers` learned tokens inserted after
    BOS (at the front for tasks without one) and dropped before the readout. Capture points see the
    model's whole sequence; `anatomy` says where the task's tokens sit in it. `fused` lets softmax
    layers train with PyTorch's fused kernel (see Attention).
    """

    def __init__(self, cfg, attn, task, fused: bool = True):
        super().__init__()
        d = cfg.d_model
        self.causal, self.hide_bos = task.causal, cfg.hide_bos
        self.register_at, self.n_registers = (1 if task.has_bos else 0), cfg.n_registers
        self.registers = nn.Parameter(torch.randn(cfg.n_registers, d) * 0.02) if cfg.n_registers else None
        if task.vocab_size is not None:
            self.embed_in = nn.Embedding(task.vocab_size, d)
        else:
            self.embed_in = PROJECTIONS[cfg.embed](task.input_dim, d, cfg.bias)
        self.positions = POSITIONS[cfg.pos](task.seq_len + cfg.n_registers, d, cfg.pos_init_std)
        self.pos_into = cfg.pos_into
        self.bos_vector = nn.Parameter(torch.randn(d) * 0.02) if cfg.bos_vector else None
        # model.embed_norm: no random draw at init, so the other weights are the same with or without it.
        self.embed_norm = NORMS[cfg.norm_type](d) if cfg.embed_norm else nn.Identity()
        self.embed = Tap()
        self.blocks = nn.ModuleList([Block(cfg, attn, fused) for _ in range(cfg.n_layers)])
        self.final_norm = NORMS[cfg.norm_type](d) if cfg.final_norm else nn.Identity()
        self.readout = PROJECTIONS[cfg.readout](d, task.output_dim, cfg.bias)
        self.readout.requires_grad_(not cfg.freeze_readout)  # frozen: no gradient, no update, no decay
        # Made last, so that the rest of the model starts from the same weights with or without them
        # (the source's arms of one seed share their base parameters).
        for block in self.blocks:
            block.pathway = GLOBAL_PATHWAYS[cfg.global_pathway](d)

    def visible(self, T: int, device) -> torch.Tensor:
        """(T, T) bool: which keys each query sees (model.hide_bos: no query but BOS itself sees BOS)."""
        visible = torch.ones(T, T, dtype=torch.bool, device=device)
        visible = visible.tril() if self.causal else visible
        if self.hide_bos:
            visible[1:, 0] = False
        return visible

    def token_positions(self, T: int, device=None) -> torch.Tensor:
        """(T,) indices of the task's T tokens in the model's sequence of T + n_registers."""
        position = torch.arange(T, device=device)
        return torch.where(position < self.register_at, position, position + self.n_registers)

    def register_positions(self, device=None) -> torch.Tensor:
        return torch.arange(self.register_at, self.register_at + self.n_registers, device=device)

    def anatomy(self, T: int, device=None) -> Anatomy:
        """What an evaluator needs for sequences of T task tokens."""
        tokens = self.token_positions(T, device)
        layers = [
            LayerAnatomy(
                block.attn.n_heads,
                *block.attn.projections(),
                has_slot=block.attn.slot is not None,
                has_gate=block.attn.gate is not None,
                has_pathway=block.pathway is not None,
                qk_gain=block.attn.qk_gain(),
            )
            for block in self.blocks
        ]
        return Anatomy(
            tokens=tokens,
            registers=self.register_positions(device),
            n_keys=T + self.n_registers,
            visible=self.visible(T + self.n_registers, device)[tokens][:, tokens],
            layers=layers,
        )

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        x = self.embed_in(inputs)  # (B, T, d_model)
        B, T_tokens, d = x.shape
        if self.registers is not None:
            at = self.register_at
            x = torch.cat([x[:, :at], self.registers.expand(B, -1, -1), x[:, at:]], dim=1)  # (B, T + R, d)
        T = x.shape[1]
        first_attn_positions = None
        if self.positions is not None and self.pos_into == "stream":
            x = self.positions(x)
        elif self.positions is not None:
            first_attn_positions = self.positions.table[:T]
        if self.bos_vector is not None:
            x = torch.cat([x[:, :1] + self.bos_vector, x[:, 1:]], dim=1)
        x = self.embed(self.embed_norm(x))
        visible = self.visible(T, x.device)
        for i, block in enumerate(self.blocks):
            x = block(x, visible, first_attn_positions if i == 0 else None)
        if self.registers is not None:
            x = x[:, self.token_positions(T_tokens, x.device)]  # (B, T_tokens, d)
        return self.readout(self.final_norm(x))  # (B, T_tokens, output_dim)
