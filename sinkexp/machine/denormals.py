"""Subnormal floats on the CPU: flushed to zero in a training job.

Once attention concentrates on a sink or hub, softmax gives the other keys weights below 1.2e-38
(a score gap above 87), subnormal floats in float32, which x86 CPUs compute in a slow path. On the
two-layer broadcast model at its reach size, at step 6500, 20% of the second layer's attention
weights were subnormal, and a step took 2.0-2.1x as long with them as flushed (1.84x on two
threads; docs/performance.md, "Subnormal floats"; scripts/bench_denormals.py). Flushing (FTZ and
DAZ) treats them as zero, as TensorFlow and JAX do on the CPU by default. What a run computes moves
only where a value below 1.2e-38 would have counted: the runs checked there train to bit-identical
weights either way. A GPU is not affected (torch sets the CPU's mode only).

Set before the job's first parallel region, so torch's OpenMP threads, started then, inherit it.
SINKEXP_DENORMALS=keep leaves the CPU as it is.
"""

from __future__ import annotations

import os

import torch


def flush_denormals() -> str:
    """Flush subnormal floats to zero in this process's CPU arithmetic; returns what was done, for
    the run's log."""
    if os.environ.get("SINKEXP_DENORMALS") == "keep":
        return "kept (SINKEXP_DENORMALS=keep)"
    if not torch.set_flush_denormal(True):  # False where the CPU has no such mode
        return "kept (the CPU cannot flush them)"
    return "flushed to zero on the CPU (SINKEXP_DENORMALS=keep keeps them)"
