"""Validation: from Hydra's composed config to a checked `Config` (sinkexp/config/schema.py is the schema).

Every check that can refuse a run lives here, so that a bad value is caught before any directory
or tensor is made: `from_dictconfig` converts and validates, `validate` checks a `Config`. Each
refusal is a ConfigError, one line naming the key and what is valid there. The checks are pure and
cheap: no task is built (its sizes come from its `dims`); a data file is read once per process.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import math
import re

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from sinkexp.config.schedule import SCHEDULES
from sinkexp.config.schema import OPTIMIZERS, PRECISIONS, Config, TrainConfig, run_configs
from sinkexp.config.typed import merged
from sinkexp.errors import ConfigError, choices_error, omegaconf_message
from sinkexp.evaluate.penalties import PENALTIES
from sinkexp.model import AXES  # the model's registries are the valid choices
from sinkexp.tasks import TASKS


def from_dictconfig(cfg: DictConfig, check: bool = True) -> Config:
    """Turn Hydra's composed config into dataclasses, validated (ConfigError on any bad value)
    unless `check` is False (a config validated already, converted again only to be named)."""
    container = resolved(cfg)
    plain = json.dumps(container, sort_keys=True, default=str)
    if plain not in _converted:  # once per config and process: the plan, then the run-dir pattern's hash
        _converted[plain] = convert(container)
    rest = copy.deepcopy(_converted[plain])
    if check:
        validate(rest)
    return rest


_converted: dict[str, Config] = {}


def convert(container: dict) -> Config:
    """The dataclasses of a resolved composed config (`resolved`), the task's schema chosen by task.name."""
    task_section = container.pop("task", None) or {}
    name = task_section.get("name")
    if name not in TASKS:
        raise choices_error("task", name, TASKS)
    task_cfg = merged(OmegaConf.structured(TASKS[name].Config), task_section, "task")
    rest = merged(OmegaConf.structured(Config(task=None)), container, "")
    rest.task = task_cfg
    return rest


def resolved(cfg: DictConfig) -> dict:
    """The composed config but `hydra` as plain values, its interpolations resolved (an override may
    use one: `train.warmup=${train.steps}`); ConfigError, one line naming the key, for one that does
    not resolve (an unknown key or resolver, an unset environment variable, a key that names itself)."""
    # Section by section: resolving `hydra` would recurse into the run-dir resolver.
    try:
        return {
            key: OmegaConf.to_container(cfg[key], resolve=True) if OmegaConf.is_config(cfg[key]) else cfg[key]
            for key in cfg
            if key != "hydra"
        }
    except OmegaConfBaseException as err:
        raise ConfigError(f"{omegaconf_message(err)}; {INTERPOLATION_HINT}") from None
    except RecursionError:
        raise ConfigError(f"an interpolation refers to itself; {INTERPOLATION_HINT}") from None


INTERPOLATION_HINT = "an override's ${...} is resolved against the composed config (e.g. train.warmup=${train.steps})"


def check_hydra_keys(cfg: DictConfig, keys: list[str]) -> None:
    """The `hydra.*` keys the overrides set (hydra.run.dir, hydra.sweep.dir, hydra.job.name, ...),
    resolved: `resolved` leaves `hydra` to Hydra, which would resolve it later with a traceback. An
    interpolation that does not resolve (`hydra.run.dir=${oops}`, `${oc.env:NOPE}`) is a
    ConfigError, one line naming the key."""
    for key in keys:
        try:
            node = OmegaConf.select(cfg, key, throw_on_resolution_failure=True)
            if OmegaConf.is_config(node):
                OmegaConf.to_container(node, resolve=True)
        except OmegaConfBaseException as err:
            message = omegaconf_message(err)
            named = message if message.startswith(f"{key}:") else f"{key}: {message}"
            raise ConfigError(f"{named}; {INTERPOLATION_HINT}") from None
        except RecursionError:
            raise ConfigError(f"{key}: an interpolation refers to itself; {INTERPOLATION_HINT}") from None


MAX_SEED = 2**63 - 1  # torch generators take seeds in [0, 2^63) here
DEVICE = re.compile(r"auto|cpu|cuda(:\d+)?")
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.=,+-]*")  # one folder name: no "/", no leading "."


