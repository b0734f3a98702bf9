"""reproduce's own pool: every planned job of every experiment through one pool of processes (one
per core; on GPUs, each worker pinned to one GPU, as many per GPU as its free memory holds),
longest first, so no core idles at an experiment's end, with one progress line for the whole
command; each worker runs the planned job itself (launch.execute), nothing composed again. A job
whose runs another experiment's job trains (the same config and seed) copies them after it
(execute.copy_finished_runs).
"""

from __future__ import annotations

import contextlib
import io
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed

from sinkexp.config.settings import ReproduceSettings
from sinkexp.jobs.launch import execute
from sinkexp.jobs.memory import pool_gpus
from sinkexp.jobs.plan import Job, Plan
from sinkexp.machine.devices import pin_worker
from sinkexp.machine.preemption import Interrupted, sigterm_stops_children
from sinkexp.machine.threads import usable_cores
from sinkexp.reproduce.execute import copy_finished_runs, planned_dirs
from sinkexp.rundir.claim import resumes
from sinkexp.rundir.files import FAILED, finished, wait_for_lock


def workers_for(settings: ReproduceSettings) -> int:
    """Jobs at once in reproduce's pool: hydra.launcher.n_jobs=N if given, else one per usable core."""
    return settings.workers or usable_cores()


def _quiet_worker(gpus: list[str], counter) -> None:
    """A pool worker's start: no progress bars (tqdm reads TQDM_DISABLE when imported), and on GPUs
    the next GPU of `gpus` as the only one it sees (devices.pin_worker)."""
    os.environ["TQDM_DISABLE"] = "1"
    pin_worker(gpus, counter)


def pool_workers(settings: ReproduceSettings, jobs: list[Job]) -> tuple[list[str], int]:
    """The GPU of each of the pool's workers and how many workers it has: on a machine with GPUs one
    per GPU slot (memory.pool_gpus: as many per GPU as its free memory holds for the largest job's
    floor, or hydra.launcher.n_jobs in all); on the CPU, or for one named GPU, none and workers_for."""
    gpus = pool_gpus(settings.device, [job.config for job in jobs], settings.workers)
    return gpus, len(gpus) or workers_for(settings)


_stopped = False  # in a pool worker: a run of it was stopped by Ctrl-C or SIGTERM


def _in_worker(job: Job) -> tuple[float, str]:
    """One planned job in a pool worker, as a job of a sweep (one torch thread unless `threads=` is
    set); returns (seconds, what it wrote to stderr: one line per problem) once each of its runs
    has ended here or, skipped because another process trains it, there (as launch waits), so the
    pool counts every run by how it ended. Its own output (tables, log lines) is in each run's train.log."""
    global _stopped
    err = io.StringIO()
    started = time.perf_counter()
    if _stopped:  # the pool is stopping: the jobs it had queued for this worker do not start
        return 0.0, ""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            execute(job, sweep=True, parallel=True)
            for run_dir, _ in job.runs:  # one another process trains (skipped here): it holds a core meanwhile
                wait_for_lock(run_dir)
        # Ctrl-C or SIGTERM: the job wrote FAILED and said so (SystemExit), or it came while this worker
        # waited for another process's run (Interrupted). Escaping, it would reach concurrent.futures,
        # which reports it and hands the worker its next queued job: the stopped pool would train on.
        except (SystemExit, KeyboardInterrupt):
            _stopped = True
    return time.perf_counter() - started, err.getvalue()


class Progress:
    """One line for the whole command: runs done of all, failures, elapsed time and the time left:
    the predicted job-seconds still to run (estimate.py), over the workers, times how long the
    finished jobs took against their prediction. Rewritten in place on a terminal; elsewhere (a log
    file) printed at most once a minute and at the end."""

    def __init__(self, total_runs: int, done_runs: int, predicted: float, workers: int):
        self.total, self.done, self.failed = total_runs, done_runs, 0
        self.predicted, self.workers = predicted, workers  # job-seconds of the jobs to run
        self.predicted_done = self.took = 0.0  # of the jobs finished: predicted, measured
        self.started = self.printed = time.perf_counter()
        self.tty = sys.stderr.isatty()

    def finished(self, predicted: float, took: float) -> None:
        self.predicted_done += predicted
        self.took += took

    def line(self) -> str:
        elapsed = time.perf_counter() - self.started
        pace = self.took / self.predicted_done if self.predicted_done > 0 else 1.0
        left = (self.predicted - self.predicted_done) * pace / self.workers
        left = f", about {left / 60:.0f} min left" if self.predicted > 0 and left > 0 else ""
        failed = f", {self.failed} not finished" if self.failed else ""
        return f"reproduce: {self.done} of {self.total} runs done{failed}, {elapsed / 60:.0f} min elapsed{left}"

    def show(self, final: bool = False) -> None:
        now = time.perf_counter()
        if self.tty:
            print("\r\033[K" + self.line(), end="\n" if final else "", file=sys.stderr, flush=True)
        elif final or now - self.printed >= 60:
            print(self.line(), file=sys.stderr, flush=True)
            self.printed = now

    def say(self, text: str) -> None:
        """A line above the progress line (a job's error)."""
        print(("\r\033[K" if self.tty else "") + text, file=sys.stderr, flush=True)
        self.show()


