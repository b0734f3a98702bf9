"""The `sinkexp` command line.

    sinkexp train [-m] [--cfg job] [KEY=VALUE ...]   one run, or a Hydra multirun with -m
    sinkexp report DIR                                one table and figures for every run below DIR

`train` checks every override first (every combination of a sweep), so a typo, a wrong type or
an impossible setting ends with one line naming the key and its valid choices, exit code 2, and
no directory written. Only then does Hydra run the job(s).
"""
from __future__ import annotations

import itertools
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

from sinkexp.errors import ConfigError, choices_error

# torch, and the modules that import it (config, rundir, runner), are imported where they are
# needed, so that `sinkexp --help` and `--version` answer at once.

log = logging.getLogger("sinkexp")
CONFIG_MODULE = "sinkexp.conf"
RUN_DIR_KEYS = ("hydra.run.dir", "hydra.sweep.dir", "hydra.sweep.subdir")   # where a run's directory comes from
USAGE = """usage: sinkexp <command> [args]
commands:
  train    train one model, or sweep with -m (sinkexp train --help lists the options)
  report   collect the runs below a directory into summary.csv and figures (sinkexp report DIR)
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


def _expand(overrides: list[str], multirun: bool, config_params: dict) -> list[list[str]]:
    """Every combination of a sweep's values, as lists of plain KEY=VALUE overrides.

    `config_params` is the config's own hydra.sweeper.params (an experiment's grid); the command
    line wins over it key by key, as in Hydra's basic sweeper.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    given = parser.parse_overrides(overrides)
    keys = {override.key_or_group for override in given}
    from_config = [f"{key}={value}" for key, value in config_params.items() if key not in keys] if multirun else []
    choices = []
    for override in given + parser.parse_overrides(from_config):
        if override.is_sweep_override():
            if not multirun:
                raise ConfigError(f"{override.input_line}: a sweep needs -m (sinkexp train -m ...)")
            key = override.get_key_element()
            choices.append([f"{key}={value}" for value in override.sweep_string_iterator()])
        else:
            choices.append([override.input_line])
    return [list(combination) for combination in itertools.product(*choices)]


def _explain(overrides: list[str], err: Exception) -> ConfigError:
    """Rewrite a Hydra composition error as one line naming the key and what is valid there."""
    from sinkexp.config import omegaconf_message
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser

    loader = GlobalHydra.instance().config_loader()
    groups = loader.list_groups("")
    parsed = OverridesParser.create().parse_overrides(overrides)
    chosen = []                                         # group choices, checked first
    for override in parsed:
        if override.key_or_group in groups:
            options = loader.get_group_options(override.key_or_group)
            if override.value() not in options:
                return choices_error(override.key_or_group, override.value(), options)
            chosen.append(override.input_line)
    base = hydra.compose("config", overrides=chosen)
    for override in parsed:
        key = override.key_or_group
        if key not in groups and not override.is_add() and OmegaConf.select(base, key, default=KeyError) is KeyError:
            parent, _, leaf = key.rpartition(".")
            node = OmegaConf.select(base, parent) if parent else base
            valid = sorted(str(k) for k in node.keys()) if isinstance(node, DictConfig) else []
            where = f"under '{parent}'" if parent else "at the top level"
            return ConfigError(f"{key}: unknown key; valid keys {where}: {', '.join(valid)}")
    cause = err.__cause__ or err
    return ConfigError(omegaconf_message(cause))


def preflight(overrides: list[str], multirun: bool) -> list[tuple[Path, str]]:
    """Compose and validate every job the overrides describe, with its run directories and the
    memory it needs; raise ConfigError on the first bad one. Returns every (run directory, config
    hash) the jobs will write, for the exit status."""
    from hydra import compose, initialize_config_module
    from hydra.errors import OverrideParseException

    from sinkexp.config import from_dictconfig, register_schema
    from sinkexp.rundir import register_resolvers, replica_run_dirs
    from sinkexp.runner import replica_configs, resolve_device

    register_schema()
    register_resolvers()
    checked = [o for o in overrides if not o.lstrip("+~").startswith(("hydra.", "hydra/"))]
    directories = [o for o in overrides if o.partition("=")[0] in RUN_DIR_KEYS]
    with initialize_config_module(CONFIG_MODULE, version_base="1.3"):
        try:
            plain = [o for o in checked if "," not in o.partition("=")[2]]   # enough to find an experiment's grid
            try:
                params = compose("config", overrides=plain, return_hydra_config=True).hydra.sweeper.params or {}
            except OverrideParseException:
                raise
            except Exception as err:
                raise _explain(plain, err) from None
            expanded = _expand(checked, multirun, dict(params))
        except OverrideParseException as err:
            raise ConfigError(f"cannot parse the overrides ({str(err).splitlines()[0]}); quote values with spaces "
                              "or special characters, e.g. key='a b'") from None
        jobs = []
        for job in expanded:
            try:
                full = compose("config", overrides=job + directories, return_hydra_config=True)
            except Exception as err:
                raise _explain(job, err) from None
            cfg = from_dictconfig(full)
            _check_memory(cfg, resolve_device(cfg.device))
            jobs.append((full, cfg))
    if any(cfg.train.replicas > 1 for _, cfg in jobs):
        _check_replica_dirs(jobs, multirun)
    planned = []
    for full, cfg in jobs:
        _check_patterns(full, multirun)
        seeds = replica_configs(cfg)
        for seed_cfg, run_dir in zip(seeds, replica_run_dirs(full, multirun, [c.seed for c in seeds])):
            planned.append((run_dir, _check_run_dir(run_dir, seed_cfg)))
    return planned


