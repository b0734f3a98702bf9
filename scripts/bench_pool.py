"""Benchmark: what a short job costs in `sinkexp reproduce`'s pool beyond its training.

    .venv/bin/python scripts/bench_pool.py                        # guo2024's 24 jobs at 2 steps, ~1 min
    .venv/bin/python scripts/bench_pool.py --paper fesser2026 --steps 2 --workers 1

Every job of the paper is planned at `--steps` steps (train.warmup=0; evaluated at step 0 and at
the last, the paper's eval.every being larger) into a new folder and trained through reproduce's
own pool (reproduce/pool.py: spawned workers, one torch thread each), timed from the pool's start
to its last job's end. Each job's training is its steps alone: `--steps` x the seconds of one
training step, as `reproduce --estimate` times it (reproduce/calibration.py: built at the job's
sizes, one thread, the faster of two timings of three steps), in this process before the pool.

Reported: the jobs, the pool's wall time, the worker-seconds per job (wall x workers / jobs: what
a job holds a worker for, the workers' start-up and the pool's idle end shared out), its training
and the difference, the cost beyond training (docs/performance.md, The reproduce pool). Another
process on the machine makes the numbers invalid: they are marked so.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import tempfile
import time
from pathlib import Path

import torch

from sinkexp.machine.benchmark import load, machine, validity
from sinkexp.reproduce.calibration import Calibrations
from sinkexp.reproduce.command import decided
from sinkexp.reproduce.execute import plan_papers
from sinkexp.reproduce.papers import PAPERS
from sinkexp.reproduce.pool import run_pool


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--paper", default="guo2024", choices=sorted(PAPERS))
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2, help="the pool's size (reproduce: one per core)")
    args = parser.parse_args()
    overrides = [f"train.steps={args.steps}", "train.warmup=0", f"hydra.launcher.n_jobs={args.workers}"]
    loads = [load()]
    with tempfile.TemporaryDirectory() as tmp:
        settings = decided(overrides, [PAPERS[args.paper]], root=Path(tmp), pack=False)
        planned = plan_papers(settings)
        jobs = [job for plan in planned.plans.values() for job in plan.jobs]
        torch.set_num_threads(1)  # as each pool worker trains
        calibrations = Calibrations(torch.device("cpu"), Path(tmp) / "calibration.json", fresh=True)
        training = [args.steps * calibrations.timings(job.config)[0] for job in jobs]
        started = time.perf_counter()
        with contextlib.redirect_stderr(io.StringIO()):  # the progress line
            job_seconds = run_pool(planned.plans, settings)
        wall = time.perf_counter() - started
    loads.append(load())
    per_job = wall * args.workers / len(jobs)
    print(machine(1))
    print(f"{args.paper}: {len(jobs)} jobs of {args.steps} steps on {args.workers} workers: pool wall {wall:.1f} s")
    print(f"in the workers: {sum(job_seconds.values()) / len(jobs):.2f} s per job (launch.execute, start to end)")
    print(f"worker-seconds per job {per_job:.2f} s, its training {statistics.mean(training):.3f} s (mean)")
    print(f"cost beyond training: {per_job - statistics.mean(training):.2f} s per job{validity(loads)}")


if __name__ == "__main__":
    main()
