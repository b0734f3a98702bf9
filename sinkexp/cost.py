"""What a config costs: the memory a step needs at the least, and the FLOPs of a training step.

`memory_estimate` lets the plan refuse sizes no device here can hold before anything runs;
`training_flops` x steps is how much work a run is (the plan's FLOPs, `reproduce --plan`'s scaling,
the benchmarks' utilisation).
"""
from __future__ import annotations

from sinkexp.config import Config, run_configs
from sinkexp.tasks import TASKS


def memory_estimate(cfg: Config) -> int:
    """Bytes a training step or an evaluation of `cfg` needs at the least (fp32): weights, gradients
    and two optimiser moments per replica, the task's structure, and the larger of the training
    step's and the captured evaluation's activations. A coarse floor, for refusing sizes no machine here can hold."""
    m, t = cfg.model, cfg.train
    dims = TASKS[cfg.task.name].dims(cfg.task)
    d, L, H = m.d_model, m.n_layers, m.n_heads
    T = dims.seq_len + m.n_registers
    width = dims.vocab_size or dims.input_dim
    mlp = 0 if m.mlp == "none" else 8 * d * d
    params = L * (4 * d * d + mlp) + width * d + d * dims.output_dim + T * d

    def activations(batch: int) -> int:   # per layer: scores and weights, and a dozen (T, d) tensors
        return L * batch * (3 * H * T * T + 12 * T * d + (12 * T * d if mlp else 0))

    data = t.data_chunk * t.batch_size * T * (dims.input_dim or 1)
    K = len(run_configs(cfg))
    floats = (4 * params + data + dims.structure) * K + max(K * activations(t.batch_size),
                                                            activations(cfg.eval.batch_size))
    return 4 * floats


MLP_FLOPS = {"none": 0, "gelu": 16, "relu": 16, "swiglu": 16}   # x d^2 per position (4d hidden; SwiGLU 3 x 8/3 d)


def training_flops(cfg: Config) -> float:
    """Matmul FLOPs of one training step of one model, per position: per layer the q, k, v and
    output projections (8 d^2), scores and weighted values (4 T d: every key, the causal mask saves
    nothing) and the MLP, and the readout, each 3 x (forward, and the gradients of both operands);
    the input projection of vector tasks 2 x (no gradient for the data). A token embedding is a
    lookup. Norms, softmax and the optimiser are left out. tests/test_plan.py checks this against
    torch.utils.flop_counter on the explicit attention path."""
    m, t = cfg.model, cfg.train
    dims = TASKS[cfg.task.name].dims(cfg.task)
    T, d = dims.seq_len + m.n_registers, m.d_model
    blocks = m.n_layers * (8 * d * d + 4 * T * d + MLP_FLOPS[m.mlp] * d * d)
    readout = 2 * d * dims.output_dim if m.readout == "linear" else 0
    embed = 2 * d * dims.input_dim if m.embed == "linear" and dims.input_dim else 0
    return float(t.batch_size * T * (3 * (blocks + readout) + 2 * embed))
