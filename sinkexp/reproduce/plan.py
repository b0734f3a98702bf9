"""`sinkexp reproduce PAPER|all --plan`: what a reproduction trains and what it will cost, before
anything trains.

Per experiment: its runs, the jobs they form (one per run, or one per pack on a GPU), steps and
training FLOPs per run, and predicted times. The prediction is a calibration on the device at hand:
every distinct job of an experiment (its swept, unpacked settings: attention, norm, depth, ...) is
built at the CPU sizes and timed for a warm-up step, then the faster of two timings of
CALIBRATION_STEPS steps and of one evaluation (a first evaluation pays one-time costs: 2.3 s against
0.3 s for a similar job, seen once here), with the thread count its jobs will use. A run then takes
steps x step time + evaluations x evaluation time. All experiments' jobs share one pool of workers,
longest first, as `reproduce` runs them; a run another experiment trains too (the same config and
seed: barbero2025's `lm` is gu2025's softmax LM; a weight-decay grid's default value) is counted
once, since `reproduce` copies the finished twin. At scale=paper the CPU-size times are scaled by
the ratio of training FLOPs (`config.training_flops`), so a size that is bound by kernel launches
rather than arithmetic (small models on a GPU) is predicted too slow. Runs finished already (below
reproduce's output folder: a command resumed) cost nothing. Not counted: process start-up,
checkpoint writes, other processes' load.

Timings are kept in CALIBRATIONS (the user's cache folder) by job, for one device, torch version,
thread count and sinkexp source: a second --plan times nothing, an edit to sinkexp's code times
again, and `--recalibrate` measures afresh.
"""
from __future__ import annotations

import dataclasses
import hashlib
import heapq
import itertools
import math
import os
import time
from pathlib import Path

import pandas as pd
import torch

from sinkexp.config import Config, packable_keys, replica_configs
from sinkexp.cost import training_flops
from sinkexp.launch import compose_config, pack_first_values
from sinkexp.reproduce.declare import Experiment, Paper, override_value
from sinkexp.reproduce.execute import finished_runs, packed_keys, packs_pay, scale_of, task_name, workers_for
from sinkexp.rundir import config_hash

CALIBRATION_STEPS = 3
CALIBRATIONS = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "sinkexp" / "calibration.json"


def jobs_of(exp: Experiment, overrides: list[str], pack: bool) -> list[tuple[list[str], dict]]:
    """The jobs `reproduce` launches for `exp`, as (overrides of one job, the grid of the jobs that
    cost the same): jobs that differ only in settings a pack may vary (seeds, weight decays,
    gammas, ...) train the same model on as much data, so one stands for all of them."""
    given = {o.split("=", 1)[0] for o in overrides}
    keys = packed_keys(exp, given) if pack else ()
    same_cost = set(packable_keys(task_name(exp.task)))
    own = [o for o in exp.argv(scale_of(overrides), keys) if o.split("=", 1)[0] not in (*exp.grid, *given)]
    swept = {k: v for k, v in exp.grid.items() if k not in keys and k not in given and k not in same_cost}
    alike = {k: v for k, v in exp.grid.items() if k not in keys and k not in given and k in same_cost}
    user = [o for o in overrides if not o.startswith("hydra")]
    jobs = []
    for values in itertools.product(*swept.values()):
        job = [*own, *(f"{k}={override_value(v)}" for k, v in zip(swept, values)),
               *(f"{k}={override_value(v[0])}" for k, v in alike.items()), *user]
        jobs.append((job + pack_first_values(job), alike))
    return jobs


def evaluations(cfg: Config) -> int:
    """Evaluations a run makes: step 0, every eval.every steps, and the last step."""
    return len(range(0, cfg.train.steps, cfg.eval.every)) + 1


