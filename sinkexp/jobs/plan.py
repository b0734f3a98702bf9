"""The plan of a command: every job its overrides describe, composed and checked once, before
anything runs.

    planned = plan(read_sweep(["task=trigger", "attn=softmax,relu"], multirun=True))   # commands/overrides.py
    planned.jobs[1].configs, planned.jobs[1].run_dirs, planned.jobs[1].flops
    code = launch(planned)                   # sinkexp/jobs/launch.py runs the planned jobs

A job is what one process trains: one run, or the runs trained together by a pack or by
train.replicas (schema.run_configs), each into the directory it would have alone. Before the
first job runs, every job of a sweep is composed (config/compose.py) and validated (config/validate.py) once; it
must fit the device's memory and have run directories that can be created and hold no other
config's run. Any problem is a ConfigError: one line naming the key, and nothing written.
Everything downstream reads the plan: the launchers, `sinkexp reproduce`'s pool and its `--estimate`.
"""

from __future__ import annotations

import copy
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf, open_dict

from sinkexp.config.compose import compose, initialized, sweeper_choices
from sinkexp.config.compositions import is_kept
from sinkexp.config.identity import config_hash
from sinkexp.config.schema import Config, run_configs, value_of
from sinkexp.config.sweep import Sweep
from sinkexp.config.validate import check_hydra_keys, from_dictconfig
from sinkexp.errors import ConfigError
from sinkexp.jobs.cost import training_flops
from sinkexp.jobs.launcher import Launcher
from sinkexp.jobs.memory import check_plan
from sinkexp.machine.threads import free_cores
from sinkexp.rundir.claim import existing_run
from sinkexp.rundir.lifecycle import RunDir, RunDirError, job_run_dirs

COMPOSE_AHEAD = 8  # sweeps composed for the first time from which a pool of processes pays (docs/performance.md)


@dataclass(frozen=True)
class Job:
    """One checked job: its own overrides, Hydra's config of it (directories literal), and the runs
    it trains (one, or a pack's or replicas'), each with its directory and config hash."""

    number: int  # its place in the plan (Hydra's hydra.job.num)
    overrides: tuple[str, ...]  # KEY=VALUE that make this job alone (the sweep's values chosen)
    composed: DictConfig  # Hydra's composed config of the job, hydra node included
    config: Config  # its validated config (a pack's or replicas' as given)
    configs: tuple[Config, ...]  # its runs' configs (schema.run_configs); the first is the job's own
    run_dirs: tuple[Path, ...]
    digests: tuple[str, ...]
    flops: float  # training FLOPs of its runs (cost.training_flops x steps)

    @property
    def runs(self) -> tuple[tuple[Path, str], ...]:
        return tuple(zip(self.run_dirs, self.digests))


@dataclass(frozen=True)
class Plan:
    """A command's checked jobs, its config without sweeps (`master`: an experiment's grid) and the
    launcher Hydra's settings choose (read once from `master`)."""

    overrides: tuple[str, ...]
    multirun: bool
    jobs: tuple[Job, ...]
    master: DictConfig
    launcher: Launcher

    @property
    def runs(self) -> tuple[tuple[Path, str], ...]:
        """(run directory, config hash) of every run, replicas and packs included."""
        return tuple(run for job in self.jobs for run in job.runs)


