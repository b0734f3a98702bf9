"""Conditional damping, the adaptive no-op (Fesser et al. 2026, arXiv 2606.08105).

Token 0 is a dedicated sink token: a zero input to which the model adds a learned vector
(`model.bos_vector`). Tokens 1..L-1 carry x_i ~ N(0, I_d). A fixed unit gate vector v decides
which tokens are damped (drawn with mean 0 over the channels, `task.centred`, so that the
LayerNorm the model reads through sees all of it; see tasks.base.direction):
m_i = 1[<x_i, v> > lambda], lambda = Phi^-1(1 - p), so a share p of the tokens is damped.
Target y_i = (1 - m_i) x_i + m_i gamma x_i. The model predicts y_hat = x + W_O A V (residual on
the raw x), so where m_i = 0 the head must add nothing (`nop`
queries): a softmax head does that by attending to the sink token, whose value it can shrink.
Where m_i = 1 (`active` queries) it must add (gamma - 1) x_i.

A tiny example with d = 2, v = (1, 0), p = 0.5 (lambda = 0), gamma = 0:

    position     0 (sink)   1          2           3
    inputs       [0, 0]     [0.5, 1]   [-1, 2]     [2, -1]
    m            -          1          0           1
    targets      [0, 0]     [0, 0]     [-1, 2]     [0, 0]
    query_type   -1         active     nop         active

Loss: MSE over positions >= 1 (mean over channels). The reference predictor is the identity
(y_hat = x, what the residual gives when the head adds nothing).

Two forms, one per source notebook (Kempner toy/notebooks/):
- `task.form=causal` (noop_causal_intervention.ipynb, Fesser et al. App. A.1 / Eqs. 6-7): as above.
- `task.form=dynamics` (noop_dynamics.ipynb, the gamma and NOP-frequency sweeps of Figs. 2B, 11):
  token 0 is an ordinary N(0, I) token (the model adds its learned vector to it), every position
  counts in the loss and has a query type, and the model's residual is the normalised input,
  y_hat = LN(x + pos + bos) + W_O A V (configs/task/damping_dynamics.yaml sets that model). The
  targets still use the raw x, so even a no-op token asks the head for LN(x) - x.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import NormalDist

from sinkexp.errors import ConfigError
from sinkexp.tasks.base import Batch, Dims, direction, mse
from sinkexp.tasks.lazy import torch

NOP, ACTIVE = 0, 1
FORMS = ("causal", "dynamics")


@dataclass
class DampingConfig:
    name: str = "damping"
    seq_len: int = 32  # L, the sink token included
    d: int = 64
    p: float = 0.5  # share of damped tokens; lambda = Phi^-1(1 - p)
    gamma: float = 0.0  # damped tokens' target is gamma * x
    structure_seed: int = 0  # draws the gate vector v
    centred: bool = True  # v has mean 0 over the channels (False: the first release's raw draw)
    form: str = "causal"  # causal | dynamics: which source notebook's task (see the module docstring)


class DampingTask:
    Config = DampingConfig
    query_types = ("nop", "active")
    causal = False
    vocab_size = None
    has_bos = True  # registers go after position 0 when True
    # settings that change the data only: a pack may vary them (train/replicas.py)
    packable = ("p", "gamma", "structure_seed")
    reference = "identity predictor (the head adds nothing)"

    def __init__(self, cfg: DampingConfig):
        self.cfg = cfg
        self.seq_len, self.input_dim, self.output_dim = cfg.seq_len, cfg.d, cfg.d
        self.gate = direction(cfg.d, torch.Generator().manual_seed(cfg.structure_seed), cfg.centred)
        self.threshold = NormalDist().inv_cdf(1 - cfg.p)

    @staticmethod
    def dims(cfg: DampingConfig) -> Dims:
        return Dims(cfg.seq_len, input_dim=cfg.d, vocab_size=None, output_dim=cfg.d, structure=cfg.d)

    @staticmethod
    def validate(cfg: DampingConfig) -> None:
        if cfg.seq_len < 2:
            raise ConfigError(f"task.seq_len={cfg.seq_len} is not valid; it must be >= 2 (sink + one token)")
        if cfg.form not in FORMS:
            raise ConfigError(f"task.form={cfg.form} is not valid; choose one of: {', '.join(FORMS)}")
        if not 0.0 < cfg.p < 1.0:
            raise ConfigError(f"task.p={cfg.p} is not valid; it must lie in (0, 1)")
        if cfg.d < 1 + cfg.centred:
            raise ConfigError(
                f"task.d={cfg.d} is not valid; it must be >= {1 + cfg.centred}"
                + (" (a centred direction needs 2 channels; task.centred=false allows 1)" if cfg.centred else "")
            )

    def sample(self, batch_size: int, generator: torch.Generator, device) -> Batch:
        B, L, d = batch_size, self.seq_len, self.cfg.d
        causal = self.cfg.form == "causal"
        x = torch.randn(B, L, d, generator=generator, device=device)
        if causal:
            x[:, 0] = 0.0  # the sink token's input
        if self.gate.device != x.device:
            self.gate = self.gate.to(x.device)  # once per device, not per batch
        damped = (x @ self.gate) > self.threshold  # (B, L)
        if causal:
            damped[:, 0] = False
        targets = x * torch.where(damped, self.cfg.gamma, 1.0)[..., None]  # one product, no gamma * x copy
        query_type = damped.long()  # ACTIVE = 1, NOP = 0
        if causal:
            query_type[:, 0] = -1
        return Batch(
            inputs=x,
            targets=targets,
            loss_mask=query_type >= 0,
            query_type=query_type,
            sink=torch.zeros(B, dtype=torch.long, device=device),
        )

    def loss(self, pred: torch.Tensor, batch: Batch) -> torch.Tensor:
        return mse(pred, batch.targets)

    def baseline_loss(self, batch: Batch) -> torch.Tensor:
        return self.loss(batch.inputs, batch)