def calibrate(cfg: Config, device: torch.device, reps: int = 2) -> tuple[float, float]:
    """(seconds per training step of the job, seconds per evaluation of all its runs) on `device`,
    each the best of `reps` timings (after a warm-up step)."""
    from sinkexp.evaluate.evaluator import evaluate
    from sinkexp.replicas import ReplicaTrainer
    from sinkexp.runner import make_trainer
    from sinkexp.tasks import held_out_batch

    members = replica_configs(cfg)
    tasks, trainer = make_trainer(members, device)
    trainer.train_step()                                  # warm-up: allocations, first kernels

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
    version, thread count and source digest they were measured with."""

    def __init__(self, device: torch.device, path: Path | None = None, fresh: bool = False):
        from sinkexp.provenance import device_name
        from sinkexp.runfiles import read_json

        self.device, self.path, self.measured = device, path or CALIBRATIONS, 0
        self.source = f"sinkexp {source_digest()}"
        self.where = f"{device_name(device)} | torch {torch.__version__} | {torch.get_num_threads()} threads | {self.source}"
        try:
            self.kept = {} if fresh else read_json(self.path)
        except (OSError, ValueError):           # none yet, or unreadable: measure
            self.kept = {}

    def timings(self, cfg: Config) -> tuple[float, float]:
        key = f"{self.where} | " + repr((cfg.task, cfg.model, cfg.attn, cfg.train.batch_size, cfg.train.data_chunk,
                                         cfg.eval.batch_size, len(replica_configs(cfg))))
        if key not in self.kept:
            self.kept[key] = calibrate(cfg, self.device)
            self.measured += 1
        step, evaluation = self.kept[key]
        return step, evaluation

    def save(self) -> None:
        from sinkexp.runfiles import write_json

        if self.measured:
            try:                                # timings of other code are dropped
                write_json(self.path, {key: value for key, value in self.kept.items() if self.source in key})
            except OSError:                     # a read-only home: the next --plan measures again
                pass


def pool_time(durations: list[float], workers: int) -> float:
    """Wall time of jobs of these durations on `workers` workers, longest first (each job to the
    worker that frees first)."""
    free = [0.0] * max(1, workers)
    for duration in sorted(durations, reverse=True):
        heapq.heapreplace(free, free[0] + duration)
    return max(free)


def plan_table(papers: list[Paper], overrides: list[str], pack: bool | None = None,
               recalibrate: bool = False, root: Path | None = None) -> tuple[pd.DataFrame, dict]:
    """One row per experiment (runs, jobs, steps, FLOPs, predicted times) and the totals, with
    `job_seconds`: the name of each run directory to train -> the predicted seconds of its job
    (reproduce's progress line reads them). `recalibrate`: time every job again rather than reuse
    CALIBRATIONS. Runs finished anywhere below `root` (reproduce's output folder) are counted as
    done: they are not trained again."""
    from sinkexp.runner import resolve_device

    pack = packs_pay(overrides) if pack is None else pack
    scale = scale_of(overrides)
    workers = workers_for(overrides)
    at_cpu = [o for o in overrides if o.split("=", 1)[0] != "scale"]      # calibration sizes
    cfg0 = compose_config(*[o for o in overrides if not o.startswith("hydra")])
    device = resolve_device(cfg0.device)
    threads = torch.get_num_threads()
    if device.type == "cpu" and workers > 1:
        torch.set_num_threads(1)                          # as each parallel job runs
    started, rows, durations, trained, by_run = time.perf_counter(), [], [], set(), {}
    finished = set(finished_runs(root)) if root else set()
    timings = Calibrations(device, fresh=recalibrate)
    try:
        for paper in papers:
            for exp in paper.experiments:
                seconds, flops, steps, runs, copied, done = [], 0.0, 0, 0, 0, 0
                for (job, alike), (calibration_job, _) in zip(jobs_of(exp, overrides, pack), jobs_of(exp, at_cpu, pack)):
                    cfg = compose_config(*job)
                    steps, flops = cfg.train.steps, training_flops(cfg) * cfg.train.steps
                    # Each job its runs' names: one pack, or one run for each of the alike settings.
                    alike_jobs = ([[member] for member in replica_configs(dataclasses.replace(cfg, pack=alike))]
                                  if alike else [replica_configs(cfg)])
                    to_train = []
                    for members in alike_jobs:
                        names = {f"s{member.seed}-{config_hash(member)}" for member in members}   # run dirs
                        runs += len(members)
                        if names <= finished:       # trained by an earlier command
                            done += len(members)
                        elif names <= trained:      # another experiment's job trains these runs
                            copied += len(members)
                        else:
                            trained.update(names)
                            to_train.append(names)
                    if not to_train:                # nothing to time
                        continue
                    small = cfg if calibration_job == job else compose_config(*calibration_job)
                    step, evaluation = timings.timings(small)
                    ratio = training_flops(cfg) / training_flops(small)     # 1 at scale=cpu
                    job_seconds = ratio * (cfg.train.steps * step + evaluations(cfg) * evaluation)
                    for names in to_train:
                        by_run.update(dict.fromkeys(names, job_seconds))
                        seconds.append(job_seconds)
                durations += seconds
                rows.append({"paper": paper.name, "experiment": exp.name, "runs": runs, "done": done, "copied": copied,
                             "jobs": len(seconds), "steps": steps, "GFLOP/run": flops / 1e9,
                             "s/job": sum(seconds) / max(1, len(seconds)), "job_s": sum(seconds)})
    finally:
        torch.set_num_threads(threads)
        timings.save()
    table = pd.DataFrame(rows)
    totals = {"runs": int(table["runs"].sum()), "done": int(table["done"].sum()), "jobs": int(table["jobs"].sum()),
              "wall_s": pool_time(durations, workers),
              "device": str(device), "workers": workers, "scale": scale, "pack": pack,
              "seconds": time.perf_counter() - started, "measured": timings.measured, "cache": timings.path,
              "job_seconds": by_run}
    return table, totals


def format_plan(table: pd.DataFrame, totals: dict) -> str:
    shown = table.assign(**{"GFLOP/run": table["GFLOP/run"].map("{:.3g}".format),
                            "s/job": table["s/job"].map("{:.0f}".format),
                            "job_s": table["job_s"].map("{:.0f}".format)})
    hours = totals["wall_s"] / 3600
    return (shown.to_string(index=False) + "\n"
            f"{totals['runs']} runs, {totals['done']} of them finished already, the others in {totals['jobs']} jobs "
            f"(pack: {'on' if totals['pack'] else 'off'}; copied runs train once, in another experiment), "
            f"scale={totals['scale']}: predicted wall time {totals['wall_s'] / 60:.0f} min ({hours:.1f} h) on "
            f"{totals['device']} with {totals['workers']} job(s) at once; planned in {totals['seconds']:.0f} s, "
            f"{totals['measured']} distinct jobs timed, the others' timings from {totals['cache']} "
            "(--recalibrate times all again); nothing trained (how it is predicted: sinkexp/reproduce/plan.py)")
