"""Typed configuration: the schema, its validation, and the conversion from Hydra's DictConfig.

The YAML files under `configs/` hold values only; the dataclasses here are the schema. Library
code receives a `Config` (plain dataclasses), never a DictConfig. Every check that can refuse a run
lives in `validate`, so that a bad value is caught before any directory or tensor is made.

The task section is typed per task: `task.name` picks the task's own dataclass from the task
registry (`sinkexp.tasks.TASKS`), so adding a task never touches this file.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Optional, Tuple

from omegaconf import MISSING, DictConfig, OmegaConf

from sinkexp.errors import ConfigError, choices_error
from sinkexp.tasks import TASKS


OPTIMIZERS = ("adamw", "sgd")


@dataclass
class AttnConfig:
    """One entry per independent axis (registries in sinkexp/model/attention.py); `name` labels the
    preset (configs/attn/<name>.yaml)."""
    name: str = "softmax"
    normaliser: str = "softmax"    # scores -> weights
    slot: str = "none"             # none | learned: a learned key/value every query sees
    gate: str = "none"             # none | headwise | elementwise: sigma(x W_g) on the head output
    sigmoid_bias: Optional[float] = None   # sigmoid's b in sigma(s + b); None = -log(number of keys)


@dataclass
class ModelConfig:
    n_layers: int = 1
    n_heads: int = 1
    d_model: int = 64
    norm: str = "pre"            # where the norm sits: pre | post | sandwich | none
    norm_type: str = "layernorm"
    final_norm: bool = False     # a norm before the readout (GPT-style); off for regression tasks
    mlp: str = "none"
    pos: str = "learned"
    qk_norm: bool = False        # RMSNorm on q and k per head
    n_registers: int = 0         # learned tokens after BOS, dropped at the output (Darcet et al. 2023)
    bos_vector: bool = False     # a learned vector added at position 0 (Fesser et al.'s sink token)
    embed: str = "linear"        # linear | identity (identity: the inputs are the residual stream)
    readout: str = "linear"      # linear | identity (identity: the residual stream is the prediction)
    residual: bool = True
    bias: bool = False


@dataclass
class TrainConfig:
    steps: int = 1500
    batch_size: int = 128
    optim: str = "adamw"
    lr: float = 3e-3
    weight_decay: float = 0.0
    betas: Tuple[float, float] = (0.9, 0.999)
    momentum: float = 0.9        # sgd only
    grad_clip: float = 1.0       # 0 disables clipping
    log_every: int = 100
    checkpoint_every: int = 500
    data_chunk: int = 1          # steps' batches drawn per sampler call (fewer GPU launches; changes the data)
    replicas: int = 1            # K > 1: seeds seed .. seed+K-1 trained together, one run directory each
    compile: bool = False        # torch.compile the training step (CUDA graphs on a GPU)


@dataclass
class EvalConfig:
    every: int = 250             # also evaluated at step 0 and at the last step
    batch_size: int = 512
    seed: int = 12345            # the held-out batch is the same for every run seed


@dataclass
class Config:
    task: Any = MISSING          # the task's own dataclass, chosen by task.name
    attn: AttnConfig = field(default_factory=AttnConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    seed: int = 0
    device: str = "auto"         # auto | cpu | cuda | cuda:N; not part of the config hash
    name: Optional[str] = None   # sweep name (folder under outputs/sweeps); not part of the hash
    threads: Optional[int] = None  # torch threads per job; None: 1 under the parallel launcher, else torch's



def register_schema() -> None:
    """Make `Config` the schema Hydra checks `configs/config.yaml` against."""
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(name="schema", node=Config)


def from_dictconfig(cfg: DictConfig) -> Config:
    """Turn Hydra's composed config into validated dataclasses (ConfigError on any bad value)."""
    # Resolve section by section: resolving `hydra` would recurse into the run-dir resolver.
    container = {key: OmegaConf.to_container(cfg[key], resolve=True) if OmegaConf.is_config(cfg[key])
                 else cfg[key] for key in cfg if key != "hydra"}
    task_section = container.pop("task", None) or {}
    name = task_section.get("name")
    if name not in TASKS:
        raise choices_error("task", name, TASKS)
    task_schema = OmegaConf.structured(TASKS[name].Config)
    try:
        task_cfg = OmegaConf.to_object(OmegaConf.merge(task_schema, task_section))
        rest = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(Config(task=None)), container))
    except Exception as err:  # omegaconf's ValidationError / ConfigKeyError carry the full key
        raise ConfigError(omegaconf_message(err)) from None
    rest.task = task_cfg
    validate(rest)
    return rest


def omegaconf_message(err: Exception) -> str:
    """One line from an OmegaConf error: its first line plus the full key it names."""
    first = str(err).splitlines()[0]
    key = getattr(err, "full_key", None)
    return f"{key}: {first}" if key and key not in first else first


def validate(cfg: Config) -> None:
    """Refuse impossible or unknown settings with one line naming the key."""
    from sinkexp.model import AXES   # the model's registries are the valid choices

    m, t = cfg.model, cfg.train
    for key, registry in {**AXES, "train.optim": OPTIMIZERS}.items():
        section, leaf = key.split(".")
        value = getattr(getattr(cfg, section), leaf)
        if value not in registry:
            raise choices_error(key, value, registry)
    positive = {"model.n_layers": m.n_layers, "model.n_heads": m.n_heads, "model.d_model": m.d_model,
                "train.steps": t.steps, "train.batch_size": t.batch_size, "train.log_every": t.log_every,
                "train.checkpoint_every": t.checkpoint_every, "train.replicas": t.replicas,
                "train.data_chunk": t.data_chunk, "eval.every": cfg.eval.every,
                "eval.batch_size": cfg.eval.batch_size}
    for key, value in positive.items():
        if value < 1:
            raise ConfigError(f"{key}={value} is not valid; it must be >= 1")
    if m.n_registers < 0:
        raise ConfigError(f"model.n_registers={m.n_registers} is not valid; it must be >= 0")
    if m.d_model % m.n_heads:
        raise ConfigError(f"model.d_model={m.d_model} is not divisible by model.n_heads={m.n_heads}; "
                          f"choose n_heads among the divisors of d_model")
    if m.pos == "rope" and (m.d_model // m.n_heads) % 2:
        raise ConfigError(f"model.pos=rope needs an even head dimension; d_model/n_heads = {m.d_model // m.n_heads}")
    if cfg.threads is not None and cfg.threads < 1:
        raise ConfigError(f"threads={cfg.threads} is not valid; it must be >= 1 (or null)")
    if t.lr <= 0:
        raise ConfigError(f"train.lr={t.lr} is not valid; it must be > 0")
    if not (cfg.device == "auto" or cfg.device == "cpu" or cfg.device.split(":")[0] == "cuda"):
        raise choices_error("device", cfg.device, ("auto", "cpu", "cuda", "cuda:N"))
    task_cls = TASKS[cfg.task.name]
    task_cls.validate(cfg.task)
    task = task_cls(cfg.task)
    for key, kind, dim in (("model.embed", m.embed, task.input_dim), ("model.readout", m.readout, task.output_dim)):
        if kind == "identity" and (task.vocab_size is not None or dim != m.d_model):
            raise ConfigError(f"{key}=identity needs vector data of width model.d_model={m.d_model}; "
                              f"task {task_cls.Config.name!r} has width {dim}; use {key}=linear")


def to_dict(cfg: Config) -> dict:
    return dataclasses.asdict(cfg)
