"""Running a plan's jobs (sinkexp/jobs/plan.py): the boundary between a command and a training process.

    code = launch(plan(read_sweep(["task=trigger", "attn=softmax,relu"], multirun=True)))   # commands/overrides.py

A single run, and a sweep with Hydra's basic launcher, run each planned job in this process
(`execute`); a sweep with another launcher (hydra/launcher=parallel, slurm, submitit_local) hands the
plan's jobs to that Hydra launcher, whose workers call `PlannedJobs` with the job number; `sinkexp
reproduce`'s pool calls `execute` in its own workers. Every path ends in `run_job`, where a job
meets the process: the allocator, the thread count, subnormal floats, the GPU it takes, its runs, and the mapping of
errors to one line. Each job runs as a Hydra job (Hydra's run_job with the planned config: its log
file, .hydra/), with the config the plan checked: nothing is composed or validated again here.
"""

from __future__ import annotations

import copy
import logging
import signal
import sys
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

import hydra
import torch
import yaml
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.core.plugins import Plugins
from hydra.core.utils import JobRuntime, setup_globals
from hydra.core.utils import run_job as hydra_run_job
from hydra.experimental.callback import Callback
from hydra.types import HydraContext, RunMode
from omegaconf import DictConfig, OmegaConf
from omegaconf._utils import get_omega_conf_dumper

from sinkexp.config.compose import initialized
from sinkexp.config.follow import followed
from sinkexp.config.identity import register_resolvers
from sinkexp.config.schema import CONFIG_MODULE, register_schema
from sinkexp.errors import ConfigError
from sinkexp.evaluate.tables import format_summary
from sinkexp.jobs.plan import Job, Plan, dir_overrides
from sinkexp.jobs.runner import Finished, train_together
from sinkexp.machine import preemption
from sinkexp.machine.allocator import keep_freed_memory
from sinkexp.machine.console import guard_stdout
from sinkexp.machine.denormals import flush_denormals
from sinkexp.machine.devices import job_device, usable_gpus
from sinkexp.machine.threads import choose_threads
from sinkexp.rundir.claim import left_behind, resumes
from sinkexp.rundir.faults import run_file_error
from sinkexp.rundir.files import RunBusy, RunDirError, finished, wait_for_lock
from sinkexp.train.loop import Diverged

log = logging.getLogger("sinkexp")
# Hydra's job hooks, none of them set: sinkexp's configs register no hydra.callbacks, so the public
# base class's no-op hooks are what Hydra's own (private) list of them would call.
NO_CALLBACKS = Callback()


def launch(planned: Plan) -> int:
    """Run a plan's jobs; 0 when every planned run ends finished, whoever trained it (a run skipped
    because another process trains it is waited for), else 1 (a sweep says how many did not, and why)."""
    preemption.stop_on_signals((signal.SIGTERM,))  # SIGTERM stops a run as Ctrl-C does, FAILED written
    if planned.multirun and not planned.launcher.basic:
        hydra_launch(planned, parallel=planned.launcher.parallel)
    else:
        for job in planned.jobs:
            execute(job, sweep=planned.multirun)
    try:
        unfinished = [run_dir for run_dir, digest in planned.runs if not finished_elsewhere(run_dir, digest)]
    except KeyboardInterrupt as err:  # Ctrl-C, SIGTERM: this command stops waiting; the other process goes on
        stop = preemption.Interrupted.at(err)
        print(f"sinkexp: {stop} while waiting for another process's runs; they go on there", file=sys.stderr)
        return 128 + stop.signum
    if planned.multirun:
        where = Path(str(planned.jobs[0].composed.hydra.sweep.dir)).absolute()  # literal: the plan wrote it
        sweep_ended(unfinished, len(planned.runs), where)
    return 1 if unfinished else 0


def job_header(number: int, overrides: list[str]) -> str:
    """The line above a sweep job's output and table (`sinkexp train -m` and `measure -m` alike)."""
    return f"== job {number}: {' '.join(overrides) or '(the sweep config alone)'}"


def sweep_ended(unfinished: list[Path], runs: int, where: Path) -> None:
    """A sweep's closing line (`train -m` and `measure -m` alike): how many of its runs finished, and
    where; on stderr, how many did not and why."""
    print(f"sweep: {runs - len(unfinished)} of {runs} runs finished, in {where}")
    if unfinished:
        failed = sum((run_dir / "FAILED").exists() for run_dir in unfinished)
        print(
            f"sinkexp: {len(unfinished)} of {runs} runs did not finish: {failed} failed (FAILED in "
            f"the directory), {len(unfinished) - failed} refused or stopped (see the lines above)",
            file=sys.stderr,
        )


