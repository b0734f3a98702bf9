"""`sinkexp reproduce PAPER|all --estimate`: what a reproduction trains and what it will cost, before
anything trains; and the predicted seconds behind `reproduce`'s time left.

It reads the jobs `reproduce` would run (execute.plan_experiments: the plan of every experiment,
each job composed and checked once) and predicts each from a calibration on the device at hand:
every distinct job (its task, model, attention, batch sizes and number of runs; jobs that differ
only in seeds, learning rates or data settings cost the same) is built at the CPU sizes and timed
for a warm-up step, then the faster of two timings of CALIBRATION_STEPS steps and of one evaluation
(a first evaluation pays one-time costs: 2.3 s against 0.3 s for a similar job, seen once here),
with the thread count its jobs will use. A run then takes steps x step time + evaluations x
evaluation time. All experiments' jobs share one pool of workers, longest first, as `reproduce`
runs them; a run another experiment trains too (the same config and seed: barbero2025's `lm` is
gu2025's softmax LM; a weight-decay grid's default value) is counted once, since `reproduce`
copies the finished twin. At another scale than cpu each job's CPU-size twin (the same experiment
planned at scale=cpu) is timed and scaled by the ratio of training FLOPs (`cost.training_flops`),
so a size that is bound by kernel launches rather than arithmetic (small models on a GPU) is
predicted too slow. Runs finished already (below reproduce's output folder: a command resumed)
cost nothing, and an interrupted run costs the steps after its checkpoint (left_to_train). Not
counted: process start-up, checkpoint writes, other processes' load.

On the CPU the load is probed before the first timing and after the last (threads.busy_cores):
timings taken while other processes kept cores busy (benchmark.QUIET or more; seen here: a plan
timed beside two training processes predicted sun2026 at 10.3 h) serve this plan, which says so,
and are not kept.

Timings are kept in CALIBRATIONS (the user's cache folder) by job, for one device, torch version,
thread count and sinkexp source: a second --estimate times nothing, an edit to sinkexp's code times
again, and `--recalibrate` measures afresh.
"""

from __future__ import annotations

import hashlib
import heapq
import math
import os
import time
from pathlib import Path

import pandas as pd
import torch

from sinkexp.config.schema import Config, run_configs
from sinkexp.jobs.cost import training_flops
from sinkexp.jobs.memory import available, bytes_needed
from sinkexp.jobs.plan import Job, Plan
from sinkexp.machine.benchmark import QUIET
from sinkexp.machine.threads import busy_cores
from sinkexp.reproduce.execute import finished_runs, pool_workers, scale_of
from sinkexp.rundir.files import CHECKPOINT

CALIBRATION_STEPS = 3
CALIBRATIONS = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "sinkexp" / "calibration.json"


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


def calibrate(cfg: Config, device: torch.device, reps: int = 2) -> tuple[float, float]:
    """(seconds per training step of the job, seconds per evaluation of all its runs) on `device`,
    each the best of `reps` timings (after a warm-up step)."""
    from sinkexp.evaluate.evaluator import evaluate
    from sinkexp.jobs.runner import make_trainer
    from sinkexp.tasks import held_out_batch
    from sinkexp.train.replicas import ReplicaTrainer

    run_cfgs = run_configs(cfg)
    tasks, trainer = make_trainer(run_cfgs, device)
    trainer.train_step()  # warm-up: allocations, first kernels

    def timed(fn) -> float:
        best = math.inf
        for _ in range(reps):
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            started = time.perf_counter()
            fn()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            best = min(best, time.perf_counter() - started)
        return best

    step = timed(lambda: [trainer.train_step() for _ in range(CALIBRATION_STEPS)]) / CALIBRATION_STEPS
    models = [view.model for view in trainer.views()] if isinstance(trainer, ReplicaTrainer) else [trainer.model]
    batch = held_out_batch(tasks[0], cfg.eval.batch_size, cfg.eval.seed, device)
    evaluation = timed(lambda: evaluate(models[0], tasks[0], batch, 0)) * len(models)
    return step, evaluation


def source_digest() -> str:
    """sinkexp's code that trains and evaluates, hashed: a calibration stands only for the code it
    timed. reproduce/ (the papers' declarations, this planner) is left out: it times nothing."""
    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        if path.parent.is_relative_to(package / "reproduce"):
            continue
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