def validate(cfg: Config) -> None:
    """Refuse impossible or unknown settings with one line naming the key. Pure and cheap: the task
    is not built (its sizes come from `dims`); a data file is read once per process."""
    m, t = cfg.model, cfg.train
    for key, registry in {**AXES, "train.optim": OPTIMIZERS, "train.schedule": SCHEDULES}.items():
        section, leaf = key.split(".")
        value = getattr(getattr(cfg, section), leaf)
        if value not in registry:
            raise choices_error(key, value, registry)
    validate_model(cfg)
    if cfg.threads is not None and cfg.threads < 1:
        raise ConfigError(f"threads={cfg.threads} is not valid; it must be >= 1 (or null)")
    for key in ("tensorboard", "wandb"):
        if getattr(cfg, key) and importlib.util.find_spec(key) is None:
            raise ConfigError(f"{key}=true needs the {key} package: pip install -e .[{key}]")
    validate_optimizer(t)
    validate_seeds(cfg)
    if not DEVICE.fullmatch(cfg.device):
        raise choices_error("device", cfg.device, ("auto", "cpu", "cuda", "cuda:N"))
    if cfg.precision not in PRECISIONS:
        raise choices_error("precision", cfg.precision, PRECISIONS)
    if cfg.name is not None and not NAME.fullmatch(cfg.name):
        raise ConfigError(
            f"name={cfg.name!r} is not valid; a sweep name is one folder name under outputs/sweeps "
            "(letters, digits, _ . = , + -; no '/', not starting with '.')"
        )
    task_cls = TASKS[cfg.task.name]
    task_cls.validate(cfg.task)
    validate_task_needs(cfg)
    dims = task_cls.dims(cfg.task)
    for key, kind, dim in (("model.embed", m.embed, dims.input_dim), ("model.readout", m.readout, dims.output_dim)):
        if kind == "identity" and (dims.vocab_size is not None or dim != m.d_model):
            raise ConfigError(
                f"{key}=identity needs vector data of width model.d_model={m.d_model}; "
                f"task {task_cls.Config.name!r} has width {dim}; use {key}=linear"
            )
    if cfg.pack is not None:
        for member in run_configs(cfg):  # each packed run is checked as its lone run would be
            validate(member)


