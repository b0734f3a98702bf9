"""What the benchmark scripts share (scripts/bench*.py, scripts/profile_reproduce.py): timing
sides of a comparison in alternation (`alternate`, `time_sides`), the machine's matmul peak, and
whether other processes made a measurement invalid. The FLOPs of a step are the library's
(sinkexp/jobs/cost.py); the load probe is the one the thread choice uses (sinkexp/machine/threads.py)."""

from __future__ import annotations

import os
import platform
import time
from typing import Callable

import torch

from sinkexp.machine.threads import busy_cores

QUIET = 0.25  # cores other processes may use for a measurement to count


def matmul_peak(threads: int, size: int = 512, repeats: int = 50) -> float:
    """fp32 GFLOP/s of square matmuls at `threads` torch threads."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    a, b = torch.randn(size, size), torch.randn(size, size)
    for _ in range(5):
        a @ b
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    torch.set_num_threads(before)
    return 2 * size**3 * repeats / (time.perf_counter() - start) / 1e9


def alternate(sides: dict, reps: int) -> dict:
    """Each side's measurement (a function returning a number) `reps` times, the sides in
    alternation, so that drift in the machine hits every side alike; {side: [one per repetition]}."""
    results: dict = {side: [] for side in sides}
    for _ in range(reps):
        for side, measure in sides.items():
            results[side].append(measure())
    return results


def time_sides(sides: dict[str, Callable[[], None]], steps: int, reps: int, warmup: int = 3) -> dict[str, list[float]]:
    """steps/s of each side's step function per repetition: `warmup` steps each, then `reps`
    alternating repetitions of `steps` steps."""

    def timed(step: Callable[[], None]) -> Callable[[], float]:
        def rate() -> float:
            start = time.perf_counter()
            for _ in range(steps):
                step()
            return steps / (time.perf_counter() - start)

        return rate

    for step in sides.values():
        for _ in range(warmup):
            step()
    return alternate({side: timed(step) for side, step in sides.items()}, reps)


def load(seconds: float = 1.0) -> float:
    """Cores other processes keep busy now (0 where the load cannot be read)."""
    return busy_cores(seconds) or 0.0


def machine(threads: int) -> str:
    """One line naming the machine a measurement ran on."""
    return (
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch "
        f"{torch.__version__}, {threads} threads, device cpu; other processes' load {load():.2f} cores"
    )


def validity(loads: list[float]) -> str:
    """'' for a quiet machine, else the line that marks the numbers invalid."""
    worst = max(loads)
    return "" if worst < QUIET else f"  INVALID: other processes used {worst:.2f} cores; rerun on a quiet machine"
