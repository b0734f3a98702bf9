"""Trigger-conditional mean (Ran-Milo 2026, arXiv 2603.11487, section 3).

Position 0 is BOS. Every other position is a content token carrying z_i ~ N(0, I_{d_x}) or a
trigger token. At a trigger j the target is the mean of z_i over the content tokens 1 <= i < j;
at every other position the target is the zero vector. A softmax head can only output "nothing"
by parking its attention on a key whose value is zero, which is why the paper proves it must sink;
ReLU attention can output nothing by attending to nothing.

Input channels: [z (d_x) | BOS flag | trigger flag]. BOS and trigger tokens carry z = 0, so
"content token" means "neither flag set". A tiny example with L = 5, d_x = 2 and a trigger at 3:

    position     0 (BOS)     1            2            3 (trigger)   4
    inputs       [0,0,1,0]   [1,0,0,0]    [0,2,0,0]    [0,0,0,1]     [3,3,0,0]
    targets      [0,0]       [0,0]        [0,0]        [0.5,1]       [0,0]
    query_type   -1          non_trigger  non_trigger  trigger       non_trigger

Loss: MSE (mean over the d_x channels) at positions >= 1, reported per query type. The reference
predictor is the zero vector: its loss is exactly 0 at non-trigger queries and E|mean|^2 / d_x
= 1/(number of preceding content tokens) at trigger queries.
"""

from __future__ import annotations

from dataclasses import dataclass

from sinkexp.errors import ConfigError, choices_error
from sinkexp.tasks.base import Batch, Dims, mse
from sinkexp.tasks.lazy import torch

TRIGGER, NON_TRIGGER = 0, 1  # indices into TriggerTask.query_types
MODES = ("single", "bernoulli")


def cumsum_in_order(x: torch.Tensor, dim: int) -> torch.Tensor:
    """torch.cumsum(x, dim), also in deterministic mode on CUDA, where torch refuses every floating
    cumsum because its one-dimensional path (a cub scan) is not deterministic (pytorch/pytorch#75240).
    Along a dimension of a tensor with more than one row, ATen scans each row in one thread, adding
    in order (ScanUtils.cuh: scan_outer_dim, scan_innermost_dim): deterministic, so it is allowed."""
    if not (
        x.is_cuda
        and x.is_floating_point()
        and x.numel() != x.size(dim)
        and torch.are_deterministic_algorithms_enabled()
    ):
        return torch.cumsum(x, dim)
    mode = torch.get_deterministic_debug_mode()
    torch.set_deterministic_debug_mode(0)
    try:
        return torch.cumsum(x, dim)
    finally:
        torch.set_deterministic_debug_mode(mode)


@dataclass
class TriggerConfig:
    name: str = "trigger"
    seq_len: int = 32  # L, BOS included
    d_x: int = 16
    p_trigger: float = 0.5
    # single: with probability p_trigger one trigger at a uniform position in [2, L-1];
    # bernoulli: every position in [2, L-1] is a trigger with probability p_trigger.
    mode: str = "single"


class TriggerTask:
    Config = TriggerConfig
    query_types = ("trigger", "non_trigger")
    causal = True
    vocab_size = None
    has_bos = True  # registers go after position 0 when True
    reference = "zero predictor"
    packable = ("p_trigger",)  # settings that change the data only: a pack may vary them (train/replicas.py)

    def __init__(self, cfg: TriggerConfig):
        self.cfg = cfg
        self.seq_len = cfg.seq_len
        self.input_dim = cfg.d_x + 2
        self.output_dim = cfg.d_x

    @staticmethod
    def dims(cfg: TriggerConfig) -> Dims:
        return Dims(cfg.seq_len, input_dim=cfg.d_x + 2, vocab_size=None, output_dim=cfg.d_x, structure=0)

    @staticmethod
    def validate(cfg: TriggerConfig) -> None:
        if cfg.seq_len < 3:
            raise ConfigError(
                f"task.seq_len={cfg.seq_len} is not valid; the trigger task needs >= 3 "
                "(BOS, one content token, one trigger)"
            )
        if not 0.0 <= cfg.p_trigger <= 1.0:
            raise ConfigError(f"task.p_trigger={cfg.p_trigger} is not valid; it must lie in [0, 1]")
        if cfg.d_x < 1:
            raise ConfigError(f"task.d_x={cfg.d_x} is not valid; it must be >= 1")
        if cfg.mode not in MODES:
            raise choices_error("task.mode", cfg.mode, MODES)

    def sample(self, batch_size: int, generator: torch.Generator, device) -> Batch:
        B, L, d_x = batch_size, self.seq_len, self.cfg.d_x
        z = torch.randn(B, L, d_x, generator=generator, device=device)
        position = torch.arange(L, device=device)
        if self.cfg.mode == "single":
            has_trigger = torch.rand(B, generator=generator, device=device) < self.cfg.p_trigger
            where = torch.randint(2, L, (B,), generator=generator, device=device)
            is_trigger = (position == where[:, None]) & has_trigger[:, None]  # (B, L)
        else:
            is_trigger = torch.rand(B, L, generator=generator, device=device) < self.cfg.p_trigger
            is_trigger &= position >= 2
        is_bos = (position == 0).expand(B, L)
        is_content = ~(is_trigger | is_bos)
        z = z * is_content[..., None]

        # Mean of the content vectors strictly before each position (exclusive prefix sums).
        prefix_sum = cumsum_in_order(z, dim=1) - z  # (B, L, d_x)
        prefix_count = torch.cumsum(is_content, dim=1) - is_content.long()  # (B, L)
        prefix_mean = prefix_sum / prefix_count.clamp(min=1)[..., None]
        targets = prefix_mean * is_trigger[..., None]

        inputs = torch.cat([z, is_bos[..., None].float(), is_trigger[..., None].float()], dim=-1)
        query_type = torch.where(is_trigger, TRIGGER, NON_TRIGGER)
        query_type[:, 0] = -1
        return Batch(
            inputs=inputs,
            targets=targets,
            loss_mask=~is_bos,
            query_type=query_type,
            sink=torch.zeros(B, dtype=torch.long, device=device),
        )

    def loss(self, pred: torch.Tensor, batch: Batch) -> torch.Tensor:
        return mse(pred, batch.targets)

    def baseline_loss(self, batch: Batch) -> torch.Tensor:
        return mse(torch.zeros_like(batch.targets), batch.targets)
