"""Where `sinkexp reproduce` spends its time, and the least it could take on this machine.

    .venv/bin/python scripts/profile_reproduce.py [PAPER ...] [--measured outputs/reproduce] [--cores 2]

For every experiment of the papers (all by default), each distinct job of its sweep is built and
timed at one thread, as a parallel-launcher job runs it (seeds, structure draws and the other
settings a pack may vary aside: they cost the same): the training step (the project's own Trainer,
data drawn inside) and one evaluation (all captures and metrics), each once after a warm-up, and
the matmul FLOPs of one step, forward and backward. The timing, FLOPs and jobs are `sinkexp reproduce --estimate`'s
(sinkexp/reproduce/estimate.py); this script adds the floor and the measured runs beside them.
From those, per experiment:

    predicted job-s = sum over its runs of (steps x step time + evaluations x evaluation time)
    floor           = its matmul FLOPs / (cores x the matmul peak of one core)

The floor is what the experiment would take if every training step were nothing but its matmuls at
peak speed and the cores never idled: a lower bound for this machine at these sizes, whatever the
code does. With --measured (a finished `sinkexp reproduce` tree) the runs' own job-seconds
(meta.json wall_time_s) are printed beside the prediction. Run it on a quiet machine: it prints the
other processes' load, and INVALID where they kept a quarter of a core busy.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import pandas as pd
import torch

from sinkexp.jobs.cost import training_flops
from sinkexp.jobs.plan import Plan
from sinkexp.machine.allocator import keep_freed_memory
from sinkexp.machine.benchmark import load, matmul_peak, validity
from sinkexp.reproduce.calibration import Calibrations
from sinkexp.reproduce.command import decided
from sinkexp.reproduce.estimate import evaluations
from sinkexp.reproduce.execute import plan_experiments
from sinkexp.reproduce.papers import PAPERS


def measured_seconds(folder: Path) -> tuple[float, int]:
    """(summed wall_time_s, runs) of the finished runs below an experiment folder."""
    walls = [json.loads(m.read_text()).get("wall_time_s") for m in folder.rglob("meta.json")]
    walls = [w for w in walls if w is not None]
    return sum(walls), len(walls)


def experiment_row(
    name: tuple[str, str], planned: Plan, timings: Calibrations, peak: float, args: argparse.Namespace
) -> dict:
    """One experiment's runs, predicted job-seconds (training and evaluation), GFLOP and floor, and with
    --measured its runs' own job-seconds."""
    zeros = dict.fromkeys(("predicted_s", "train_s", "eval_s", "gflop"), 0.0)
    row = {"experiment": "/".join(name), "runs": 0, **zeros}
    for job in planned.jobs:
        cfg, runs = job.config, len(job.run_dirs)
        step_s, eval_s = timings.timings(cfg)
        row["runs"] += runs
        row["train_s"] += runs * cfg.train.steps * step_s
        row["eval_s"] += runs * evaluations(cfg) * eval_s
        row["gflop"] += runs * cfg.train.steps * training_flops(cfg) / 1e9
    row["predicted_s"] = row["train_s"] + row["eval_s"]
    row["floor_s"] = row["gflop"] / (peak * args.cores)
    if args.measured:
        row["measured_s"], row["measured_runs"] = measured_seconds(args.measured.joinpath(*name))
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("papers", nargs="*", default=["all"])
    parser.add_argument("--measured", type=Path, help="a finished `sinkexp reproduce` tree (outputs/reproduce)")
    parser.add_argument("--cores", type=int, default=2, help="parallel jobs (the floor divides by this)")
    args = parser.parse_args()
    keep_freed_memory()  # as every `sinkexp train` job does
    torch.set_num_threads(1)
    before = load()
    peak = max(matmul_peak(1) for _ in range(3))
    print(
        f"one thread; matmul peak (fp32, 512x512) {peak:.1f} GFLOP/s per core; {args.cores} parallel jobs; "
        f"other processes' load {before:.2f} cores"
    )

    timings = Calibrations(torch.device("cpu"), Path(tempfile.mkdtemp()) / "calibration.json", fresh=True)
    papers = list(PAPERS.values()) if args.papers == ["all"] else [PAPERS[name] for name in args.papers]
    rows = []
    # the experiments reproduce trains (checkpoint experiments are measured by `sinkexp measure`, not trained)
    settings = decided([], papers, root=Path(tempfile.mkdtemp()), pack=False)
    for name, planned in plan_experiments(settings).items():
        rows.append(experiment_row(name, planned, timings, peak, args))
        row = rows[-1]
        print(f"  {row['experiment']}: {row['runs']} runs, predicted {row['predicted_s']:.0f} job-s", flush=True)
    table = pd.DataFrame(rows).set_index("experiment")
    table["matmul_share"] = table["floor_s"] * args.cores / table["predicted_s"]
    total = table.sum(numeric_only=True)
    total["matmul_share"] = total["floor_s"] * args.cores / total["predicted_s"]
    table.loc["total"] = total
    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.float_format", "{:.1f}".format):
        print(table)
    wall = total["predicted_s"] / args.cores
    print(
        f"\npredicted wall time with {args.cores} jobs at a time (no idle core): {wall:.0f} s = {wall / 60:.1f} min "
        f"(training {total['train_s'] / total['predicted_s']:.0%}, "
        f"evaluation {total['eval_s'] / total['predicted_s']:.0%})"
    )
    print(
        f"floor (every step only its matmuls at peak, {args.cores} cores): {total['floor_s']:.0f} s = "
        f"{total['floor_s'] / 60:.1f} min"
    )
    print(validity([before, load()]).strip() or "other processes quiet before and after")
    if args.measured:
        print(
            f"measured job-seconds in {args.measured}: {total['measured_s']:.0f} "
            f"over {total['measured_runs']:.0f} runs "
            f"= {total['measured_s'] / args.cores:.0f} s with {args.cores} jobs at a time"
        )


if __name__ == "__main__":
    main()
