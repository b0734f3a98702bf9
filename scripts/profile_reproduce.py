"""Where `sinkexp reproduce` spends its time, and the least it could take on this machine.

    .venv/bin/python scripts/profile_reproduce.py [PAPER ...] [--measured outputs/reproduce] [--cores 2]

For every experiment of the papers (all by default), each distinct config of its sweep is built
and timed at one thread, as a parallel-launcher job runs it (seeds and structure draws aside: they
cost the same): the training step (the project's own Trainer, data drawn inside), one evaluation
(all captures and metrics), and the matmul FLOPs of one step, forward and backward (torch's
FlopCounterMode on the explicit attention path; the fused CPU kernel is not counted by torch).
From those, per experiment:

    predicted job-s = sum over its runs of (steps x step time + evaluations x evaluation time)
    floor           = its matmul FLOPs / (cores x the matmul peak of one core)

The floor is what the experiment would take if every training step were nothing but its matmuls at
peak speed and the cores never idled: a lower bound for this machine at these sizes, whatever the
code does. With --measured (a finished `sinkexp reproduce` tree) the runs' own job-seconds
(meta.json wall_time_s) are printed beside the prediction. Timings are best-of, so run it on a
quiet machine; it prints the other processes' load.
"""
from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import math
import time
from pathlib import Path

import pandas as pd
import torch
from torch.utils.flop_counter import FlopCounterMode

from sinkexp.allocator import keep_freed_memory
from sinkexp.evaluate.evaluator import evaluate
from sinkexp.launch import compose_config
from sinkexp.model import Transformer
from sinkexp.reproduce.declare import override_value
from sinkexp.reproduce.papers import PAPERS
from sinkexp.runner import make_trainer
from sinkexp.threads import busy_cores
from sinkexp.train import batch_loss

SEED_KEYS = ("seed", "task.structure_seed")   # draws of one config: the same cost


def load_script(name: str):
    spec = importlib.util.spec_from_file_location(name, Path(__file__).parent / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def best_seconds(fn, reps: int) -> float:
    times = []
    for _ in range(reps):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def step_flops(cfg, task) -> float:
    """Matmul FLOPs of one training step (forward and backward) on the explicit attention path."""
    torch.manual_seed(cfg.seed)
    model = Transformer(cfg.model, cfg.attn, task, fused=False)
    batch = task.sample(cfg.train.batch_size, torch.Generator().manual_seed(0), "cpu")
    with FlopCounterMode(display=False) as counter:
        batch_loss(task, model(batch.inputs), batch).backward()
    return counter.get_total_flops()


def profile_config(cfg, reps: int) -> dict:
    """Seconds per training step and per evaluation, and FLOPs per step, of one config at one thread."""
    (task,), trainer = make_trainer([cfg], torch.device("cpu"))
    eval_batch = task.sample(cfg.eval.batch_size, torch.Generator().manual_seed(cfg.eval.seed), "cpu")
    for _ in range(3):                       # warm-up: allocator, first-call paths
        trainer.train_step()

    def steps(n=5):
        for _ in range(n):
            trainer.train_step()

    step_s = best_seconds(steps, reps) / 5
    eval_s = best_seconds(lambda: evaluate(trainer.model, task, eval_batch, 0), reps)
    return {"step_s": step_s, "eval_s": eval_s, "flops": step_flops(cfg, task)}


def distinct_jobs(exp) -> dict[tuple, int]:
    """The experiment's jobs at the CPU sizes as {overrides without the seeds: how many runs}."""
    seeds = math.prod(len(values) for key, values in exp.grid.items() if key in SEED_KEYS)
    fixed = [f"{key}={override_value(value)}" for key, value in {**exp.overrides, **exp.cpu}.items()]
    swept = [[f"{key}={override_value(value)}" for value in values] for key, values in exp.grid.items()
             if key not in SEED_KEYS]
    return {(*fixed, *combination): seeds for combination in itertools.product(*swept)}


def measured_seconds(folder: Path) -> tuple[float, int]:
    """(summed wall_time_s, runs) of the finished runs below an experiment folder."""
    walls = [json.loads(m.read_text()).get("wall_time_s") for m in folder.rglob("meta.json")]
    walls = [w for w in walls if w is not None]
    return sum(walls), len(walls)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("papers", nargs="*", default=["all"])
    parser.add_argument("--measured", type=Path, help="a finished `sinkexp reproduce` tree (outputs/reproduce)")
    parser.add_argument("--cores", type=int, default=2, help="parallel jobs (the floor divides by this)")
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    keep_freed_memory()                      # as every `sinkexp train` job does
    torch.set_num_threads(1)
    bench = load_script("bench")
    load = busy_cores(1.0) or 0.0
    peak = max(bench.matmul_peak(1) for _ in range(3))
    print(f"one thread; matmul peak (fp32, 512x512) {peak:.1f} GFLOP/s per core; {args.cores} parallel jobs; "
          f"other processes' load {load:.2f} cores")

    papers = list(PAPERS.values()) if args.papers == ["all"] else [PAPERS[name] for name in args.papers]
    rows = []
    for paper in papers:
        for exp in paper.experiments:
            row = {"experiment": f"{paper.name}/{exp.name}", "runs": 0, "predicted_s": 0.0, "train_s": 0.0,
                   "eval_s": 0.0, "gflop": 0.0}
            for job, runs in distinct_jobs(exp).items():
                cfg = compose_config(*job)
                timing = profile_config(cfg, args.reps)
                evaluations = len(range(0, cfg.train.steps, cfg.eval.every)) + 1   # step 0 and the last
                row["runs"] += runs
                row["train_s"] += runs * cfg.train.steps * timing["step_s"]
                row["eval_s"] += runs * evaluations * timing["eval_s"]
                row["gflop"] += runs * cfg.train.steps * timing["flops"] / 1e9
            row["predicted_s"] = row["train_s"] + row["eval_s"]
            row["floor_s"] = row["gflop"] / (peak * args.cores)
            if args.measured:
                row["measured_s"], done = measured_seconds(args.measured / paper.name / exp.name)
                row["measured_runs"] = done
            rows.append(row)
            print(f"  {row['experiment']}: {row['runs']} runs, predicted {row['predicted_s']:.0f} job-s",
                  flush=True)
    table = pd.DataFrame(rows).set_index("experiment")
    table["matmul_share"] = table["floor_s"] * args.cores / table["predicted_s"]
    total = table.sum(numeric_only=True)
    total["matmul_share"] = total["floor_s"] * args.cores / total["predicted_s"]
    table.loc["total"] = total
    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.float_format", "{:.1f}".format):
        print(table)
    wall = total["predicted_s"] / args.cores
    print(f"\npredicted wall time with {args.cores} jobs at a time (no idle core): {wall:.0f} s = {wall / 60:.1f} min "
          f"(training {total['train_s'] / total['predicted_s']:.0%}, evaluation {total['eval_s'] / total['predicted_s']:.0%})")
    print(f"floor (every step only its matmuls at peak, {args.cores} cores): {total['floor_s']:.0f} s = "
          f"{total['floor_s'] / 60:.1f} min")
    if args.measured:
        print(f"measured job-seconds in {args.measured}: {total['measured_s']:.0f} over {total['measured_runs']:.0f} runs "
              f"= {total['measured_s'] / args.cores:.0f} s with {args.cores} jobs at a time")


if __name__ == "__main__":
    main()