def _jobs_to_run(jobs: dict[tuple[str, str], Plan]) -> tuple[list[tuple[tuple[str, str], Job]], list[Job], int]:
    """The jobs to start, by experiment; the jobs whose runs another job trains (copied after it);
    and how many runs are finished already."""
    todo, twins, done_runs, queued = [], [], 0, set()
    for key, planned in jobs.items():
        for job in planned.jobs:
            names = {run_dir.name for run_dir, _ in job.runs}
            if all(finished(run_dir, digest) for run_dir, digest in job.runs):
                done_runs += len(job.runs)
            elif names <= queued and not any(run_dir.exists() for run_dir, _ in job.runs):
                twins.append(job)  # another experiment's job trains the same runs: copied after it
            else:
                todo.append((key, job))
                queued |= names
    return todo, twins, done_runs


def run_pool(
    jobs: dict[tuple[str, str], Plan], settings: ReproduceSettings, predicted: dict[str, float] | None = None
) -> dict[tuple[str, str], float]:
    """Every job of every experiment's plan through one pool of `workers_for(settings)` processes,
    longest first (by `predicted`, else by FLOPs), with one progress line (`predicted`: run
    directory name -> the predicted seconds of its job, estimate.estimate's; without it no time left
    is shown). Returns the job-seconds each experiment took. Jobs whose runs are all finished are
    not started; a job whose runs another experiment's job trains too (the same names: the same
    config and seed) copies them after it, unless it has started them itself (an interrupted
    command), which it then resumes."""
    for planned in jobs.values():
        copy_finished_runs(planned_dirs(planned), settings.root)
    todo, twins, done_runs = _jobs_to_run(jobs)
    predicted = predicted or {}

    def prediction(job: Job) -> float:
        return max(predicted.get(run_dir.name, 0.0) for run_dir, _ in job.runs)

    todo.sort(key=lambda item: (-prediction(item[1]), -item[1].flops))  # the longest first, as the plan assumes
    gpus, workers = pool_workers(settings, [job for _, job in todo])
    progress = Progress(
        done_runs + sum(len(job.runs) for _, job in todo) + sum(len(job.runs) for job in twins),
        done_runs,
        sum(prediction(job) for _, job in todo),
        workers,
    )
    progress.show()
    seconds = {key: 0.0 for key in jobs}
    _train(todo, gpus, workers, progress, prediction, seconds)
    for planned in jobs.values():
        copy_finished_runs(planned_dirs(planned), settings.root)
    progress.done += sum(len(job.runs) for job in twins)
    progress.failed += sum(not finished(run_dir, digest) for job in twins for run_dir, digest in job.runs)
    progress.show(final=True)
    return seconds


def _train(todo: list, gpus: list[str], workers: int, progress: Progress, prediction, seconds: dict) -> None:
    """Each (experiment, job) of `todo` trained in the pool, its seconds added to its experiment's in
    `seconds` as it ends and its errors said above the progress line. Ctrl-C or SIGTERM stops the pool
    (each worker marks its running run FAILED) and the command, with exit code 128 + the signal."""
    context = multiprocessing.get_context("spawn")  # a fresh interpreter: no forked OpenMP or CUDA state
    with (
        sigterm_stops_children(),
        ProcessPoolExecutor(
            workers, mp_context=context, initializer=_quiet_worker, initargs=(gpus, context.Value("i", 0))
        ) as pool,
    ):  # GPUs in turn
        futures = {pool.submit(_in_worker, job): (key, job) for key, job in todo}
        counted = set()
        try:
            for future in as_completed(futures):
                counted.add(future)
                key, job = futures[future]
                took, errors = future.result()
                seconds[key] += took
                progress.finished(prediction(job), took)
                progress.done += len(job.runs)
                progress.failed += sum(not finished(run_dir, digest) for run_dir, digest in job.runs)
                for line in errors.splitlines():
                    if line.startswith("sinkexp"):
                        progress.say(line)
                progress.show()
        except KeyboardInterrupt as err:  # the workers got Ctrl-C (or SIGTERM) too: each marks its run FAILED
            pool.shutdown(wait=True, cancel_futures=True)
            stop = Interrupted.at(err)
            progress.show(final=True)
            running = [futures[f][1] for f in futures if f not in counted and not f.cancelled()]
            print(f"sinkexp: reproduce {stop}; {stopped_runs(running)}", file=sys.stderr)
            raise SystemExit(128 + stop.signum) from None


def stopped_runs(running: list[Job]) -> str:
    """What a stopped pool left of the jobs it was running, as its stop line says it (claim.resumes):
    a run stopped has a folder and no DONE (a job the pool had handed a worker but not started has none)."""
    stopped = [
        run_dir for job in running for run_dir, digest in job.runs if run_dir.is_dir() and not finished(run_dir, digest)
    ]
    if not stopped:
        return "no run was stopped before it finished"
    failed = sum((run_dir / FAILED).exists() for run_dir in stopped)
    runs = f"{len(stopped)} running run{'s' if len(stopped) > 1 else ''}"
    return f"{runs} stopped, {failed} of them marked FAILED; {resumes(stopped)}"