def plan(sweep: Sweep, check_memory: bool = True) -> Plan:
    """Compose and check every job of `sweep` (the command layer's reading of its overrides,
    commands/overrides.py); ConfigError, one line naming the key. `check_memory` False leaves out
    whether each job fits its device (`reproduce --estimate` states it)."""
    multirun, own = sweep.multirun, list(sweep.own)
    with initialized():
        master = compose(list(sweep.master))
        check_hydra_keys(master, list(sweep.master_hydra_keys))
        # An experiment file's hydra.sweeper.params are config, not the command line's: they are known
        # only once the master is composed, so they are read here (compose.sweeper_choices), where each
        # sweep's configs are composed (plan_sweeps composes new sweeps in processes at once).
        grid = sweeper_choices(master) if multirun else ()
        launcher = Launcher.of(master)
        jobs = sweep.jobs(grid)
        composed = []
        for job in jobs:
            try:
                # a job of the master's own overrides is the master: composed once (a copy in a sweep,
                # whose launcher reads the master again)
                if job == own:
                    full = copy.deepcopy(master) if multirun else master
                else:
                    full = compose(job + list(sweep.hydra))
                check_hydra_keys(full, list(sweep.hydra_keys))
                cfg = from_dictconfig(full)  # config/validate.py: one line naming the key
                if check_memory:
                    check_plan(cfg, launcher, multirun)  # fits the device it will train on (jobs/memory.py)
            except ConfigError as err:  # in a sweep: which of its jobs (the combination of its values)
                raise ConfigError(f"{err} (the job {' '.join(job)})" if len(jobs) > 1 else str(err)) from None
            composed.append((job, full, cfg))
        if any(cfg.train.replicas > 1 or cfg.pack for _, _, cfg in composed):
            check_shared_dirs([(full, cfg) for _, full, cfg in composed], multirun)
        # Directories after every job has validated: a bad value is reported first, whichever job has it.
        jobs = tuple(planned_job(number, job, full, cfg, multirun) for number, (job, full, cfg) in enumerate(composed))
    return Plan(sweep.overrides, multirun, jobs, master, launcher)


def composed_before(sweep: Sweep) -> bool:
    """Whether a sweep's first composition (its master) is kept, inside an initialised Hydra."""
    return is_kept(list(sweep.master))


def plan_sweeps(sweeps: list[Sweep], check_memory: bool = True) -> list[Plan]:
    """plan() of each sweep (multirun), in order. Where COMPOSE_AHEAD or more of them are composed for
    the first time (a first command after an edit of sinkexp or a config file: 0.07-0.2 s a job),
    those are planned in a process per free core at once (none where other processes keep the cores
    busy: there it costs more than it saves), and their compositions kept (config/compositions.py);
    the first bad sweep in order raises, as one after another would."""
    with initialized():
        cold = [number for number, sweep in enumerate(sweeps) if not composed_before(sweep)]
    workers = min(free_cores(), len(cold)) if len(cold) >= COMPOSE_AHEAD else 1
    if workers < 2:
        return [plan(sweep, check_memory) for sweep in sweeps]
    context = multiprocessing.get_context("spawn")  # a fresh interpreter: no forked OpenMP state
    with ProcessPoolExecutor(workers, mp_context=context) as pool:
        largest_first = sorted(cold, key=lambda number: sweeps[number].size, reverse=True)
        ahead = {number: pool.submit(plan, sweeps[number], check_memory) for number in largest_first}
        return [
            ahead[number].result() if number in ahead else plan(sweep, check_memory)
            for number, sweep in enumerate(sweeps)
        ]


def planned_job(number: int, job: list[str], full: DictConfig, cfg: Config, multirun: bool) -> Job:
    """The job's runs with their checked directories, written into its config as literal paths (a
    launcher that composes the job again, in another process, resolves no pattern)."""
    check_patterns(full, multirun)
    run_cfgs = run_configs(cfg)
    run_dirs = job_run_dirs(full, multirun, run_cfgs)
    digests = [config_hash(run_cfg) for run_cfg in run_cfgs]
    for run_cfg, run_dir, digest in zip(run_cfgs, run_dirs, digests):
        check_run_dir(run_dir, digest, "hydra.sweep.dir" if multirun else "hydra.run.dir", run_cfg)
    with open_dict(full.hydra):
        full.hydra.mode = RunMode.MULTIRUN if multirun else RunMode.RUN
        full.hydra.job.num, full.hydra.job.id = number, f"job_id_for_{number}"  # as Hydra's basic launcher
        for key, value in literal_dirs(full, run_dirs[0], multirun).items():
            OmegaConf.update(full, key, value, merge=False)
    return Job(
        number,
        tuple(job),
        full,
        cfg,
        tuple(run_cfgs),
        tuple(run_dirs),
        tuple(digests),
        sum(training_flops(run_cfg) * run_cfg.train.steps for run_cfg in run_cfgs),
    )