def finished_elsewhere(run_dir: Path, digest: str) -> bool:
    """Whether a run ends finished (rundir.files.finished), whoever trains it: a run whose lock another
    process holds (RunBusy: skipped here) is waited for first, then read."""

    if finished(run_dir, digest):
        return True
    wait_for_lock(
        run_dir, lambda holder: print(f"sinkexp: waiting for {holder}, which trains {run_dir}", file=sys.stderr)
    )
    return finished(run_dir, digest)


def execute(job: Job, sweep: bool, parallel: bool = False) -> None:
    """One planned job in this process, as a Hydra job: Hydra's run_job makes its folder, opens its
    log and sets HydraConfig from the planned config; a single run's bug is raised again."""

    setup_globals()  # Hydra's resolvers, as in a Hydra app (a pool worker is not one)
    # sinkexp's too: a pool worker's fresh interpreter has none (config/follow.py's presets)
    register_resolvers()
    JobRuntime.instance().set("name", str(job.composed.hydra.job.name))
    keys = ("hydra.sweep.dir", "hydra.sweep.subdir") if sweep else ("hydra.run.dir", None)
    try:
        returned = hydra_run_job(
            task_function=partial(_body, job, parallel),
            config=copy.deepcopy(job.composed),
            job_dir_key=keys[0],
            job_subdir_key=keys[1],
            hydra_context=HydraContext(config_loader=None, callbacks=NO_CALLBACKS),
        )
    except KeyboardInterrupt as err:  # a stop in Hydra's own steps around the job: its folder may be made
        _stop(err, list(job.run_dirs), sweep)
    returned.return_value  # raises the job's exception (run_job keeps it)


def _body(job: Job, parallel: bool, _task_cfg: DictConfig) -> None:
    run_job(job, parallel)


@dataclass
class PlannedJobs:
    """The task function a Hydra launcher calls in its workers: the plan's job of Hydra's job
    number (the launcher composed the job again only to set Hydra's folders and log)."""

    jobs: tuple[Job, ...]
    parallel: bool

    def __call__(self, _task_cfg: DictConfig) -> None:
        guard_stdout()  # a worker prints to the command's stdout, whose reader may be gone
        run_job(self.jobs[HydraConfig.get().job.num], self.parallel)


def hydra_launch(planned: Plan, parallel: bool) -> None:
    """The plan's jobs through the Hydra launcher its config chose (joblib, submitit), in plan order."""

    master = copy.deepcopy(planned.master)
    master.hydra.mode = RunMode.MULTIRUN
    with initialized():
        context = HydraContext(config_loader=GlobalHydra.instance().config_loader(), callbacks=NO_CALLBACKS)
        HydraConfig.instance().set_config(master)
        launcher = Plugins.instance().instantiate_launcher(
            hydra_context=context, config=master, task_function=PlannedJobs(planned.jobs, parallel)
        )
        # Each job's own overrides, its directories as the plan made them, and the mode Hydra's multirun sets.
        launcher.launch(
            [[*job.overrides, *dir_overrides(job, True), "hydra.mode=MULTIRUN"] for job in planned.jobs],
            initial_job_idx=0,
        )


def run_job(job: Job, parallel: bool) -> None:
    """One job: train its run (or its replicas' runs) and print each new run's table.

    A run that cannot go on ends with one line on stderr: in a sweep the other jobs go on, and
    `launch` counts the runs that did not finish."""

    # A submitit job's pre-timeout signal checkpoints, then requeues (machine/preemption.py). watch() keeps
    # submitit's SIGTERM handler for the requeue to restore, so it comes before ours.
    preemption.watch()
    preemption.stop_on_signals((signal.SIGTERM,))
    allocator = keep_freed_memory()  # before this job allocates its model and batches
    hydra_cfg = HydraConfig.get()
    sweep = hydra_cfg.mode == RunMode.MULTIRUN
    if sweep:  # a header above the job's own output and table
        print(job_header(job.number, job.overrides), flush=True)
    threads, why = choose_threads(job.configs[0].threads, parallel)
    torch.set_num_threads(threads)  # before this job's first tensor operation
    denormals = flush_denormals()  # before its first parallel region, whose threads inherit it
    device = spread_over_gpus(job.configs[0].device, hydra_cfg)
    cfgs = [_on(cfg, device) for cfg in job.configs]
    dirs = list(job.run_dirs)
    notes = {
        "threads": f"{threads} ({why}; threads=N sets it)",
        "argv": job_argv(hydra_cfg, sweep),
        "allocator": allocator,
        "denormals": denormals,
        **followed(job.composed),
    }
    try:
        summaries = train_together(cfgs, dirs, hydra_files(job, hydra_cfg), notes)
    except BaseException as err:
        _stop(err, dirs, sweep)
        return
    for summary, run_dir in zip(summaries, dirs):
        if not isinstance(summary, Finished):  # trained here, not by another process or earlier command
            print(format_summary(summary))
            print(f"run directory: {run_dir}")


