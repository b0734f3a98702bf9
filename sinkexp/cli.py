"""The `sinkexp` command line.

    sinkexp train [-m] [--cfg job] [KEY=VALUE ...]   one run, or a Hydra multirun with -m
    sinkexp report DIR                                one table and figures for every run below DIR
    sinkexp reproduce PAPER|all|--list [KEY=VALUE]    a paper's experiments and claims (sinkexp/reproduce/)
    sinkexp intervene RUN_DIR [--layer L]             causal interventions on a finished run (interventions.py)

`train` checks every override first (every combination of a sweep; preflight.py), so a typo, a
wrong type or an impossible setting ends with one line naming the key and its valid choices, exit
code 2, and no directory written. Only then does Hydra run the job(s); the exit code is 1 when a
run did not finish. torch is imported only where needed, so `sinkexp --help` answers at once.
"""
from __future__ import annotations

import logging
import os
import re
import signal
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from sinkexp.errors import ConfigError

# torch, and the modules that import it (config, rundir, runner), are imported where they are
# needed, so that `sinkexp --help` and `--version` answer at once.

log = logging.getLogger("sinkexp")
CONFIG_MODULE = "sinkexp.conf"
USAGE = """usage: sinkexp <command> [args]
commands:
  train      train one model, or sweep with -m (sinkexp train --help lists the options)
  report     collect the runs below a directory into summary.csv and figures (sinkexp report DIR)
  reproduce  run a paper's experiments and check its claims (sinkexp reproduce PAPER|all|--list)
  intervene  causal interventions on a finished run's sink (sinkexp intervene RUN_DIR [--layer L])
options:
  --version                  print the version
  -sc install=bash|zsh|fish  print a shell-completion script for sinkexp train's overrides
                             (eval "$(sinkexp -sc install=bash)")"""


def compose_config(*overrides: str):
    """A validated Config from KEY=VALUE overrides, composed as `sinkexp train` composes it, without
    running anything (for tests and scripts)."""
    from hydra import compose, initialize_config_module

    from sinkexp.config import from_dictconfig, register_schema
    from sinkexp.rundir import register_resolvers

    register_schema()
    register_resolvers()
    with initialize_config_module(CONFIG_MODULE, version_base="1.3"):
        return from_dictconfig(compose("config", overrides=list(overrides)))


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


class Terminated(KeyboardInterrupt):
    """SIGTERM (a scheduler's preemption, `kill`): stops a run as Ctrl-C does, FAILED written."""


def _terminate(signum, frame) -> None:
    raise Terminated("stopped by SIGTERM")


def _handle_sigterm() -> None:
    try:
        signal.signal(signal.SIGTERM, _terminate)
    except ValueError:          # not the main thread (some launchers): leave the default
        pass


@hydra.main(config_path=f"pkg://{CONFIG_MODULE}", config_name="config", version_base="1.3")
def _train(dict_cfg: DictConfig) -> None:
    import torch

    from sinkexp.allocator import keep_freed_memory
    from sinkexp.config import from_dictconfig
    from sinkexp.evaluate.tables import format_summary
    from sinkexp.rundir import RunBusy, RunDirError, replica_run_dirs, status
    from sinkexp.runner import replica_configs, run_seeds
    from sinkexp.threads import choose_threads
    from sinkexp.train import Diverged

    _handle_sigterm()
    allocator = keep_freed_memory()   # before this job allocates its model and batches
    cfg = from_dictconfig(dict_cfg)
    hydra_cfg = HydraConfig.get()
    sweep = hydra_cfg.mode == RunMode.MULTIRUN
    parallel = "joblib" in str(hydra_cfg.launcher.get("_target_", ""))
    threads, why = choose_threads(cfg.threads, parallel)
    torch.set_num_threads(threads)   # before this job's first tensor operation
    cfg.device = spread_over_gpus(cfg.device, hydra_cfg)
    cfgs = replica_configs(cfg)
    dirs = [Path(hydra_cfg.runtime.output_dir)]
    if len(cfgs) > 1:   # the other seeds' directories, as each would be named alone
        full = OmegaConf.create({**OmegaConf.to_container(dict_cfg, resolve=False),
                                 "hydra": OmegaConf.to_container(hydra_cfg, resolve=False)})
        dirs += replica_run_dirs(full, sweep, [c.seed for c in cfgs[1:]])
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
                                                              "allocator": allocator})
    except RunBusy as err:
        print(f"sinkexp: {err}", file=sys.stderr)
        return
    except (Diverged, RunDirError) as err:
        marked = "FAILED written" if isinstance(err, Diverged) else "nothing written"
        print(f"sinkexp: error: {err}" + (f" ({marked}; the sweep goes on)" if sweep else ""), file=sys.stderr)
        return
    except Exception:
        if not sweep:
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


