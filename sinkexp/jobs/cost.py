"""What a config costs in work: the FLOPs of a training step.

`training_flops` x steps is how much work a run is (the plan's FLOPs, `reproduce --estimate`'s scaling,
the benchmarks' utilisation). The memory a job needs is sinkexp/jobs/memory.py's (`bytes_needed`).
"""

from __future__ import annotations

from sinkexp.config.schema import Config
from sinkexp.tasks import TASKS

MLP_FLOPS = {"none": 0, "gelu": 16, "relu": 16, "swiglu": 16}  # x d^2 per position (4d hidden; SwiGLU 3 x 8/3 d)


def training_flops(cfg: Config) -> float:
    """Matmul FLOPs of one training step of one model, per position: per layer the q, k, v and
    output projections (8 d^2), scores and weighted values (4 T d: every key, the causal mask saves
    nothing) and the MLP, and the readout, each 3 x (forward, and the gradients of both operands);
    the input projection of vector tasks 2 x (no gradient for the data). A token embedding is a
    lookup. Norms, softmax and the optimiser are left out. tests/jobs/test_plan.py checks this against
    torch.utils.flop_counter on the explicit attention path."""
    m, t = cfg.model, cfg.train
    dims = TASKS[cfg.task.name].dims(cfg.task)
    T, d = dims.seq_len + m.n_registers, m.d_model
    blocks = m.n_layers * (8 * d * d + 4 * T * d + MLP_FLOPS[m.mlp] * d * d)
    readout = 2 * d * dims.output_dim if m.readout == "linear" else 0
    embed = 2 * d * dims.input_dim if m.embed == "linear" and dims.input_dim else 0
    return float(t.batch_size * T * (3 * (blocks + readout) + 2 * embed))