class Calibrations:
    """(step, evaluation) seconds by job, measured once and kept in `path` under the device, torch
    version, thread count and source digest they were measured with; `busy`: the most cores other
    processes kept busy around the CPU timings (kept only below benchmark.QUIET)."""

    def __init__(self, device: torch.device, path: Path | None = None, fresh: bool = False):
        from sinkexp.rundir.files import read_json
        from sinkexp.rundir.provenance import device_name

        self.device, self.path, self.measured, self.busy = device, path or CALIBRATIONS, 0, 0.0
        self.source = f"sinkexp {source_digest()}"
        self.where = (
            f"{device_name(device)} | torch {torch.__version__} | {torch.get_num_threads()} threads | {self.source}"
        )
        try:
            self.kept = {} if fresh else read_json(self.path)
        except (OSError, ValueError):  # none yet, or unreadable: measure
            self.kept = {}

    def timings(self, cfg: Config) -> tuple[float, float]:
        key = f"{self.where} | " + repr(
            (
                cfg.task,
                cfg.model,
                cfg.attn,
                cfg.train.batch_size,
                cfg.train.data_chunk,
                cfg.eval.batch_size,
                len(run_configs(cfg)),
            )
        )
        if key not in self.kept:
            if not self.measured:
                self.probe()
            self.kept[key] = calibrate(cfg, self.device)
            self.measured += 1
        step, evaluation = self.kept[key]
        return step, evaluation

    def probe(self) -> None:
        if self.device.type == "cpu":
            self.busy = max(self.busy, busy_cores() or 0.0)

    def save(self) -> None:
        from sinkexp.rundir.files import write_json

        if self.measured:
            self.probe()
        if self.measured and self.busy < QUIET:
            try:  # timings of other code are dropped
                write_json(self.path, {key: value for key, value in self.kept.items() if self.source in key})
            except OSError:  # a read-only home: the next --estimate measures again
                pass


def pool_time(durations: list[float], workers: int) -> float:
    """Wall time of jobs of these durations on `workers` workers, longest first (each job to the
    worker that frees first)."""
    free = [0.0] * max(1, workers)
    for duration in sorted(durations, reverse=True):
        heapq.heapreplace(free, free[0] + duration)
    return max(free)


def estimate(
    plans: dict[tuple[str, str], Plan],
    overrides: list[str],
    root: Path | None = None,
    recalibrate: bool = False,
    cpu_plans: dict[tuple[str, str], Plan] | None = None,
) -> tuple[pd.DataFrame, dict]:
    """One row per experiment of `plans` (runs, jobs, steps, FLOPs, predicted times) and the totals,
    with `job_seconds`: the name of each run directory to train -> the predicted seconds of its job
    (reproduce's progress line reads them). `cpu_plans`: the same experiments planned at scale=cpu,
    whose jobs are timed in place of a larger scale's. Runs finished anywhere below `root`
    (reproduce's output folder) are counted as done: they are not trained again."""
    from sinkexp.machine.devices import resolve_device

    jobs = [job for planned in plans.values() for job in planned.jobs]
    workers = pool_workers(overrides, jobs)[1]  # as run_pool sizes its pool (GPUs: by their memory)
    first = jobs[0]
    device = resolve_device(first.config.device)
    threads = torch.get_num_threads()
    if device.type == "cpu" and workers > 1:
        torch.set_num_threads(1)  # as each parallel job runs
    started, rows, durations, trained, by_run = time.perf_counter(), [], [], set(), {}
    finished = set(finished_runs(root)) if root else set()
    timings = Calibrations(device, fresh=recalibrate)
    try:
        for key, planned in plans.items():
            twins = (cpu_plans or plans)[key].jobs
            seconds, done, copied = [], 0, 0
            for job in planned.jobs:
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
            durations += seconds
            cfg = planned.jobs[0].config
            rows.append(
                {
                    "paper": key[0],
                    "experiment": key[1],
                    "runs": len(planned.runs),
                    "done": done,
                    "copied": copied,
                    "jobs": len(seconds),
                    "steps": cfg.train.steps,
                    "GFLOP/run": training_flops(cfg) * cfg.train.steps / 1e9,
                    "s/job": sum(seconds) / max(1, len(seconds)),
                    "job_s": sum(seconds),
                    "GiB/job": max(bytes_needed(job.config) for job in planned.jobs) / 2**30,
                }
            )
    finally:
        torch.set_num_threads(threads)
        timings.save()
    table = pd.DataFrame(rows)
    pack = any(job.config.pack for planned in plans.values() for job in planned.jobs)
    totals = {
        "runs": int(table["runs"].sum()),
        "done": int(table["done"].sum()),
        "jobs": int(table["jobs"].sum()),
        "wall_s": pool_time(durations, workers),
        "device": str(device),
        "workers": workers,
        "scale": scale_of(overrides),
        "pack": pack,
        "seconds": time.perf_counter() - started,
        "measured": timings.measured,
        "busy": timings.busy,
        "cache": timings.path,
        "job_seconds": by_run,
        "GiB": available(device) / 2**30,
    }
    return table, totals


def format_estimate(table: pd.DataFrame, totals: dict) -> str:
    shown = table.assign(
        **{
            "GFLOP/run": table["GFLOP/run"].map("{:.3g}".format),
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
        + "\n"
        + unfit
        + f"{totals['runs']} runs, {totals['done']} of them finished already, the others in {totals['jobs']} jobs "
        f"(pack: {'on' if totals['pack'] else 'off'}; copied runs train once, in another experiment), "
        f"scale={totals['scale']}: predicted wall time {totals['wall_s'] / 60:.0f} min ({hours:.1f} h) on "
        f"{totals['device']} with {totals['workers']} job(s) at once; planned in {totals['seconds']:.0f} s, "
        f"{totals['measured']} distinct jobs timed{busy}, the others' timings from {totals['cache']} "
        "(--recalibrate times all again); nothing trained (how it is predicted: sinkexp/reproduce/estimate.py)"
    )
