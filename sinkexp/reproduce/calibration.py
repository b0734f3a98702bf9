"""The calibration behind `sinkexp reproduce --estimate` (estimate.py): how long a job's training
step and evaluation take on the device at hand, each distinct job timed once and the timings kept.

Each job is built at its sizes and timed after a warm-up step and a warm-up evaluation of a few
sequences (a first evaluation pays one-time costs: 2.3 s against 0.3 s for a similar job, seen once
here): one timing of CALIBRATION_STEPS steps and one of an evaluation, with the thread count its jobs
will use (the faster of two timings each predicted `reproduce all` within 1% of this and took 121 s
against 85 s from an empty cache: docs/performance.md). On the CPU the load is probed before the
first timing and after the last (threads.busy_cores): timings taken while
other processes kept cores busy (benchmark.QUIET or more; seen here: a plan timed beside two
training processes predicted sun2026 at 10.3 h) serve this estimate, which says so, and are not kept.

Timings are kept in CALIBRATIONS (the user's cache folder) by job, for one device, torch version,
thread count and sinkexp source: a second --estimate times nothing, an edit to sinkexp's code times
again, and `--recalibrate` measures afresh.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from sinkexp.config.compositions import CACHE, PACKAGE, files_digest
from sinkexp.config.schema import Config, run_configs
from sinkexp.evaluate.evaluator import evaluate
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
        if self.measured:
            self.probe()
        if self.measured and self.busy < QUIET:
            try:  # timings of other code are dropped
                write_json(self.path, {key: value for key, value in self.kept.items() if self.source in key})
            except OSError:  # a read-only home: the next --estimate measures again
                pass
