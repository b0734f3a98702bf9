"""The launch boundary: from KEY=VALUE overrides to trained run directories.

    planned = plan(["task=trigger", "attn=softmax,relu"], multirun=True)   # checks every job once
    code = launch(planned)                                                # Hydra runs the jobs

`plan` composes and checks every job before anything runs (preflight.py), so a bad value ends with
one ConfigError line and no directory written; `launch` hands the same overrides to Hydra, whose
launcher (basic, parallel, SLURM) calls `_job` once per job. `_job` is where a job meets the
process: the allocator, the thread count, the GPU it takes, its replicas' directories, and the
mapping of errors to one line. `sinkexp train` (cli.py) and `sinkexp reproduce` both come through
here, so every job is checked once and runs the same way.
"""
from __future__ import annotations

import logging
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from sinkexp import preemption
from sinkexp.config import CONFIG_MODULE
from sinkexp.faults import marked, run_file_error
from sinkexp.follow import followed

log = logging.getLogger("sinkexp")


@dataclass(frozen=True)
class Job:
    """One checked job: the overrides that run it alone, the runs it writes (a pack's: several), and
    their training FLOPs (config.training_flops x steps: how much work it is)."""
    overrides: tuple[str, ...]
    runs: tuple[tuple[Path, str], ...]   # (run directory, config hash)
    flops: float


@dataclass(frozen=True)
class Plan:
    """Checked jobs, ready for Hydra: its overrides, and every job with the run directories it writes."""
    overrides: tuple[str, ...]
    multirun: bool
    jobs: tuple[Job, ...]

    @property
    def argv(self) -> list[str]:
        return ["-m"] * self.multirun + list(self.overrides)

    @property
    def runs(self) -> tuple[tuple[Path, str], ...]:
        """(run directory, config hash) of every run, replicas and packs included."""
        return tuple(run for job in self.jobs for run in job.runs)


def plan(overrides: list[str], multirun: bool) -> Plan:
    """Compose and check every job `overrides` describe (ConfigError: one line naming the key)."""
    from sinkexp.preflight import preflight

    overrides = [as_hydra_override(o) for o in overrides]
    overrides += pack_first_values(overrides)
    jobs = preflight(overrides, multirun)
    return Plan(tuple(overrides), multirun, tuple(Job(tuple(job), tuple(runs), flops) for job, runs, flops in jobs))


def pack_first_values(overrides: list[str]) -> list[str]:
    """`pack={key: [a, b]}` makes key=a the job's own value (an override appended for each packed
    key), so that the job's config is its pack's first run and Hydra's folder for the job (its log,
    .hydra/) is that run's directory. ConfigError for a key both swept and packed."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from sinkexp.errors import ConfigError

    def parse(override: str):
        try:
            return parser.parse_override(override)
        except Exception:                 # preflight reports an override it cannot parse, in one line
            return None

    parser = OverridesParser.create()
    packs = [parse(o) for o in overrides if o.split("=", 1)[0].lstrip("+~") == "pack"]
    packs = [o.value() for o in packs if o is not None and isinstance(o.value(), dict)]
    if not packs:                         # anything else in `pack` is refused by config.replica_configs
        return []
    swept = {o.key_or_group for o in map(parse, overrides) if o is not None and o.is_sweep_override()}
    firsts = []
    for value in packs[-1:]:              # the last `pack=` wins, as for any key
        for key, values in value.items():
            if key in swept:
                raise ConfigError(f"{key} is both swept and packed (pack={value}); give its values in one place")
            if isinstance(values, list) and values:
                firsts.append(f"{key}={values[0]}")
    return firsts


def as_hydra_override(arg: str) -> str:
    """`experiment=NAME` means what Hydra spells `+experiment=NAME` (the group is not in the defaults)."""
    return "+" + arg if arg.startswith("experiment=") else arg


def launch(planned: Plan) -> int:
    """Run a plan's jobs through Hydra; 0 when every planned run ends finished, whoever trained it
    (a run skipped because another process trains it is waited for), else 1 (a sweep says how many
    did not, and why)."""
    hydra_main(planned.argv)
    unfinished = [(run_dir, digest) for run_dir, digest in planned.runs if not finished(run_dir, digest)]
    try:
        unfinished = [run_dir for run_dir, digest in unfinished if not finished_elsewhere(run_dir, digest)]
    except KeyboardInterrupt as err:  # Ctrl-C, SIGTERM: this command stops waiting; the other process goes on
        stop = preemption.Interrupted.at(err)
        print(f"sinkexp: {stop} while waiting for another process's runs; they go on there", file=sys.stderr)
        return 128 + stop.signum
    if unfinished and planned.multirun:
        failed = sum((run_dir / "FAILED").exists() for run_dir in unfinished)
        print(f"sinkexp: {len(unfinished)} of {len(planned.runs)} runs did not finish: {failed} failed (FAILED in "
              f"the directory), {len(unfinished) - failed} refused or stopped (see the lines above)",
              file=sys.stderr)
    return 1 if unfinished else 0


def finished_elsewhere(run_dir: Path, digest: str) -> bool:
    """Whether a run this command did not finish ends finished: a run whose lock another process
    holds (RunBusy: skipped here) is waited for, then read."""
    from sinkexp.runfiles import wait_for_lock

    wait_for_lock(run_dir, lambda holder: print(f"sinkexp: waiting for {holder}, which trains {run_dir}",
                                                file=sys.stderr))
    return finished(run_dir, digest)


def hydra_main(argv: list[str], prog: str = "sinkexp train") -> None:
    """Hydra's own entry with `argv` as its command line (its flags too: -m, --cfg, --help, -sc)."""
    from sinkexp.config import register_schema
    from sinkexp.rundir import register_resolvers

    register_schema()
    register_resolvers()
    _handle_sigterm()
    sys.argv = [prog, *argv]      # Hydra parses sys.argv; a single run's meta.json records it
    _job()