def validate_model(cfg: Config) -> None:
    """Sizes that must be positive, and the model's shapes that must fit together."""
    m, t = cfg.model, cfg.train
    positive = {
        "model.n_layers": m.n_layers,
        "model.n_heads": m.n_heads,
        "model.d_model": m.d_model,
        "train.steps": t.steps,
        "train.batch_size": t.batch_size,
        "train.log_every": t.log_every,
        "train.checkpoint_every": t.checkpoint_every,
        "train.replicas": t.replicas,
        "train.data_chunk": t.data_chunk,
        "eval.every": cfg.eval.every,
        "eval.batch_size": cfg.eval.batch_size,
    }
    for key, value in positive.items():
        if value < 1:
            raise ConfigError(f"{key}={value} is not valid; it must be >= 1")
    if not (math.isfinite(m.pos_init_std) and m.pos_init_std >= 0):
        raise ConfigError(f"model.pos_init_std={m.pos_init_std} is not valid; it must be a finite number >= 0")
    if m.pos_into != "stream" and m.pos not in ("learned", "sinusoidal"):
        raise ConfigError(
            f"model.pos_into={m.pos_into} needs added positions; model.pos={m.pos} adds none "
            "(use model.pos=learned or sinusoidal, or drop model.pos_into)"
        )
    if m.n_registers < 0:
        raise ConfigError(f"model.n_registers={m.n_registers} is not valid; it must be >= 0")
    if m.d_model % m.n_heads:
        raise ConfigError(
            f"model.d_model={m.d_model} is not divisible by model.n_heads={m.n_heads}; "
            f"choose n_heads among the divisors of d_model"
        )
    if m.pos == "rope" and (m.d_model // m.n_heads) % 2:
        raise ConfigError(f"model.pos=rope needs an even head dimension; d_model/n_heads = {m.d_model // m.n_heads}")


def validate_seeds(cfg: Config) -> None:
    """Every seed a run draws from lies in torch's range."""
    t = cfg.train
    seeds = {
        "seed": cfg.seed + t.replicas - 1,
        "eval.seed": cfg.eval.seed,
        "task.structure_seed": getattr(cfg.task, "structure_seed", 0),
    }
    for key, value in seeds.items():
        if not 0 <= value <= MAX_SEED:
            given = getattr(cfg, "seed") if key == "seed" else value
            raise ConfigError(
                f"{key}={given} is not valid; seeds lie in [0, 2^63 - 1]"
                + (
                    f" (with train.replicas={t.replicas}, up to seed + {t.replicas - 1})"
                    if key == "seed" and t.replicas > 1
                    else ""
                )
            )


def validate_task_needs(cfg: Config) -> None:
    """Penalty weights (sinkexp/evaluate/penalties.py), and the options that need a BOS token or a
    bidirectional task."""
    t, task_cls = cfg.train, TASKS[cfg.task.name]
    for key in PENALTIES:
        value = getattr(t, key)
        if not (math.isfinite(value) and value >= 0):
            raise ConfigError(f"train.{key}={value} is not valid; it must be a finite number >= 0 (0: off)")
    used = [key for key in PENALTIES if getattr(t, key) > 0]
    if used and (t.replicas > 1 or cfg.pack):
        raise ConfigError(
            f"train.{used[0]} is not supported with train.replicas={t.replicas} or a pack "
            f"(pack={cfg.pack}); use train.replicas=1 and no pack"
        )
    with_bos = ", ".join(name for name, c in TASKS.items() if c.has_bos)
    for key, value, wanted in (
        ("model.hide_bos", "true", cfg.model.hide_bos),
        ("train.bos_penalty", t.bos_penalty, t.bos_penalty > 0),
    ):
        if wanted and not task_cls.has_bos:
            raise ConfigError(
                f"{key}={value} needs a task with a BOS token; task {cfg.task.name!r} has none "
                f"(tasks with one: {with_bos})"
            )
    m = cfg.model
    if m.freeze_readout and (m.readout != "linear" or t.replicas > 1 or cfg.pack):
        raise ConfigError(
            f"model.freeze_readout=true needs a trained-alone linear readout; here model.readout="
            f"{m.readout}, train.replicas={t.replicas}, pack={cfg.pack} (use linear, 1, null)"
        )
    if cfg.model.global_pathway != "none" and task_cls.causal:
        raise ConfigError(
            f"model.global_pathway={cfg.model.global_pathway} pools over the whole sequence, which "
            f"a causal task must not see; task {cfg.task.name!r} is causal (bidirectional tasks: "
            f"{', '.join(name for name, c in TASKS.items() if not c.causal)})"
        )


def validate_optimizer(t: TrainConfig) -> None:
    """Values the optimiser would accept and then turn into NaN, or refuse mid-run."""
    finite = {
        "train.lr": t.lr,
        "train.weight_decay": t.weight_decay,
        "train.momentum": t.momentum,
        "train.grad_clip": t.grad_clip,
    }
    for key, value in finite.items():
        if not math.isfinite(value):
            raise ConfigError(f"{key}={value} is not valid; it must be a finite number")
    if t.lr <= 0:
        raise ConfigError(f"train.lr={t.lr} is not valid; it must be > 0")
    steps = t.checkpoint_steps
    listed = OmegaConf.is_list(steps) or isinstance(steps, (list, tuple))
    if not (
        steps is None
        or steps == "log"
        or listed
        and all(isinstance(step, int) and not isinstance(step, bool) and step >= 1 for step in steps)
    ):
        raise ConfigError(
            f"train.checkpoint_steps={steps} is not valid; choose null, log, or a list of steps >= 1 (e.g. [10,20,50])"
        )
    # a preset's warm-up follows train.steps (sinkexp/config/follow.py); the user's does not
    if not 0 <= t.warmup <= t.steps:
        fix = f" (set train.warmup={t.steps} or less, or train.steps={t.warmup} or more)" if t.warmup > 0 else ""
        raise ConfigError(f"train.warmup={t.warmup} is not valid; it must lie in [0, train.steps={t.steps}]{fix}")
    for key in ("train.weight_decay", "train.grad_clip"):
        if finite[key] < 0:
            raise ConfigError(
                f"{key}={finite[key]} is not valid; it must be >= 0"
                + (" (0 disables clipping)" if key == "train.grad_clip" else "")
            )
    if not 0 <= t.momentum < 1:
        raise ConfigError(f"train.momentum={t.momentum} is not valid; it must lie in [0, 1)")
    betas = list(t.betas)
    if len(betas) != 2 or not all(math.isfinite(b) and 0 <= b < 1 for b in betas):
        raise ConfigError(f"train.betas={betas} is not valid; it needs two values in [0, 1), e.g. [0.9, 0.999]")
