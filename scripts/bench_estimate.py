"""Benchmark: how long `sinkexp reproduce PAPER --estimate` takes from an empty cache and from a kept one.

    .venv/bin/python scripts/bench_estimate.py                          # reproduce all: about 2 minutes
    .venv/bin/python scripts/bench_estimate.py --baseline /tmp/old      # beside another checkout's code

Each side runs the command in a new process, in a new folder (no outputs/: every run is still to
train, as on a fresh clone), first with XDG_CACHE_HOME a new folder (cold: every Hydra composition
made and every distinct job timed, docs/performance.md) and then again (kept). `--baseline` runs
another checkout's sinkexp (its folder first on PYTHONPATH; the config files are this
installation's) in alternation with this one, so that drift in the machine hits both alike.
Reported: the wall seconds of each side cold and kept, the wall time each predicts, and cold / kept
ratios against the baseline. Another process on the machine makes the
numbers invalid: they are marked so. Both sides run with Python's bytecode cache, compiled before
the first timing, as a user's installation runs (scripts/bench_startup.py).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sinkexp.machine.benchmark import load, machine, validity


def timed_estimate(paper: str, cache: str, code: str | None) -> tuple[float, str]:
    """(wall seconds, predicted wall time as printed) of one `reproduce PAPER --estimate`."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env["XDG_CACHE_HOME"] = cache
    if code:
        env["PYTHONPATH"] = code
    command = [sys.executable, "-c", "from sinkexp.cli import main; main()", "reproduce", paper, "--estimate"]
    started = time.perf_counter()
    folder = Path(cache, "work")  # no outputs/: every run to train (and not the cache's sinkexp/ on sys.path)
    folder.mkdir(exist_ok=True)
    done = subprocess.run(command, env=env, cwd=folder, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode:
        sys.exit(f"{' '.join(command)} failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    predicted = re.search(r"predicted wall time (\d+ min)", done.stdout)
    return seconds, predicted.group(1) if predicted else "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--paper", default="all")
    parser.add_argument("--baseline", help="another checkout's folder (its sinkexp/ timed beside this one)")
    parser.add_argument("--reps", type=int, default=1)
    args = parser.parse_args()
    sides = {"this": None, **({"baseline": args.baseline} if args.baseline else {})}
    results: dict[str, dict[str, list]] = {side: {"cold": [], "kept": []} for side in sides}
    for code in sides.values():  # compiled once, as an installation is
        folder = Path(code or Path(__file__).resolve().parents[1]) / "sinkexp"
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(folder)], check=True)
    loads = [load()]
    for _ in range(args.reps):
        for side, code in sides.items():
            with tempfile.TemporaryDirectory() as cache:
                for state in ("cold", "kept"):
                    results[side][state].append(timed_estimate(args.paper, cache, code))
    loads.append(load())
    print(machine(1))
    for side, states in results.items():
        for state, runs in states.items():
            shown = ", ".join(f"{seconds:.1f} s (predicts {predicted})" for seconds, predicted in runs)
            print(f"  {side:<9} {state}: {shown}")
    if args.baseline:
        for state in ("cold", "kept"):
            ours, theirs = (min(s for s, _ in results[side][state]) for side in ("this", "baseline"))
            print(f"{state}: this / baseline {ours / theirs:.2f}x (fastest of {args.reps})")
    print(f"reproduce {args.paper} --estimate{validity(loads)}")


if __name__ == "__main__":
    main()
