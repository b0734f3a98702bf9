"""Global broadcast (Fesser et al. 2026, arXiv 2606.08105).

x_i ~ N(0, I_d) at every position, no BOS. A fixed unit vector u (mean 0 over the channels,
`task.centred`, so that the model's LayerNorm sees all of it; see tasks.base.direction) picks the hub of each sequence,
j* = argmax_j <x_j, u>, and every position must receive a fixed rotation of the hub's vector:
y_i = x_i + alpha x_{j*} R, with R a fixed orthogonal matrix (QR of a Gaussian). The sink of each
sequence is j* (content-defined, not positional): every sink metric uses it.

A tiny example with d = 2, u = (1, 0), R = [[0, 1], [-1, 0]] (x R rotates), alpha = 1:

    position     0          1          2
    inputs       [0.5, 1]   [2, -1]    [-1, 0]      j* = 1 (largest first coordinate)
    x_{j*} R     [1, 2]     [1, 2]     [1, 2]
    targets      [1.5, 3]   [3, 1]     [0, 2]

Loss: MSE over every position (mean over channels); query type `all_positions`. The reference
predictor is the identity (y_hat = x), whose loss is alpha^2 |x_{j*}|^2 / d.
"""

from __future__ import annotations

from dataclasses import dataclass

from sinkexp.errors import ConfigError
from sinkexp.tasks.base import Batch, Dims, direction, mse
from sinkexp.tasks.lazy import torch


@dataclass
class BroadcastConfig:
    name: str = "broadcast"
    seq_len: int = 32
    d: int = 64
    alpha: float = 1.0
    structure_seed: int = 0  # draws u and R
    centred: bool = True  # u has mean 0 over the channels (False: the first release's raw draw)


class BroadcastTask:
    Config = BroadcastConfig
    query_types = ("all_positions",)
    causal = False
    vocab_size = None
    has_bos = False  # registers go after position 0 when True
    # settings that change the data only: a pack may vary them (train/replicas.py)
    packable = ("alpha", "structure_seed")
    reference = "identity predictor (the heads add nothing)"

    def __init__(self, cfg: BroadcastConfig):
        self.cfg = cfg
        self.seq_len, self.input_dim, self.output_dim = cfg.seq_len, cfg.d, cfg.d
        generator = torch.Generator().manual_seed(cfg.structure_seed)
        self.hub_direction = direction(cfg.d, generator, cfg.centred)
        q, r = torch.linalg.qr(torch.randn(cfg.d, cfg.d, generator=generator))
        self.rotation = q * torch.sign(torch.diagonal(r))  # sign fix: Haar-distributed, deterministic

    @staticmethod
    def dims(cfg: BroadcastConfig) -> Dims:
        return Dims(cfg.seq_len, input_dim=cfg.d, vocab_size=None, output_dim=cfg.d, structure=cfg.d * cfg.d + cfg.d)

    @staticmethod
    def validate(cfg: BroadcastConfig) -> None:
        if cfg.seq_len < 2:
            raise ConfigError(f"task.seq_len={cfg.seq_len} is not valid; it must be >= 2")
        if cfg.d < 1 + cfg.centred:
            raise ConfigError(
                f"task.d={cfg.d} is not valid; it must be >= {1 + cfg.centred}"
                + (" (a centred direction needs 2 channels; task.centred=false allows 1)" if cfg.centred else "")
            )

    def sample(self, batch_size: int, generator: torch.Generator, device) -> Batch:
        B, L, d = batch_size, self.seq_len, self.cfg.d
        x = torch.randn(B, L, d, generator=generator, device=device)
        if self.rotation.device != x.device:  # once per device
            self.hub_direction, self.rotation = self.hub_direction.to(x.device), self.rotation.to(x.device)
        hub = (x @ self.hub_direction).argmax(dim=1)  # (B,)
        hub_vector = x[torch.arange(B, device=device), hub]  # (B, d)
        targets = x + self.cfg.alpha * (hub_vector @ self.rotation)[:, None, :]
        return Batch(
            inputs=x,
            targets=targets,
            loss_mask=torch.ones(B, L, dtype=torch.bool, device=device),
            query_type=torch.zeros(B, L, dtype=torch.long, device=device),
            sink=hub,
        )

    def loss(self, pred: torch.Tensor, batch: Batch) -> torch.Tensor:
        return mse(pred, batch.targets)

    def baseline_loss(self, batch: Batch) -> torch.Tensor:
        return self.loss(batch.inputs, batch)
