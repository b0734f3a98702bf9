"""Benchmark: what a user waits for before training, against the import floor.

    .venv/bin/python scripts/bench_startup.py                          # about a minute on 2 CPU cores
    .venv/bin/python scripts/bench_startup.py --baseline ../old-checkout   # the same command from another checkout

Each side is a fresh process, the sides alternating (`--reps` times each), so that drift in the
machine hits every side alike:
- `import torch`: `python -c "import torch"`, the floor any command that trains pays;
- `2-step train`: `sinkexp train task=trigger train.steps=2 train.warmup=0 eval.every=1 threads=1`,
  the whole command (composition, plan, run directory, 2 steps, 3 evaluations, tables), run in one
  folder whose outputs/ is removed before each run: a user's second command, its composition kept
  (sinkexp/config/compositions.py);
- `2-step train, new folder`: the same in a new folder each time, so nothing kept serves it;
- with `--baseline DIR`, `2-step train, baseline`: the same command from the checkout DIR
  (`python -m sinkexp.cli` with DIR first on PYTHONPATH, this environment's packages), in one
  folder as the second side, for a speed-up measured in the same run;
- `2-step train, compiled each start`: the same from a copy of this checkout's package with no
  __pycache__/ and PYTHONDONTWRITEBYTECODE=1, so that sinkexp's modules are compiled at every start
  (torch's come compiled from pip's install).
The other sides run as Python does by default, caching compiled modules (__pycache__/), whatever
the environment sets (this project's machines set PYTHONDONTWRITEBYTECODE). Reported: the median
wall time of each side and its ratio to `import torch` (docs/performance.md, Start-up). Another
process on the machine makes the numbers invalid: they are marked so.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import sinkexp as sinkexp_package
from sinkexp.machine.benchmark import alternate, load, machine, validity

TRAIN = ["train", "task=trigger", "train.steps=2", "train.warmup=0", "eval.every=1", "threads=1"]


def wall(command: list[str], cwd: Path, env: dict | None = None) -> float:
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def train_side(command: list[str], folder: Path, env: dict | None = None, new_folder: bool = False):
    """A side running `command` in `folder` (its outputs removed first), or in a new folder each time."""
    count = iter(range(10**6))

    def side() -> float:
        where = folder / str(next(count)) if new_folder else folder
        where.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(where / "outputs", ignore_errors=True)
        return wall(command, where, env)

    return side


def uncompiled_copy(folder: Path) -> Path:
    """A copy of the sinkexp package this script imports, without its compiled modules."""
    package = Path(sinkexp_package.__file__).parent
    shutil.copytree(package, folder / "sinkexp", ignore=shutil.ignore_patterns("__pycache__"))
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5, help="alternating repetitions per side")
    parser.add_argument("--baseline", type=Path, help="a checkout of sinkexp to time the same command from")
    args = parser.parse_args()
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    sinkexp = [str(Path(sys.executable).with_name("sinkexp"))]
    loads = [load()]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        sides = {
            "import torch": lambda: wall([sys.executable, "-c", "import torch"], tmp, env),
            "2-step train": train_side(sinkexp + TRAIN, tmp / "kept", env),
            "2-step train, new folder": train_side(sinkexp + TRAIN, tmp / "new", env, new_folder=True),
            "2-step train, compiled each start": train_side(
                [sys.executable, "-m", "sinkexp.cli"] + TRAIN,
                tmp / "compiled",
                {**env, "PYTHONPATH": str(uncompiled_copy(tmp / "source")), "PYTHONDONTWRITEBYTECODE": "1"},
            ),
        }
        if args.baseline:
            sides["2-step train, baseline"] = train_side(
                [sys.executable, "-m", "sinkexp.cli"] + TRAIN,
                tmp / "base",
                {**env, "PYTHONPATH": str(args.baseline.resolve())},
            )
        for side in sides.values():  # a first run of each, untimed: files read once, modules compiled
            side()
        times = alternate(sides, args.reps)
    loads.append(load())
    print(machine(1))
    medians = {side: statistics.median(values) for side, values in times.items()}
    for side, values in times.items():
        ratio = medians[side] / medians["import torch"]
        each = ", ".join(f"{v:.2f}" for v in values)
        print(f"{side:>34}: median {medians[side]:.2f} s, {ratio:.2f}x import torch  (each: {each})")
    if args.baseline:
        print(f"baseline / 2-step train: {medians['2-step train, baseline'] / medians['2-step train']:.2f}x")
    print(f"2-step train / import torch: {medians['2-step train'] / medians['import torch']:.2f}x{validity(loads)}")


if __name__ == "__main__":
    main()