def compose_config(*overrides: str):
    """A validated Config from KEY=VALUE overrides, composed as `sinkexp train` composes it, without
    running anything (for tests, scripts and `reproduce --plan`); ConfigError, one line, on a bad one."""
    from hydra import compose, initialize_config_module

    from sinkexp.config import from_dictconfig, register_schema
    from sinkexp.errors import ConfigError
    from sinkexp.preflight import _explain
    from sinkexp.rundir import register_resolvers

    register_schema()
    register_resolvers()
    with initialize_config_module(CONFIG_MODULE, version_base="1.3"):
        try:
            composed = compose("config", overrides=list(overrides))
        except ConfigError:
            raise
        except Exception as err:        # Hydra's composition errors: one line naming the key
            raise _explain(list(overrides), err) from None
        return from_dictconfig(composed)


def finished(run_dir: Path, digest: str) -> bool:
    from sinkexp.runfiles import META, read_json, status

    try:
        return status(run_dir) == "done" and read_json(run_dir / META).get("config_hash") == digest
    except (OSError, ValueError):
        return False


def _terminate(signum, frame) -> None:
    """SIGTERM (`kill`, `scancel`): stops a run as Ctrl-C does, FAILED written. A submitit job's
    pre-timeout signal requeues instead (preemption.py)."""
    raise preemption.Interrupted(signal.SIGTERM)


def _handle_sigterm() -> None:
    try:
        signal.signal(signal.SIGTERM, _terminate)
    except ValueError:          # not the main thread (some launchers): leave the default
        pass