def _check_patterns(full: DictConfig, multirun: bool) -> None:
    keys = ("hydra.sweep.dir", "hydra.sweep.subdir") if multirun else ("hydra.run.dir",)
    for key in keys:
        if not str(OmegaConf.select(full, key)).strip():
            raise ConfigError(f"{key} is empty; give a directory (a run never writes into the current folder)")


def _check_run_dir(path: Path, cfg) -> str:
    """Refuse a directory that cannot be created or holds another config's run; returns the hash."""
    from sinkexp.rundir import RunDir, RunDirError

    for parent in [path, *path.parents]:
        if parent.exists():
            break
    resolved = parent.resolve()
    if parent != path and (not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK)
                           or resolved.parts[1:2] in (("proc",), ("sys",), ("dev",))):
        raise ConfigError(f"hydra.run.dir={path}: cannot be created ({parent} is not a writable folder)")
    run_dir = RunDir(path, cfg)
    try:
        run_dir.check()
    except RunDirError as err:
        raise ConfigError(str(err)) from None
    return run_dir.digest


def _check_memory(cfg, device) -> None:
    import torch

    from sinkexp.config import memory_estimate

    need = memory_estimate(cfg)
    if device.type == "cuda":
        have = torch.cuda.get_device_properties(device).total_memory
    else:
        have = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if need > have:
        m, t = cfg.model, cfg.train
        raise ConfigError(f"model.n_layers={m.n_layers} model.d_model={m.d_model} train.batch_size={t.batch_size} "
                          f"eval.batch_size={cfg.eval.batch_size} train.replicas={t.replicas} need at least "
                          f"{need / 2**30:.3g} GiB (weights, optimiser state, activations); {device} has "
                          f"{have / 2**30:.3g} GiB: choose smaller sizes")


def _check_replica_dirs(jobs: list, multirun: bool) -> None:
    """Refuse replicas that would share a run directory (within one job or across a sweep's jobs)."""
    from sinkexp.rundir import replica_run_dirs
    from sinkexp.runner import replica_configs

    owner: dict[Path, tuple[int, int]] = {}       # run directory -> (job number, seed)
    for number, (full, cfg) in enumerate(jobs):
        K = cfg.train.replicas
        seeds = [replica.seed for replica in replica_configs(cfg)]
        for seed, run_dir in zip(seeds, replica_run_dirs(full, multirun, seeds)):
            if run_dir in owner and owner[run_dir][0] == number:
                raise ConfigError(f"train.replicas={K}: seeds {owner[run_dir][1]} and {seed} would share the run "
                                  f"directory {run_dir}; the directory pattern (hydra.run.dir or "
                                  "hydra.sweep.subdir) must contain ${seed}")
            if run_dir in owner:
                raise ConfigError(f"train.replicas={K}: seed {seed} would be trained by two jobs of this sweep; "
                                  f"choose seeds train.replicas apart (e.g. seed=0,{K},{2 * K})")
            owner[run_dir] = (number, seed)


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

    from sinkexp.config import from_dictconfig
    from sinkexp.evaluate.tables import format_summary
    from sinkexp.rundir import RunBusy, RunDirError, replica_run_dirs, status
    from sinkexp.runner import replica_configs, run_seeds
    from sinkexp.threads import choose_threads
    from sinkexp.train import Diverged

    _handle_sigterm()
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
        summaries = run_seeds(cfgs, dirs, hydra_files, notes={"threads": f"{threads} ({why}; threads=N sets it)"})
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
            planned = preflight(args.overrides, args.multirun)
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
    commands = {"train": train, "report": lambda args: __import__("sinkexp.report").report.main(args)}
    if command not in commands:
        print(f"sinkexp: error: unknown command {command!r}; choose one of: {', '.join(commands)}", file=sys.stderr)
        sys.exit(2)
    sys.exit(commands[command](rest))


if __name__ == "__main__":
    main()