def finished(run_dir: Path, digest: str) -> bool:
    from sinkexp.rundir import META, read_json, status

    try:
        return status(run_dir) == "done" and read_json(run_dir / META).get("config_hash") == digest
    except (OSError, ValueError):
        return False


HIDDEN_GROUPS = ("task_scale", "hydra")   # chosen by scale= and Hydra's own options, not by the user directly


def help_groups() -> str:
    """`group: option, ...` for every user-facing config group (configs/<group>/*.yaml)."""
    from importlib.resources import files

    root = files(CONFIG_MODULE)
    lines = []
    for group in sorted(entry.name for entry in root.iterdir() if entry.is_dir() and entry.name not in HIDDEN_GROUPS
                        and not entry.name.startswith("_")):
        options = sorted(f.name.removesuffix(".yaml") for f in root.joinpath(group).iterdir() if f.name.endswith(".yaml"))
        lines.append(f"{group}: {', '.join(options)}")
    lines.append("hydra/launcher: parallel, slurm, submitit_local (installed with the parallel / slurm extras)")
    return "\n".join(lines) + "\n"


def help_choices() -> str:
    """`key: choice, ...` for every key that names a registry entry (the model's AXES and the optimiser)."""
    from sinkexp.config import OPTIMIZERS
    from sinkexp.model import AXES

    return "".join(f"{key}: {', '.join(registry)}\n" for key, registry in {**AXES, "train.optim": OPTIMIZERS}.items())


def train(argv: list[str]) -> int:
    from hydra._internal.utils import get_args_parser

    from sinkexp.config import register_schema
    from sinkexp.preflight import preflight
    from sinkexp.rundir import register_resolvers

    # `experiment=NAME` means what Hydra spells `+experiment=NAME` (the group is not in the defaults).
    argv = ["+" + arg if arg.startswith("experiment=") else arg for arg in argv]
    args = get_args_parser().parse_args(argv)
    if args.multirun and (args.cfg or args.info):
        print("sinkexp: error: -m cannot be combined with --cfg/--info; drop -m to print the composed config",
              file=sys.stderr)
        return 2
    register_schema()
    register_resolvers()
    for name, text in (("sinkexp_help_groups", help_groups), ("sinkexp_help_choices", help_choices)):
        OmegaConf.register_new_resolver(name, text, replace=True)
    planned = []
    if not (args.help or args.hydra_help or args.info or args.shell_completion or args.cfg):
        try:
            planned = preflight(args.overrides, args.multirun)   # one line, exit 2, nothing written
        except ConfigError as err:
            print(f"sinkexp: error: {err}", file=sys.stderr)
            return 2
    _handle_sigterm()
    # Shell completion registers itself for basename(argv[0]): the command, not "sinkexp train".
    sys.argv = ["sinkexp" if args.shell_completion else "sinkexp train", *argv]
    _train()
    unfinished = [run_dir for run_dir, digest in planned if not finished(run_dir, digest)]
    if unfinished and args.multirun:
        failed = sum((run_dir / "FAILED").exists() for run_dir in unfinished)
        print(f"sinkexp: {len(unfinished)} of {len(planned)} runs did not finish: {failed} failed (FAILED in the "
              f"directory), {len(unfinished) - failed} refused, skipped or stopped (see the lines above)",
              file=sys.stderr)
    return 1 if unfinished else 0


def complete(argv: list[str]) -> int:
    """`sinkexp -sc install=bash` / `query=bash`: Hydra's completion of `sinkexp train` overrides.

    The installed script calls `sinkexp -sc query=bash` with the whole line in COMP_LINE; the
    `train` word is dropped from it so that Hydra sees only the overrides.
    """
    line = os.environ.get("COMP_LINE")
    if line is not None:
        os.environ["COMP_LINE"] = re.sub(r"^(\s*\S+)\s+train(?=\s|$)", r"\1", line)
    return train(argv)


def main() -> None:
    from sinkexp import __version__

    argv = sys.argv[1:]
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        sys.exit(0 if argv else 2)
    if argv[0] == "--version":
        print(f"sinkexp {__version__}")
        sys.exit(0)
    if argv[0] in ("-sc", "--shell-completion"):
        sys.exit(complete(argv))
    command, rest = argv[0], argv[1:]
    commands = {"train": train, "report": lambda args: __import__("sinkexp.report").report.main(args),
                "reproduce": lambda args: __import__("sinkexp.reproduce").reproduce.main(args),
                "intervene": lambda args: __import__("sinkexp.interventions").interventions.main(args)}
    if command not in commands:
        print(f"sinkexp: error: unknown command {command!r}; choose one of: {', '.join(commands)}", file=sys.stderr)
        sys.exit(2)
    sys.exit(commands[command](rest))


if __name__ == "__main__":
    main()
