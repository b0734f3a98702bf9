"""Everything `sinkexp train` checks before anything runs: the overrides parse and compose, every
job of a sweep validates (config.validate), fits the device's memory, and has a run directory that
can be created and holds no other config's run. Any problem is a ConfigError: one line naming the
key and what is valid there.
"""
from __future__ import annotations

import itertools
import os
from pathlib import Path

import hydra
import torch
from omegaconf import DictConfig, OmegaConf

from sinkexp.config import (CONFIG_MODULE, from_dictconfig, memory_estimate, omegaconf_message, register_schema,
                            replica_configs, training_flops, value_of)
from sinkexp.errors import ConfigError, choices_error
from sinkexp.rundir import RunDir, RunDirError, register_resolvers, replica_run_dirs
from sinkexp.runner import resolve_device

RUN_DIR_KEYS = ("hydra.run.dir", "hydra.sweep.dir", "hydra.sweep.subdir")   # where a run's directory comes from


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
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser

    loader = GlobalHydra.instance().config_loader()
    groups = loader.list_groups("")
    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except Exception as parse_error:
        return ConfigError(f"cannot parse the overrides ({str(parse_error).splitlines()[0]}); quote values with "
                           "spaces or special characters, e.g. key='a b'")
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


def preflight(overrides: list[str], multirun: bool) -> list[tuple[list[str], list[tuple[Path, str]], float]]:
    """Compose and validate every job the overrides describe, with its run directories and the
    memory it needs; raise ConfigError on the first bad one. Returns each job as (its own overrides,
    the sweep's directory keys included, so that `sinkexp train -m` with them alone runs that job;
    the run directories it will write, each with its config hash; its runs' training FLOPs)."""
    from hydra import compose, initialize_config_module
    from hydra.errors import OverrideParseException

    register_schema()
    register_resolvers()
    # Hydra's own options (launcher, sweeper, logging) are Hydra's to check when it runs; only the
    # directory patterns matter here, since they decide where each run writes.
    checked = [o for o in overrides if not o.lstrip("+~").startswith(("hydra.", "hydra/"))]
    directories = [o for o in overrides if o.partition("=")[0] in RUN_DIR_KEYS]
    with initialize_config_module(CONFIG_MODULE, version_base="1.3"):
        try:   # _explain and _expand parse the overrides too; a parse error ends here either way
            # An experiment (+experiment=NAME) brings its own grid in hydra.sweeper.params: compose
            # without the swept values to read it, so that the command line's sweeps and the
            # experiment's are expanded together, as Hydra's basic sweeper would.
            plain = [o for o in checked if "," not in o.partition("=")[2]]
            try:
                params = compose("config", overrides=plain, return_hydra_config=True).hydra.sweeper.params or {}
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
            cfg = from_dictconfig(full)        # config.validate: one line naming the key
            _check_memory(cfg, resolve_device(cfg.device))
            jobs.append((full, cfg, job + directories))
    if any(cfg.train.replicas > 1 or cfg.pack for _, cfg, _ in jobs):
        _check_replica_dirs([(full, cfg) for full, cfg, _ in jobs], multirun)
    # Directories after every job has validated: a bad value is reported first, whichever job has it.
    planned = []
    for full, cfg, job in jobs:
        _check_patterns(full, multirun)
        members = replica_configs(cfg)
        planned.append((job, [(run_dir, _check_run_dir(run_dir, member, multirun))
                              for member, run_dir in zip(members, replica_run_dirs(full, multirun, members))],
                        sum(training_flops(member) * member.train.steps for member in members)))
    return planned


def _check_patterns(full: DictConfig, multirun: bool) -> None:
    """An empty pattern would put the run's files into the current folder, among the user's own."""
    keys = ("hydra.sweep.dir", "hydra.sweep.subdir") if multirun else ("hydra.run.dir",)
    for key in keys:
        if not str(OmegaConf.select(full, key)).strip():
            raise ConfigError(f"{key} is empty; give a directory (a run never writes into the current folder)")


def _check_run_dir(path: Path, cfg, multirun: bool) -> str:
    """Refuse a directory that cannot be created or holds another config's run; returns the hash."""
    for parent in [path, *path.parents]:     # the nearest folder that exists is where mkdir would fail
        if parent.exists():
            break
    resolved = parent.resolve()       # /proc, /sys, /dev pass os.access for root, yet hold no run
    if parent != path and (not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK)
                           or resolved.parts[1:2] in (("proc",), ("sys",), ("dev",))):
        raise ConfigError(f"{path} cannot be created ({parent} is not a writable folder); choose another "
                          + ("hydra.sweep.dir" if multirun else "hydra.run.dir"))
    run_dir = RunDir(path, cfg)
    try:
        run_dir.check()
    except RunDirError as err:
        raise ConfigError(str(err)) from None
    return run_dir.digest


def _check_memory(cfg, device) -> None:
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
    """Refuse runs of a job (replicas, a pack) that would share a run directory, within one job or
    across a sweep's jobs."""
    owner: dict[Path, tuple[int, str]] = {}       # run directory -> (job number, which run)
    for number, (full, cfg) in enumerate(jobs):
        K = cfg.train.replicas
        members = replica_configs(cfg)
        for member, run_dir in zip(members, replica_run_dirs(full, multirun, members)):
            which = " ".join([f"seed={member.seed}", *(f"{key}={value_of(member, key)}"
                                                         for key in cfg.pack or {} if key != "seed")])
            if run_dir in owner and owner[run_dir][0] == number:
                raise ConfigError(f"train.replicas={K}: {owner[run_dir][1]} and {which} would share the run "
                                  f"directory {run_dir}; the directory pattern (hydra.run.dir or "
                                  "hydra.sweep.subdir) must contain ${seed} and the config hash")
            if run_dir in owner:
                raise ConfigError(f"train.replicas={K}: {which} would be trained by two jobs of this sweep; "
                                  f"choose seeds train.replicas apart (e.g. seed=0,{K},{2 * K})")
            owner[run_dir] = (number, which)