def _stop(err: BaseException, dirs: list, sweep: bool) -> None:
    """A run that cannot go on: one line on stderr (a single run's bug: its traceback)."""

    where = ", ".join(map(str, dirs))
    if isinstance(err, RunBusy):  # another process trains it: not ours to mark (launch waits for it)
        print(f"sinkexp: {err}; skipped here", file=sys.stderr)
    # Ctrl-C, SIGTERM, SIGUSR2: FAILED says so; the process stops. After a stopping signal, any error is
    # that stop (an import the signal cut short may raise something else).
    elif isinstance(err, KeyboardInterrupt) or preemption.stopping() is not None:
        stop = preemption.Interrupted.at(err) if isinstance(err, KeyboardInterrupt) else None
        stop = stop or preemption.Interrupted(preemption.stopping())
        print(f"sinkexp: {where} {stop} ({left_behind(err, dirs)}; {resumes(dirs)})", file=sys.stderr)
        raise SystemExit(128 + stop.signum) from None
    elif isinstance(err, preemption.Requeue):
        print(f"sinkexp: {where} {err}; submitit requeues the job, which resumes from it", file=sys.stderr)
        preemption.requeue()  # exits this process
    # OSError: a fault on a run's files (rundir/faults.py); ConfigError: the device, checked as the job starts
    elif isinstance(err, (Diverged, RunDirError, OSError, ConfigError)):
        reason = err
        if isinstance(err, OSError):  # what the same command does once the cause is fixed
            reason = f"{run_file_error(err)}; then {resumes(dirs)}"
        print(
            f"sinkexp: error: {reason} ({left_behind(err, dirs)}{'; the sweep goes on' if sweep else ''})",
            file=sys.stderr,
        )
    elif not sweep or not isinstance(err, Exception):  # a single run's bug shows its traceback
        raise err
    else:
        log.exception("run %s failed (%s); the sweep goes on", where, left_behind(err, dirs), exc_info=err)


def _on(cfg, device: str):
    """`cfg` with the GPU this job takes: the device kind the plan hashed stays (auto and cuda spread
    over GPUs only where CUDA is usable), and the GPU's index is not part of a run's hash."""

    return cfg if device == cfg.device else replace(cfg, device=device)


def hydra_files(job: Job, hydra_cfg) -> dict[str, str]:
    """Hydra's own record of the job, .hydra/<name> in its run directories (hydra.output_subdir is
    null so that Hydra never rewrites a directory this run may not touch); written when a run starts."""
    task_cfg = OmegaConf.to_container(job.composed, enum_to_str=True)
    del task_cfg["hydra"]
    return {
        "config.yaml": as_yaml(task_cfg),
        "hydra.yaml": as_yaml({"hydra": OmegaConf.to_container(hydra_cfg, enum_to_str=True)}),
        "overrides.yaml": OmegaConf.to_yaml(hydra_cfg.overrides.task),
    }


def as_yaml(container: dict) -> str:
    """OmegaConf.to_yaml's text of a plain container (its dumper and options), without building a config
    from it first (OmegaConf.create's copy: 8 ms of a run's set-up; tests/jobs/test_launch.py)."""
    return yaml.dump(
        container, default_flow_style=False, allow_unicode=True, sort_keys=False, Dumper=get_omega_conf_dumper()
    )


def job_argv(hydra_cfg, sweep: bool) -> list[str]:
    """The command line of this job: a multirun job's own overrides (a launcher's worker process
    may have been started by an earlier sweep, so its sys.argv can belong to another command)."""
    return ["sinkexp train", *hydra_cfg.overrides.task] if sweep else list(sys.argv)


def spread_over_gpus(device: str, hydra_cfg) -> str:
    """A sweep's jobs on a machine with several GPUs take GPU (job number mod GPU count), among the
    GPUs CUDA_VISIBLE_DEVICES leaves (a SLURM allocation's); devices.job_device decides."""

    if hydra_cfg.mode != RunMode.MULTIRUN:
        return device
    return job_device(device, hydra_cfg.job.num, usable_gpus())


def hydra_main(argv: list[str], prog: str = "sinkexp train") -> None:
    """Hydra's own entry with `argv` as its command line, for what prints rather than trains
    (--cfg, --help, --info, -sc shell completion)."""

    register_schema()
    register_resolvers()
    sys.argv = [prog, *argv]  # Hydra parses sys.argv
    hydra.main(config_path=f"pkg://{CONFIG_MODULE}", config_name="config", version_base="1.3")(lambda cfg: None)()
