"""Benchmark: the operations behind some of sinkexp's design choices, each beside the alternative it avoids.

    .venv/bin/python scripts/bench_choices.py              # about half a minute on 2 CPU cores
    .venv/bin/python scripts/bench_choices.py --reps 5 --batch 20

In one run, each pair's sides alternating (`--reps` times) so that drift in the machine hits both alike:
- imports: `torch._dynamo` and pandas after `import torch` (what a run does not pay: torch.optim and
  use_deterministic_algorithms import the first, train/optimizer.py; a run writes its tables with the
  csv module), and `sinkexp.jobs.plan` from nothing (what a planning process imports before it composes,
  jobs/plan.py's COMPOSE_AHEAD), each in a fresh process with Python's bytecode cache, as a user's
  installation runs;
- the next-token loss of `sinkexp measure` (hf/measure.py NextToken.loss): cross-entropy over each
  position's logits as contiguous rows (N, V) against a (B, V, T) view, at Pythia's vocabulary of 50304,
  `--batch` x 64 positions of random logits; seconds, and each layout's error against float64; and the
  rows taken LOSS_ELEMENTS logits a call (16 MiB, under glibc's largest mmap threshold) against 4x that,
  with the freed memory kept as `sinkexp measure` keeps it (machine/allocator.py, set for the whole run);
- stable_rank's eigenproblems (evaluate/metrics/head_writes.py largest_eigenvalues): the largest eigenvalue of
  100 x 8 Gram matrices of 64 x 64 (a measure pass's layer at Pythia-70M's shape), on 1 and on 2 threads;
- the massive ratio's median (evaluate/metrics/vectors.py lower_median, numpy's selection) against
  torch.median (a sort) on 100 x 64 x 512 magnitudes, one thread.
Reported: the median seconds of each side and their ratio. Another process on the machine makes the
numbers invalid: they are marked so.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

from sinkexp.evaluate.metrics.head_writes import largest_eigenvalues
from sinkexp.evaluate.metrics.vectors import lower_median
from sinkexp.hf.measure import LOSS_ELEMENTS
from sinkexp.machine.allocator import keep_freed_memory
from sinkexp.machine.benchmark import alternate, load, machine, validity

IMPORTS = {"torch._dynamo": "torch", "pandas": "torch", "sinkexp.jobs.plan": None}  # module: imported before, untimed
VOCAB, POSITIONS = 50304, 64


def import_seconds(module: str, before: str | None) -> float:
    """Seconds to import `module` (after `before`, untimed), in a fresh process with the bytecode cache."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    first = f"import {before}; " if before else ""
    code = f"import time; {first}t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    done = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True)
    return float(done.stdout.split()[-1])


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def at_threads(threads: int, fn):
    def run():
        before = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            return fn()
        finally:
            torch.set_num_threads(before)

    return run


def report(title: str, times: dict[str, list[float]]) -> None:
    """Median seconds of each side, and the first side's over the second's."""
    medians = {side: statistics.median(values) for side, values in times.items()}
    first, second = medians.values()
    print(title)
    for side, median in medians.items():
        print(f"  {side:<34} {median:8.4f} s")
    print(f"  {' / '.join(medians)}: {first / second:.2f}x")


def loss_layouts(args: argparse.Namespace) -> None:
    generator = torch.Generator().manual_seed(0)
    logits = 4 * torch.randn(args.batch, POSITIONS, VOCAB, generator=generator)
    targets = torch.randint(VOCAB, (args.batch, POSITIONS), generator=generator)
    sides = {
        "(B, V, T) view": lambda: F.cross_entropy(logits.transpose(1, 2), targets, reduction="none"),
        "rows (N, V)": lambda: F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="none").view(
            targets.shape
        ),
    }
    exact = F.cross_entropy(logits.double().flatten(0, 1), targets.flatten(), reduction="none").view(targets.shape)
    report(
        f"next-token loss, {args.batch} x {POSITIONS} positions, V {VOCAB}, {torch.get_num_threads()} threads",
        alternate({side: lambda fn=fn: timed(fn) for side, fn in sides.items()}, args.reps),
    )
    for side, fn in sides.items():
        error = (fn().double() - exact).abs()
        print(f"  {side:<34} error against float64: mean {error.mean():.2e}, largest {error.max():.2e} nats")

    rows, row_targets = logits.flatten(0, 1), targets.flatten()

    def in_calls(elements: int):
        """hf/measure.py cross_entropy's loop at `elements` logits a call."""
        per_call = max(1, elements // VOCAB)
        parts = list(zip(rows.split(per_call), row_targets.split(per_call)))
        return lambda: timed(lambda: torch.cat([F.cross_entropy(p, t, reduction="none") for p, t in parts]))

    sizes = {
        f"{elements * 4 // 2**20} MiB of logits a call": elements for elements in (LOSS_ELEMENTS, 4 * LOSS_ELEMENTS)
    }
    report(
        "the rows in calls of LOSS_ELEMENTS logits (hf/measure.py) against 4x that",
        alternate({side: in_calls(elements) for side, elements in sizes.items()}, args.reps),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5, help="alternating repetitions per side")
    parser.add_argument("--batch", type=int, default=20, help="sequences of the loss's logits")
    args = parser.parse_args()
    torch.set_num_threads(2)
    loads = [load()]
    print(machine(torch.get_num_threads()))
    print(f"allocator: {keep_freed_memory()}")

    for module, before in IMPORTS.items():
        import_seconds(module, before)  # untimed: modules compiled into the cache
    sides = {module: lambda m=module, b=before: import_seconds(m, b) for module, before in IMPORTS.items()}
    print("import in a fresh process:")
    for module, values in alternate(sides, args.reps).items():
        after = f"after {IMPORTS[module]}" if IMPORTS[module] else "from nothing"
        print(f"  {module + ' ' + after:<34} {statistics.median(values):8.3f} s")

    loss_layouts(args)

    gram = torch.randn(100, 8, 64, 64, generator=torch.Generator().manual_seed(1))
    gram = gram @ gram.transpose(-2, -1)

    def eigen() -> float:
        return timed(lambda: largest_eigenvalues(gram))

    eigen_sides = {"1 thread": at_threads(1, eigen), "2 threads": at_threads(2, eigen)}
    report("largest eigenvalues of 100 x 8 symmetric 64 x 64 matrices", alternate(eigen_sides, args.reps))

    magnitude = torch.randn(100 * 64 * 512, generator=torch.Generator().manual_seed(2)).abs()
    assert torch.equal(lower_median(magnitude), magnitude.median())
    report(
        "median of 100 x 64 x 512 magnitudes, one thread",
        alternate(
            {
                "torch.median": at_threads(1, lambda: timed(magnitude.median)),
                "lower_median (selection)": at_threads(1, lambda: timed(lambda: lower_median(magnitude))),
            },
            args.reps,
        ),
    )
    loads.append(load())
    print(validity(loads).strip() or "other processes quiet throughout")


if __name__ == "__main__":
    main()
