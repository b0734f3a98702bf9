"""`sinkexp reproduce PAPER|all --estimate`: what a reproduction trains and what it will cost, before
anything trains; and the predicted seconds behind `reproduce`'s time left.

It reads the jobs `reproduce` would run (execute.plan_papers: the plan of every experiment, each
job composed and checked once) and predicts each from a calibration on the device at hand
(calibration.py): every distinct job (its task, model, attention, batch sizes and number of runs;
jobs that differ only in seeds, learning rates or data settings cost the same) is built at the CPU
sizes and its training step and evaluation timed. A run then takes steps x step time + evaluations
x evaluation time. All experiments' jobs share one pool of workers, longest first, as `reproduce`
runs them; a run another experiment trains too (the same config and seed: barbero2025's `lm` is
gu2025's softmax LM; a weight-decay grid's default value) is counted once, since `reproduce`
copies the finished twin. At another scale than cpu each job's CPU-size twin (the same experiment
planned at scale=cpu) is timed and scaled by the ratio of training FLOPs (`cost.training_flops`),
so a size that is bound by kernel launches rather than arithmetic (small models on a GPU) is
predicted too slow. Runs finished already (below reproduce's output folder: a command resumed)
cost nothing, and an interrupted run costs the steps after its checkpoint (left_to_train). Not
counted: process start-up, checkpoint writes, other processes' load.
"""

from __future__ import annotations

import heapq
import time

import pandas as pd
import torch

from sinkexp.config.schema import Config
from sinkexp.jobs.cost import training_flops
from sinkexp.jobs.memory import available, bytes_needed
from sinkexp.jobs.plan import Job, Plan
from sinkexp.machine.benchmark import QUIET
from sinkexp.machine.devices import resolve_device
from sinkexp.reproduce.calibration import Calibrations
from sinkexp.reproduce.execute import Planned, finished_runs
from sinkexp.reproduce.pool import pool_workers
from sinkexp.rundir.files import CHECKPOINT


def evaluations(cfg: Config) -> int:
    """Evaluations a run makes: step 0, every eval.every steps, and the last step."""
    return len(range(0, cfg.train.steps, cfg.eval.every)) + 1


def twin_of(job: Job, twins: tuple[Job, ...]) -> Job:
    """The CPU-size job timed for `job`: the one that shares most of its overrides (the grid's values;
    a larger scale changes the sizes and may run fewer draws, so the order of the jobs differs)."""
    mine = set(job.overrides)
    return max(twins, key=lambda twin: len(mine & set(twin.overrides)))


def left_to_train(job: Job) -> float:
    """The share of a job's steps still to train: 1 for fresh runs, less for runs that resume from a
    checkpoint (a pack's runs checkpoint together; the least trained counts)."""
    left = 0.0
    for run_dir, cfg in zip(job.run_dirs, job.configs):
        checkpoint, step = run_dir / CHECKPOINT, 0
        try:
            if checkpoint.exists():
                step = torch.load(checkpoint, map_location="cpu", weights_only=True)["trainer"]["step"]
        except Exception:  # a file the run itself will refuse (corrupt, unreadable): priced as a fresh start
            step = 0
        left = max(left, 1 - step / cfg.train.steps)
    return left


def pool_time(durations: list[float], workers: int) -> float:
    """Wall time of jobs of these durations on `workers` workers, longest first (each job to the
    worker that frees first)."""
    free = [0.0] * max(1, workers)
    for duration in sorted(durations, reverse=True):
        heapq.heapreplace(free, free[0] + duration)
    return max(free)


def estimate(planned: Planned, recalibrate: bool = False) -> tuple[pd.DataFrame, dict]:
    """One row per experiment of the plans (runs, jobs, steps, FLOPs, predicted times) and the totals,
    with `job_seconds`: the name of each run directory to train -> the predicted seconds of its job
    (reproduce's progress line reads them). The jobs of `planned.at_cpu` are timed in place of a larger
    scale's. Runs finished anywhere below `planned.root` (reproduce's output folder) are counted as
    done: they are not trained again."""
    at_cpu = planned.at_cpu  # at another scale, planned here (before the threads are set, and the clock)
    jobs = [job for plan in planned.plans.values() for job in plan.jobs]
    workers = pool_workers(planned.settings, jobs)[1]  # as run_pool sizes its pool (GPUs: by their memory)
    device = resolve_device(jobs[0].config.device)
    threads = torch.get_num_threads()
    if device.type == "cpu" and workers > 1:
        torch.set_num_threads(1)  # as each parallel job runs
    started, rows, durations, trained, by_run = time.perf_counter(), [], [], set(), {}
    finished = set(finished_runs(planned.root))
    timings = Calibrations(device, fresh=recalibrate)
    try:
        timings.measure(to_time(planned, finished), workers)  # on the CPU: as many at once as the pool runs
        for key, plan in planned.plans.items():
            row, seconds = priced(key, plan, at_cpu[key].jobs, timings, finished, trained, by_run)
            rows.append(row)
            durations += seconds
    finally:
        torch.set_num_threads(threads)
        timings.save()
    table = pd.DataFrame(rows)
    totals = {
        "runs": int(table["runs"].sum()),
        "done": int(table["done"].sum()),
        "jobs": int(table["jobs"].sum()),
        "wall_s": pool_time(durations, workers),
        "device": str(device),
        "workers": workers,
        "scale": planned.settings.scale,
        "pack": any(job.config.pack for job in jobs),
        "seconds": time.perf_counter() - started,
        "measured": timings.measured,
        "busy": timings.busy,
        "cache": timings.path,
        "job_seconds": by_run,
        "GiB": available(device) / 2**30,
    }
    return table, totals