@hydra.main(config_path=f"pkg://{CONFIG_MODULE}", config_name="config", version_base="1.3")
def _job(dict_cfg: DictConfig) -> None:
    """One Hydra job: train its run (or its replicas' runs) and print each new run's table.

    A run that cannot go on ends with one line on stderr: in a sweep the other jobs go on, and
    `launch` counts the runs that did not finish."""
    import torch

    from sinkexp.allocator import keep_freed_memory
    from sinkexp.config import from_dictconfig, replica_configs
    from sinkexp.evaluate.tables import format_summary
    from sinkexp.rundir import RunBusy, RunDirError, replica_run_dirs
    from sinkexp.runfiles import status
    from sinkexp.runner import run_seeds
    from sinkexp.threads import choose_threads
    from sinkexp.train import Diverged

    # A submitit job's pre-timeout signal checkpoints, then requeues (preemption.py). watch() keeps
    # submitit's SIGTERM handler for the requeue to restore, so it comes before ours.
    preemption.watch()
    _handle_sigterm()
    allocator = keep_freed_memory()   # before this job allocates its model and batches
    cfg = from_dictconfig(dict_cfg)
    hydra_cfg = HydraConfig.get()
    sweep = hydra_cfg.mode == RunMode.MULTIRUN
    parallel = "joblib" in str(hydra_cfg.launcher.get("_target_", ""))
    threads, why = choose_threads(cfg.threads, parallel)
    torch.set_num_threads(threads)   # before this job's first tensor operation
    cfg.device = spread_over_gpus(cfg.device, hydra_cfg)
    cfgs = replica_configs(cfg)     # the first is the job's own config (plan: pack_first_values)
    dirs = [Path(hydra_cfg.runtime.output_dir)]
    if len(cfgs) > 1:   # the other runs' directories, as each would be named alone
        full = OmegaConf.create({**OmegaConf.to_container(dict_cfg, resolve=False),
                                 "hydra": OmegaConf.to_container(hydra_cfg, resolve=False)})
        dirs += replica_run_dirs(full, sweep, cfgs[1:])
    # Hydra's own record of the job (hydra.output_subdir is null so that Hydra never rewrites a
    # directory this run may not touch); written when the run starts.
    hydra_files = {"config.yaml": OmegaConf.to_yaml(dict_cfg),
                   "hydra.yaml": OmegaConf.to_yaml(OmegaConf.create({"hydra": OmegaConf.to_container(hydra_cfg)})),
                   "overrides.yaml": OmegaConf.to_yaml(hydra_cfg.overrides.task)}
    fresh = [status(run_dir) != "done" for run_dir in dirs]
    where = ", ".join(map(str, dirs))
    try:
        summaries = run_seeds(cfgs, dirs, hydra_files, notes={"threads": f"{threads} ({why}; threads=N sets it)",
                                                              "argv": job_argv(hydra_cfg, sweep),
                                                              "allocator": allocator, **followed(dict_cfg)})
    except RunBusy as err:           # another process trains it: not ours to mark (launch waits for it)
        print(f"sinkexp: {err}; skipped here", file=sys.stderr)
        return
    except KeyboardInterrupt as err:  # Ctrl-C, SIGTERM, SIGUSR2: FAILED says so; this process stops (a sweep too)
        stop = preemption.Interrupted.at(err)
        print(f"sinkexp: {where} {stop} ({marked(err)}; the same command resumes it from its last checkpoint)",
              file=sys.stderr)
        raise SystemExit(128 + stop.signum) from None
    except preemption.Requeue as err:
        print(f"sinkexp: {where} {err}; submitit requeues the job, which resumes from it", file=sys.stderr)
        preemption.requeue()         # exits this process
    except (Diverged, RunDirError, OSError) as err:   # OSError: a fault on a run's files (faults.py)
        reason = run_file_error(err) if isinstance(err, OSError) else err
        print(f"sinkexp: error: {reason} ({marked(err)}{'; the sweep goes on' if sweep else ''})", file=sys.stderr)
        return
    except Exception:
        if not sweep:                # a single run's bug shows its traceback
            raise
        log.exception("run %s failed (FAILED written); the sweep goes on", where)
        return
    for summary, run_dir, new in zip(summaries, dirs, fresh):
        if new:
            print(format_summary(summary))
            print(f"run directory: {run_dir}")


def job_argv(hydra_cfg, sweep: bool) -> list[str]:
    """The command line of this job: a multirun job's own overrides (a launcher's worker process
    may have been started by an earlier sweep, so its sys.argv can belong to another command)."""
    return ["sinkexp train", *hydra_cfg.overrides.task] if sweep else list(sys.argv)


def spread_over_gpus(device: str, hydra_cfg) -> str:
    """Local multirun jobs on a machine with several GPUs take GPU (job number mod GPU count).

    Left alone: an explicit device, single runs, one GPU, and jobs whose scheduler already chose
    (CUDA_VISIBLE_DEVICES set, as SLURM does).
    """
    import torch

    if (device != "auto" or hydra_cfg.mode != RunMode.MULTIRUN or "CUDA_VISIBLE_DEVICES" in os.environ
            or not torch.cuda.is_available() or torch.cuda.device_count() < 2):
        return device
    return f"cuda:{hydra_cfg.job.num % torch.cuda.device_count()}"
