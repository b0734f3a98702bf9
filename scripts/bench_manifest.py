"""What verifying DONE's manifest costs (rundir/manifest.py): `sinkexp report`, `report --list` and the
report's reading alone (`collect`) over N finished runs, each timed with the manifest checked (every
file hashed) and without (rundir/reading.py's `differences` replaced by a no-op), interleaved in one
process, the median of each. Run it on a quiet machine (docs/rundir.md, "The manifest"):

    .venv/bin/python scripts/bench_manifest.py --runs 100
    .venv/bin/python scripts/bench_manifest.py --runs 100 --kept   # + checkpoints/ (log steps)

The runs are copies of one trained run (a trigger run of 600 steps, checkpointed every 100), so the
bytes per run are a real run's; a copy's manifest holds, since it lists paths below the run.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import sinkexp.rundir.reading as reading
from sinkexp.config.compose import compose_config
from sinkexp.jobs.runner import run
from sinkexp.report.listing import listing
from sinkexp.report.runs import write_report

TRAINED = ("train.steps=600", "eval.every=100", "train.checkpoint_every=100", "threads=1", "device=cpu")


def build(root: Path, runs: int, kept: bool) -> int:
    """`runs` copies of one finished run below root; returns the bytes of one run."""
    overrides = [*TRAINED, *(("train.keep_checkpoints=true", "train.checkpoint_steps=log") if kept else ())]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        run(compose_config(*overrides), root / "r000")
    for n in range(1, runs):
        shutil.copytree(root / "r000", root / f"r{n:03d}")
    return sum(p.stat().st_size for p in (root / "r000").rglob("*") if p.is_file())


def timed(task, checked: bool) -> float:
    real = reading.differences
    if not checked:
        reading.differences = lambda path, files: []  # DONE read and parsed, no file hashed
    try:
        started = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            task()
        return time.perf_counter() - started
    finally:
        reading.differences = real


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kept", action="store_true", help="runs with train.keep_checkpoints (log steps)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-manifest-") as folder:
        root = Path(folder) / "runs"
        size = build(root, args.runs, args.kept)
        tasks = {
            "report": lambda: write_report(root, Path(folder) / "report"),
            "report --list": lambda: listing(root, width=200),
            "collect": lambda: reading.collect(root),
        }
        print(f"{args.runs} runs of {size / 1e6:.2f} MB each ({args.runs * size / 1e6:.0f} MB hashed per check)")
        for name, task in tasks.items():
            timed(task, True)  # warm: imports, the page cache
            times = {True: [], False: []}
            for _ in range(args.rounds):
                for checked in (False, True):
                    times[checked].append(timed(task, checked))
            plain, verified = statistics.median(times[False]), statistics.median(times[True])
            print(
                f"{name:14s} without {plain:7.3f} s  with the manifest {verified:7.3f} s  "
                f"ratio {verified / plain:.3f}  (+{(verified - plain) / args.runs * 1e3:.1f} ms a run)"
            )


if __name__ == "__main__":
    main()
