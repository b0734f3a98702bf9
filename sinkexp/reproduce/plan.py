"""`sinkexp reproduce PAPER|all --plan`: what a reproduction trains and what it will cost, before
anything trains.

Per experiment: its runs, the jobs they form (one per run, or one per pack on a GPU), steps and
training FLOPs per run, and predicted times. The prediction is a calibration on the device at hand:
every distinct job of an experiment (its swept, unpacked settings: attention, norm, depth, ...) is
built at the CPU sizes and timed for a warm-up step, CALIBRATION_STEPS steps and one evaluation,
with the thread count its jobs will use. A run then takes steps x step time + evaluations x
evaluation time. All experiments' jobs share one pool of workers, longest first, as `reproduce`
runs them; a job whose runs another experiment trains too (the same config and seed: barbero2025's
`lm` is gu2025's softmax LM) is counted once, since `reproduce` copies the finished twin. At
scale=paper the CPU-size times are scaled by the ratio of training FLOPs (`config.training_flops`),
so a size that is bound by kernel launches rather than arithmetic (small models on a GPU) is
predicted too slow. Not counted: process start-up, checkpoint writes, other processes' load.
"""
from __future__ import annotations

import heapq
import itertools
import math
import time

import pandas as pd
import torch

from sinkexp.config import Config, packable_keys, replica_configs, training_flops
from sinkexp.launch import compose_config, pack_first_values
from sinkexp.reproduce.declare import Experiment, Paper, override_value
from sinkexp.reproduce.execute import packed_keys, packs_pay, scale_of, task_name, workers_for
from sinkexp.rundir import config_hash

CALIBRATION_STEPS = 3


def jobs_of(exp: Experiment, overrides: list[str], pack: bool) -> list[tuple[list[str], int]]:
    """The jobs `reproduce` launches for `exp`, as (overrides of one job, how many jobs cost the
    same): jobs that differ only in settings a pack may vary (seeds, weight decays, gammas, ...)
    train the same model on as much data, so one stands for all of them."""
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
        jobs.append((job + pack_first_values(job), math.prod(len(v) for v in alike.values())))
    return jobs


def evaluations(cfg: Config) -> int:
    """Evaluations a run makes: step 0, every eval.every steps, and the last step."""
    return len(range(0, cfg.train.steps, cfg.eval.every)) + 1


def calibrate(cfg: Config, device: torch.device, reps: int = 1) -> tuple[float, float]:
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


def pool_time(durations: list[float], workers: int) -> float:
    """Wall time of jobs of these durations on `workers` workers, longest first (each job to the
    worker that frees first)."""
    free = [0.0] * max(1, workers)
    for duration in sorted(durations, reverse=True):
        heapq.heapreplace(free, free[0] + duration)
    return max(free)


def plan_table(papers: list[Paper], overrides: list[str], pack: bool | None = None) -> tuple[pd.DataFrame, dict]:
    """One row per experiment (runs, jobs, steps, FLOPs, predicted times) and the totals."""
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
    started, timings, rows, durations, trained = time.perf_counter(), {}, [], [], set()
    try:
        for paper in papers:
            for exp in paper.experiments:
                seconds, flops, steps, runs, copied = [], 0.0, 0, 0, 0
                for (job, alike), (calibration_job, _) in zip(jobs_of(exp, overrides, pack), jobs_of(exp, at_cpu, pack)):
                    cfg = compose_config(*job)
                    n_runs = len(replica_configs(cfg)) * alike
                    runs, steps, flops = runs + n_runs, cfg.train.steps, training_flops(cfg) * cfg.train.steps
                    twin = (cfg.seed, config_hash(cfg), alike)
                    if twin in trained:             # another experiment's job trains these runs
                        copied += n_runs
                        continue
                    trained.add(twin)
                    small = cfg if calibration_job == job else compose_config(*calibration_job)
                    key = repr((small.task, small.model, small.attn, small.train.batch_size, small.train.data_chunk,
                                small.eval.batch_size, len(replica_configs(small))))
                    if key not in timings:
                        timings[key] = calibrate(small, device)
                    step, evaluation = timings[key]
                    ratio = training_flops(cfg) / training_flops(small)     # 1 at scale=cpu
                    seconds += [ratio * (cfg.train.steps * step + evaluations(cfg) * evaluation)] * alike
                durations += seconds
                rows.append({"paper": paper.name, "experiment": exp.name, "runs": runs, "copied": copied,
                             "jobs": len(seconds), "steps": steps, "GFLOP/run": flops / 1e9,
                             "s/job": sum(seconds) / max(1, len(seconds)), "job_s": sum(seconds)})
    finally:
        torch.set_num_threads(threads)
    table = pd.DataFrame(rows)
    totals = {"runs": int(table["runs"].sum()), "jobs": int(table["jobs"].sum()), "wall_s": pool_time(durations, workers),
              "device": str(device), "workers": workers, "scale": scale, "pack": pack,
              "calibration_s": time.perf_counter() - started, "calibrated": len(timings)}
    return table, totals


def format_plan(table: pd.DataFrame, totals: dict) -> str:
    shown = table.assign(**{"GFLOP/run": table["GFLOP/run"].map("{:.3g}".format),
                            "s/job": table["s/job"].map("{:.0f}".format),
                            "job_s": table["job_s"].map("{:.0f}".format)})
    hours = totals["wall_s"] / 3600
    return (shown.to_string(index=False) + "\n"
            f"{totals['runs']} runs in {totals['jobs']} jobs (pack: {'on' if totals['pack'] else 'off'}; copied runs "
            "train once, in another experiment), "
            f"scale={totals['scale']}: predicted wall time {totals['wall_s'] / 60:.0f} min ({hours:.1f} h) on "
            f"{totals['device']} with {totals['workers']} job(s) at once; calibrated {totals['calibrated']} "
            f"distinct jobs in {totals['calibration_s']:.0f} s; nothing trained "
            "(how it is predicted: sinkexp/reproduce/plan.py)")
