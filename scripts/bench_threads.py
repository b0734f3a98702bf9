"""Thread policy check: steps/s of one run with threads=1, threads=2 and the default (threads=null),
on the machine as it is and with one competing busy process, printed as a table with ratios.

    .venv/bin/python scripts/bench_threads.py [--steps 900] [--task trigger] [--attn relu]

Each cell is one `sinkexp train` run (its meta.json steps/s, evaluation included), so the numbers
carry run-to-run noise of a few percent; run it twice to see it. The default must stay within
1.3x of the better fixed setting in both conditions (best/default at most 1.3). Another process on
the machine before or after the runs makes the numbers invalid: they are marked so.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sinkexp.machine.benchmark import load, validity

SETTINGS = {"threads=1": ["threads=1"], "threads=2": ["threads=2"], "default": []}


def run(args: list[str], where: Path) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "sinkexp.cli", "train", *args, f"hydra.run.dir={where}"],
        capture_output=True,
        text=True,
        env={**os.environ, "TQDM_DISABLE": "1"},
    )
    if done.returncode:
        sys.exit(f"sinkexp train {' '.join(args)} failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads((where / "meta.json").read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=900)
    parser.add_argument("--task", default="trigger")
    parser.add_argument("--attn", default="relu")
    args = parser.parse_args()
    common = [f"task={args.task}", f"attn={args.attn}", f"train.steps={args.steps}", "device=cpu"]
    rows = {}
    loads = [load()]  # before and after: between, the busy condition's own process keeps a core busy
    with tempfile.TemporaryDirectory() as tmp:
        for condition in ("as is", "one core busy"):
            hog = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if condition != "as is" else None
            time.sleep(1.0 if hog else 0.0)
            try:
                for name, extra in SETTINGS.items():
                    meta = run(common + extra, Path(tmp) / f"{condition}-{name}".replace(" ", "_").replace("=", ""))
                    rows.setdefault(condition, {})[name] = (meta["steps_per_s"], meta["device"]["torch_threads"])
            finally:
                if hog:
                    hog.kill()
    loads.append(load())
    print(f"other processes' load before and after: {loads[0]:.2f}, {loads[1]:.2f} cores")
    print(f"steps/s, {args.task} attn={args.attn}, {args.steps} steps (evaluation included)")
    print(f"{'machine':<16}{'threads=1':>11}{'threads=2':>11}{'default':>11}{'chose':>7}{'best/default':>14}")
    for condition, cells in rows.items():
        best = max(cells["threads=1"][0], cells["threads=2"][0])
        print(
            f"{condition:<16}"
            + "".join(f"{cells[name][0]:>11.1f}" for name in SETTINGS)
            + f"{cells['default'][1]:>7}{best / cells['default'][0]:>13.2f}x"
        )
    print(validity(loads).strip())


if __name__ == "__main__":
    main()