def literal_dirs(full: DictConfig, run_dir: Path, multirun: bool) -> dict[str, str]:
    """The directory keys of a job whose (first) run goes to `run_dir`, as literal paths."""
    if not multirun:
        return {"hydra.run.dir": str(run_dir)}
    sweep_dir = Path(str(OmegaConf.select(full, "hydra.sweep.dir"))).absolute()
    return {"hydra.sweep.dir": str(sweep_dir), "hydra.sweep.subdir": os.path.relpath(run_dir, sweep_dir)}


def dir_overrides(job: Job, multirun: bool) -> list[str]:
    """The job's literal directory keys as overrides (for a launcher that composes it again)."""
    keys = ("hydra.sweep.dir", "hydra.sweep.subdir") if multirun else ("hydra.run.dir",)
    return [f"{key}={OmegaConf.select(job.composed, key)}" for key in keys]


def check_patterns(full: DictConfig, multirun: bool) -> None:
    """An empty pattern would put the run's files into the current folder, among the user's own."""
    keys = ("hydra.sweep.dir", "hydra.sweep.subdir") if multirun else ("hydra.run.dir",)
    for key in keys:
        if not str(OmegaConf.select(full, key)).strip():
            raise ConfigError(f"{key} is empty; give a directory (a run never writes into the current folder)")


def check_run_dir(path: Path, digest: str, key: str = "hydra.run.dir", cfg: Config | None = None) -> None:
    """Refuse a directory that cannot be created or holds another config's run (config hash
    `digest`); `key` is the setting that chooses the directory (`dir` for `sinkexp measure`)."""
    for parent in [path, *path.parents]:  # the nearest folder that exists is where mkdir would fail
        if parent.exists():
            break
    resolved = parent.resolve()  # /proc, /sys, /dev pass os.access for root, yet hold no run
    if parent != path and (
        not parent.is_dir()
        or not os.access(parent, os.W_OK | os.X_OK)
        or resolved.parts[1:2] in (("proc",), ("sys",), ("dev",))
    ):
        raise ConfigError(f"{path} cannot be created ({parent} is not a writable folder); choose another {key}")
    try:
        if cfg is not None:  # a training run: RunDir also names a run of this config on the other device kind
            RunDir(path, cfg).check()
        else:
            existing_run(path, digest, fix=f"{key} or name")
    except RunDirError as err:
        raise ConfigError(str(err)) from None


def check_shared_dirs(jobs: list[tuple[DictConfig, Config]], multirun: bool) -> None:
    """Refuse runs of a job (replicas, a pack) that would share a run directory, within one job or
    across a sweep's jobs."""
    owner: dict[Path, tuple[int, str]] = {}  # run directory -> (job number, which run)
    for number, (full, cfg) in enumerate(jobs):
        K = cfg.train.replicas
        run_cfgs = run_configs(cfg)
        for run_cfg, run_dir in zip(run_cfgs, job_run_dirs(full, multirun, run_cfgs)):
            which = " ".join(
                [
                    f"seed={run_cfg.seed}",
                    *(f"{key}={value_of(run_cfg, key)}" for key in cfg.pack or {} if key != "seed"),
                ]
            )
            if run_dir in owner and owner[run_dir][0] == number:
                raise ConfigError(
                    f"train.replicas={K}: {owner[run_dir][1]} and {which} would share the run "
                    f"directory {run_dir}; the directory pattern (hydra.run.dir or "
                    "hydra.sweep.subdir) must contain ${seed} and the config hash"
                )
            if run_dir in owner:
                raise ConfigError(
                    f"train.replicas={K}: {which} would be trained by two jobs of this sweep; "
                    f"choose seeds train.replicas apart (e.g. seed=0,{K},{2 * K})"
                )
            owner[run_dir] = (number, which)
