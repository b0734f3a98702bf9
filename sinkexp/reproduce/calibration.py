"""The calibration behind `sinkexp reproduce --estimate` (estimate.py): how long a job's training
step and evaluation take on the device at hand, each distinct job timed once and the timings kept.

Each job is built at its sizes and timed after a warm-up step and a warm-up evaluation of a few
sequences (a first evaluation pays one-time costs: 2.3 s against 0.3 s for a similar job, seen once
here): one timing of CALIBRATION_STEPS steps and one of an evaluation, with the thread count its jobs
will use (the faster of two timings each predicted `reproduce all` within 1% of this and took 121 s
against 85 s from an empty cache, on the 2-core machine when the change was made). On the CPU with
a pool of several workers the jobs are timed as reproduce's pool runs them: that many at once, in
processes of one thread each (`in_pool`), so a timing shares the memory bandwidth as the job will.
The load of other processes is probed before the first timing and after the last
(threads.busy_cores): timings taken while other processes kept cores busy (benchmark.QUIET or more;
seen here: a plan timed beside two training processes predicted sun2026 at 10.3 h) serve this
estimate, which says so, and are not kept.

Timings are kept in CALIBRATIONS (the user's cache folder) by job, for one device, torch version,
thread count and sinkexp source: a second --estimate times nothing, an edit to sinkexp's code times
again, and `--recalibrate` measures afresh.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch

from sinkexp.config.compositions import CACHE, PACKAGE, files_digest
from sinkexp.config.schema import Config, run_configs
from sinkexp.evaluate.evaluator import evaluate
from sinkexp.jobs.cost import training_flops
from sinkexp.jobs.runner import make_trainer
from sinkexp.machine.benchmark import QUIET
from sinkexp.machine.threads import busy_cores
from sinkexp.rundir.files import read_json, write_json
from sinkexp.rundir.provenance import device_name
from sinkexp.tasks import held_out_batch
from sinkexp.train.replicas import ReplicaTrainer

CALIBRATION_STEPS = 3
WARM_UP_SEQUENCES = 8  # the warm-up evaluation's batch: one-time costs paid, a full evaluation's time not
CALIBRATIONS = CACHE / "calibration.json"


def calibrate(cfg: Config, device: torch.device) -> tuple[float, float]:
    """(seconds per training step of the job, seconds per evaluation of all its runs) on `device`,
    each timed once, after a warm-up step and a warm-up evaluation of a few sequences (which pays the
    first evaluation's one-time costs)."""
    run_cfgs = run_configs(cfg)
    tasks, trainer = make_trainer(run_cfgs, device)
    trainer.train_step()  # warm-up: allocations, first kernels
    models = [view.model for view in trainer.views()] if isinstance(trainer, ReplicaTrainer) else [trainer.model]
    evaluate(models[0], tasks[0], held_out_batch(tasks[0], WARM_UP_SEQUENCES, cfg.eval.seed, device), 0)

    def timed(fn) -> float:
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        started = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return time.perf_counter() - started

    step = timed(lambda: [trainer.train_step() for _ in range(CALIBRATION_STEPS)]) / CALIBRATION_STEPS
    batch = held_out_batch(tasks[0], cfg.eval.batch_size, cfg.eval.seed, device)
    evaluation = timed(lambda: evaluate(models[0], tasks[0], batch, 0)) * len(models)
    return step, evaluation


def in_pool(cfgs: list[Config], workers: int) -> list[tuple[float, float]]:
    """calibrate() of each job on the CPU in `workers` fresh processes of one torch thread each, as
    reproduce's pool runs jobs (pool.py), the most arithmetic first (no worker idles at the end while
    the other times a large job); the timings in the order given."""
    context = multiprocessing.get_context("spawn")  # a fresh interpreter: no forked OpenMP state
    with ProcessPoolExecutor(min(workers, len(cfgs)), mp_context=context, initializer=_one_thread) as pool:
        work = [training_flops(cfg) * len(run_configs(cfg)) for cfg in cfgs]
        order = sorted(range(len(cfgs)), key=work.__getitem__, reverse=True)
        timed = dict(zip(order, pool.map(_calibrate_on_cpu, [cfgs[i] for i in order])))
        return [timed[i] for i in range(len(cfgs))]


def _one_thread() -> None:
    os.environ["TQDM_DISABLE"] = "1"
    torch.set_num_threads(1)


def _calibrate_on_cpu(cfg: Config) -> tuple[float, float]:
    return calibrate(cfg, torch.device("cpu"))


def source_digest() -> str:
    """sinkexp's code that trains and evaluates, hashed: a calibration stands only for the code it
    timed. reproduce/ (the papers' declarations, this planner) is left out: it times nothing."""
    return files_digest(PACKAGE, (".py",), skip=("reproduce",))


class Calibrations:
    """(step, evaluation) seconds by job, measured once and kept in `path` under the device, torch
    version, thread count and source digest they were measured with; `busy`: the most cores other
    processes kept busy around the CPU timings (kept only below benchmark.QUIET)."""

    def __init__(self, device: torch.device, path: Path | None = None, fresh: bool = False):
        self.device, self.path, self.measured, self.busy = device, path or CALIBRATIONS, 0, 0.0
        self.source = f"sinkexp {source_digest()}"
        self.where = (
            f"{device_name(device)} | torch {torch.__version__} | {torch.get_num_threads()} threads | {self.source}"
        )
        try:
            self.kept = {} if fresh else read_json(self.path)
        except (OSError, ValueError):  # none yet, or unreadable: measure
            self.kept = {}

    def key(self, cfg: Config) -> str:
        """What a timing stands for: the device, torch, threads and code, and what sets a job's cost
        (its task, model, attention, batch sizes and number of runs, not its seeds or learning rates)."""
        cost = (
            cfg.task,
            cfg.model,
            cfg.attn,
            cfg.train.batch_size,
            cfg.train.data_chunk,
            cfg.eval.batch_size,
            len(run_configs(cfg)),
        )
        return f"{self.where} | {cost!r}"

    def measure(self, cfgs: list[Config], workers: int = 1) -> None:
        """Time each distinct job of `cfgs` not kept yet: on the CPU `workers` at once (in_pool), else
        one after another in this process."""
        todo = {}
        for cfg in cfgs:
            key = self.key(cfg)
            if key not in self.kept:
                todo.setdefault(key, cfg)
        if not todo:
            return
        if not self.measured:
            self.probe()
        if self.device.type == "cpu" and workers > 1 and len(todo) > 1:
            timed = in_pool(list(todo.values()), workers)
        else:
            timed = [calibrate(cfg, self.device) for cfg in todo.values()]
        self.kept.update(zip(todo, timed))
        self.measured += len(todo)

    def timings(self, cfg: Config) -> tuple[float, float]:
        """(step, evaluation) seconds of a job, timed here if not kept yet."""
        key = self.key(cfg)
        if key not in self.kept:
            self.measure([cfg])
        step, evaluation = self.kept[key]
        return step, evaluation

    def probe(self) -> None:
        if self.device.type == "cpu":
            self.busy = max(self.busy, busy_cores() or 0.0)

    def save(self) -> None:
        if self.measured:
            self.probe()
        if self.measured and self.busy < QUIET:
            try:  # timings of other code are dropped
                write_json(self.path, {key: value for key, value in self.kept.items() if self.source in key})
            except OSError:  # a read-only home: the next --estimate measures again
                pass
