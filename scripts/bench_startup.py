"""Benchmark: what a user waits for before and around training, against the import floor.

    .venv/bin/python scripts/bench_startup.py               # about a minute on 2 CPU cores
    .venv/bin/python scripts/bench_startup.py --reps 5

Each side is a fresh process, the sides alternating (`--reps` times each), so that drift in the
machine hits every side alike; each train run writes into its own new folder:
- `import torch`: `python -c "import torch"`, the floor any command that trains pays;
- `2-step train`: `sinkexp train task=trigger train.steps=2 train.warmup=0 eval.every=1 threads=1`,
  the whole command (composition, plan, run directory, 2 steps, 3 evaluations, tables);
Reported: the median wall time of each and the ratio train / import (docs/performance.md, Start-up).
Another process on the machine makes the numbers invalid: they are marked so.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sinkexp.machine.benchmark import alternate, load, machine, validity

TRAIN = ["train", "task=trigger", "train.steps=2", "train.warmup=0", "eval.every=1", "threads=1"]


def wall(command: list[str], cwd: str) -> float:
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5, help="alternating repetitions per side")
    args = parser.parse_args()
    sinkexp = str(Path(sys.executable).with_name("sinkexp"))
    loads = [load()]
    with tempfile.TemporaryDirectory() as tmp:
        folders = iter(range(10**6))

        def train() -> float:
            folder = Path(tmp, str(next(folders)))
            folder.mkdir()
            return wall([sinkexp, *TRAIN], str(folder))

        sides = {"import torch": lambda: wall([sys.executable, "-c", "import torch"], tmp), "2-step train": train}
        times = alternate(sides, args.reps)
    loads.append(load())
    print(machine(1))
    medians = {side: statistics.median(values) for side, values in times.items()}
    for side, values in times.items():
        print(f"{side:>14}: median {medians[side]:.2f} s  (each: {', '.join(f'{v:.2f}' for v in values)})")
    print(f"2-step train / import torch: {medians['2-step train'] / medians['import torch']:.2f}x{validity(loads)}")


if __name__ == "__main__":
    main()