def to_time(planned: Planned, finished: set[str]) -> list[Config]:
    """The CPU-size twin of every job with runs still to train (twin_of), whose timings price it."""
    return [
        twin_of(job, planned.at_cpu[key].jobs).config
        for key, plan in planned.plans.items()
        for job in plan.jobs
        if not {run_dir.name for run_dir in job.run_dirs} <= finished
    ]


def priced(
    key: tuple[str, str],
    plan: Plan,
    twins: list[Job],
    timings: Calibrations,
    finished: set[str],
    trained: set[str],
    by_run: dict[str, float],
) -> tuple[dict, list[float]]:
    """One experiment's row of the estimate and the predicted seconds of each job it trains. `twins`:
    its jobs at scale=cpu, timed in place of its own; runs in `finished` are done, runs in `trained`
    (earlier experiments' jobs train them) are copied; its jobs' runs join `trained`, and `by_run`
    gets each run directory name -> the seconds of its job."""
    seconds, done, copied = [], 0, 0
    for job in plan.jobs:
        names = {run_dir.name for run_dir in job.run_dirs}
        if names <= finished:  # trained by an earlier command
            done += len(names)
            continue
        if names <= trained:  # another experiment's job trains these runs
            copied += len(names)
            continue
        trained.update(names)
        cfg, small = job.config, twin_of(job, twins).config
        step, evaluation = timings.timings(small)
        ratio = training_flops(cfg) / training_flops(small)  # 1 at scale=cpu
        job_seconds = ratio * (cfg.train.steps * step + evaluations(cfg) * evaluation) * left_to_train(job)
        by_run.update(dict.fromkeys(names, job_seconds))
        seconds.append(job_seconds)
    cfg = plan.jobs[0].config
    row = {
        "paper": key[0],
        "experiment": key[1],
        "runs": len(plan.runs),
        "done": done,
        "copied": copied,
        "jobs": len(seconds),
        "steps": cfg.train.steps,
        "GFLOP/run": training_flops(cfg) * cfg.train.steps / 1e9,
        "s/job": sum(seconds) / max(1, len(seconds)),
        "job_s": sum(seconds),
        "GiB/job": max(bytes_needed(job.config) for job in plan.jobs) / 2**30,
    }
    return row, seconds


COLUMNS = (  # the table's columns that are not counts, said under it
    "GFLOP/run: one run's training FLOPs; s/job: a job's predicted seconds; job_s: the experiment's jobs'"
    " seconds together; GiB/job: a job's memory floor"
)


def format_estimate(table: pd.DataFrame, totals: dict, took: float | None = None) -> str:
    """The estimate as --estimate prints it; `took`: the command's seconds so far (else the pricing's)."""
    shown = table.assign(
        **{
            "GFLOP/run": table["GFLOP/run"].map("{:.2e}".format),  # one format for 15 and 1.1e5 alike
            "s/job": table["s/job"].map("{:.0f}".format),
            "job_s": table["job_s"].map("{:.0f}".format),
            "GiB/job": table["GiB/job"].map("{:.3g}".format),
        }
    )
    hours = totals["wall_s"] / 3600
    busy = (
        (
            f" while other processes kept {totals['busy']:.1f} cores busy (so the times are likely long, and not "
            "kept: --estimate again on a quiet machine)"
        )
        if totals.get("busy", 0.0) >= QUIET
        else ""
    )
    too_large = table[table["GiB/job"] > totals["GiB"]]
    unfit = (
        (
            f"Too large for {totals['device']} ({totals['GiB']:.3g} GiB), refused when run: "
            + ", ".join(f"{r.paper}/{r.experiment} ({r['GiB/job']:.3g} GiB a job)" for _, r in too_large.iterrows())
            + "\n"
        )
        if len(too_large)
        else ""
    )
    return (
        shown.to_string(index=False)
        + f"\n({COLUMNS})\n"
        + unfit
        + f"{totals['runs']} runs, {totals['done']} of them finished already, the others in {totals['jobs']} jobs "
        f"(pack: {'on' if totals['pack'] else 'off'}; copied runs train once, in another experiment), "
        f"scale={totals['scale']}: predicted wall time {totals['wall_s'] / 60:.0f} min ({hours:.1f} h) on "
        f"{totals['device']} with {totals['workers']} job(s) at once; estimated in {took or totals['seconds']:.0f} s: "
        f"every job composed, {totals['measured']} distinct jobs timed{busy}, the others' timings from "
        f"{totals['cache']} (--recalibrate times all again); nothing trained "
        "(how it is predicted: sinkexp/reproduce/estimate.py)"
    )
