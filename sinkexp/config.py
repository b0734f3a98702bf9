"""Typed configuration: the schema, its validation, and the conversion from Hydra's DictConfig.

The YAML files under `configs/` hold values only; the dataclasses here are the schema. Library
code receives a `Config` (plain dataclasses), never a DictConfig. Every check that can refuse a run
lives in `validate`, so that a bad value is caught before any directory or tensor is made.

The task section is typed per task: `task.name` picks the task's own dataclass from the task
registry (`sinkexp.tasks.TASKS`), so adding a task never touches this file.
"""
from __future__ import annotations

import copy
import dataclasses
import functools
import itertools
import math
import re
from dataclasses import dataclass, field
from typing import Any, Optional, Tuple

from omegaconf import MISSING, DictConfig, OmegaConf

from sinkexp.errors import ConfigError, choices_error
from sinkexp.schedule import SCHEDULES
from sinkexp.tasks import TASKS


CONFIG_MODULE = "sinkexp.conf"   # configs/, installed as a package (pyproject.toml's package-dir)
OPTIMIZERS = ("adamw", "sgd")
PRECISIONS = ("exact", "tf32")
# What may differ between the runs of one pack (besides each task's `packable` data settings): the
# replicas' own seeds, learning rates and weight decays (sinkexp/replicas.py).
PACKABLE = ("seed", "train.lr", "train.weight_decay")


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
    pos_init_std: float = 0.02   # learned positions start at N(0, std^2) (nn.Embedding's default would be 1)
    pos_into: str = "stream"     # stream | first_attn: added positions enter the residual stream, or block 0's attention input only
    qk_norm: bool = False        # RMSNorm on q and k per head
    n_registers: int = 0         # learned tokens after BOS, dropped at the output (Darcet et al. 2023)
    bos_vector: bool = False     # a learned vector added at position 0 (Fesser et al.'s sink token)
    embed_norm: bool = False     # a norm on the embedded stream (after positions and BOS vector): the residual carries the normalised input
    hide_bos: bool = False       # no query but BOS itself sees the BOS key (blocks the sink; tasks with a BOS)
    embed: str = "linear"        # linear | identity (identity: the inputs are the residual stream)
    readout: str = "linear"      # linear | identity (identity: the residual stream is the prediction)
    residual: bool = True
    bias: bool = False
    mlp_bias: Optional[bool] = None   # the MLP's Linear biases; None: as model.bias
    global_pathway: str = "none"      # none | learned | fixed: Fesser et al.'s global pathway beside attention


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
    keep_checkpoints: bool = False   # also keep each checkpoint as checkpoints/step_<N>.pt (for load_run)
    checkpoint_steps: Any = None     # null | log | [steps]: checkpoints besides every checkpoint_every (sinkexp/schedule.py)
    warmup: int = 0                  # steps of linear learning-rate warm-up (sinkexp/schedule.py)
    schedule: str = "constant"       # constant | cosine: the learning rate after the warm-up
    bos_penalty: float = 0.0         # lambda x mean attention on BOS, added to the loss (sinkexp/penalties.py)
    common_mode_penalty: float = 0.0  # lambda x sum over layers of the attention write's common-mode fraction


@dataclass
class EvalConfig:
    every: int = 250             # also evaluated at step 0 and at the last step
    batch_size: int = 512
    seed: int = 12345            # the held-out batch is the same for every run seed
    at_checkpoints: bool = False  # also evaluate at every checkpoint step (with train.checkpoint_steps=log: where sinks form)


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
    precision: str = "exact"     # exact | tf32: float32 matmuls on NVIDIA GPUs (runner.set_precision)
    pack: Any = None             # {key: [values]}: runs trained together in one process (replica_configs); not hashed



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


MAX_SEED = 2**63 - 1                 # torch generators take seeds in [0, 2^63) here
DEVICE = re.compile(r"auto|cpu|cuda(:\d+)?")
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.=,+-]*")   # one folder name: no "/", no leading "."


def packable_keys(task_name: str) -> tuple[str, ...]:
    return (*PACKABLE, *(f"task.{key}" for key in TASKS[task_name].packable))


def replica_configs(cfg: Config) -> list[Config]:
    """The lone runs one job trains together (sinkexp/replicas.py): every combination of `pack`'s
    values (the first key varies slowest), each with the seeds seed .. seed+K-1 of train.replicas=K
    (with `seed` in the pack: each packed seed .. seed+K-1). Each is the Config its lone run has
    (`pack` null), so it gets that run's hash and directory. ConfigError for a key that cannot be
    packed or a value its schema refuses."""
    pack = cfg.pack or {}
    if not isinstance(pack, dict):
        raise ConfigError(f"pack={pack} is not valid; give {{key: [values]}}, e.g. pack={{train.weight_decay:[0,0.1]}}")
    allowed = packable_keys(cfg.task.name)
    for key, values in pack.items():
        if key not in allowed:
            raise ConfigError(f"pack: {key} cannot be packed (task {cfg.task.name}); choose among: {', '.join(allowed)}")
        if not isinstance(values, (list, tuple)) or not values or len(set(map(repr, values))) != len(values):
            raise ConfigError(f"pack.{key}={values} is not valid; give a list of distinct values, e.g. [0,0.1]")
    members = []
    for combination in itertools.product(*pack.values()):
        member = copy.deepcopy(cfg)
        member.pack = None
        for key, value in zip(pack, combination):
            _set(member, key, value)
        members += [dataclasses.replace(member, seed=member.seed + k) for k in range(cfg.train.replicas)]
    return members


def value_of(cfg: Config, key: str):
    """cfg.<key> for a dotted key (train.weight_decay)."""
    return functools.reduce(getattr, key.split("."), cfg)


def _set(cfg: Config, key: str, value) -> None:
    """cfg.<key> = value, converted as Hydra's schema would convert an override (0 -> 0.0 for a float)."""
    parent, _, leaf = key.rpartition(".")
    holder = value_of(cfg, parent) if parent else cfg
    node = OmegaConf.structured(holder if parent else Config(task=None, seed=cfg.seed))
    try:
        node[leaf] = value
    except Exception as err:
        raise ConfigError(f"pack.{key}: {omegaconf_message(err)}") from None
    setattr(holder, leaf, node[leaf])


def validate(cfg: Config) -> None:
    """Refuse impossible or unknown settings with one line naming the key. Pure and cheap: the task
    is not built (its sizes come from `dims`); a data file is read once per process."""
    from sinkexp.model import AXES   # the model's registries are the valid choices

    m, t = cfg.model, cfg.train
    for key, registry in {**AXES, "train.optim": OPTIMIZERS, "train.schedule": SCHEDULES}.items():
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
    if not (math.isfinite(m.pos_init_std) and m.pos_init_std >= 0):
        raise ConfigError(f"model.pos_init_std={m.pos_init_std} is not valid; it must be a finite number >= 0")
    if m.pos_into != "stream" and m.pos not in ("learned", "sinusoidal"):
        raise ConfigError(f"model.pos_into={m.pos_into} needs added positions; model.pos={m.pos} adds none "
                          "(use model.pos=learned or sinusoidal, or drop model.pos_into)")
    if m.n_registers < 0:
        raise ConfigError(f"model.n_registers={m.n_registers} is not valid; it must be >= 0")
    if m.d_model % m.n_heads:
        raise ConfigError(f"model.d_model={m.d_model} is not divisible by model.n_heads={m.n_heads}; "
                          f"choose n_heads among the divisors of d_model")
    if m.pos == "rope" and (m.d_model // m.n_heads) % 2:
        raise ConfigError(f"model.pos=rope needs an even head dimension; d_model/n_heads = {m.d_model // m.n_heads}")
    if cfg.threads is not None and cfg.threads < 1:
        raise ConfigError(f"threads={cfg.threads} is not valid; it must be >= 1 (or null)")
    validate_optimizer(t)
    seeds = {"seed": cfg.seed + t.replicas - 1, "eval.seed": cfg.eval.seed,
             "task.structure_seed": getattr(cfg.task, "structure_seed", 0)}
    for key, value in seeds.items():
        if not 0 <= value <= MAX_SEED:
            given = getattr(cfg, "seed") if key == "seed" else value
            raise ConfigError(f"{key}={given} is not valid; seeds lie in [0, 2^63 - 1]"
                              + (f" (with train.replicas={t.replicas}, up to seed + {t.replicas - 1})"
                                 if key == "seed" and t.replicas > 1 else ""))
    if not DEVICE.fullmatch(cfg.device):
        raise choices_error("device", cfg.device, ("auto", "cpu", "cuda", "cuda:N"))
    if cfg.precision not in PRECISIONS:
        raise choices_error("precision", cfg.precision, PRECISIONS)
    if cfg.name is not None and not NAME.fullmatch(cfg.name):
        raise ConfigError(f"name={cfg.name!r} is not valid; a sweep name is one folder name under outputs/sweeps "
                          "(letters, digits, _ . = , + -; no '/', not starting with '.')")
    task_cls = TASKS[cfg.task.name]
    task_cls.validate(cfg.task)
    validate_task_needs(cfg)
    dims = task_cls.dims(cfg.task)
    for key, kind, dim in (("model.embed", m.embed, dims.input_dim), ("model.readout", m.readout, dims.output_dim)):
        if kind == "identity" and (dims.vocab_size is not None or dim != m.d_model):
            raise ConfigError(f"{key}=identity needs vector data of width model.d_model={m.d_model}; "
                              f"task {task_cls.Config.name!r} has width {dim}; use {key}=linear")
    if cfg.pack is not None:
        for member in replica_configs(cfg):   # each packed run is checked as its lone run would be
            validate(member)


def validate_task_needs(cfg: Config) -> None:
    """Penalty weights (sinkexp/penalties.py), and the options that need a BOS token or a bidirectional task."""
    from sinkexp.penalties import PENALTIES

    t, task_cls = cfg.train, TASKS[cfg.task.name]
    for key in PENALTIES:
        value = getattr(t, key)
        if not (math.isfinite(value) and value >= 0):
            raise ConfigError(f"train.{key}={value} is not valid; it must be a finite number >= 0 (0: off)")
    used = [key for key in PENALTIES if getattr(t, key) > 0]
    if used and (t.replicas > 1 or cfg.pack):
        raise ConfigError(f"train.{used[0]} is not supported with train.replicas={t.replicas} or a pack "
                          f"(pack={cfg.pack}); use train.replicas=1 and no pack")
    with_bos = ", ".join(name for name, c in TASKS.items() if c.has_bos)
    for key, value, wanted in (("model.hide_bos", "true", cfg.model.hide_bos),
                               ("train.bos_penalty", t.bos_penalty, t.bos_penalty > 0)):
        if wanted and not task_cls.has_bos:
            raise ConfigError(f"{key}={value} needs a task with a BOS token; task {cfg.task.name!r} has none "
                              f"(tasks with one: {with_bos})")
    if cfg.model.global_pathway != "none" and task_cls.causal:
        raise ConfigError(f"model.global_pathway={cfg.model.global_pathway} pools over the whole sequence, which "
                          f"a causal task must not see; task {cfg.task.name!r} is causal (bidirectional tasks: "
                          f"{', '.join(name for name, c in TASKS.items() if not c.causal)})")


def validate_optimizer(t: TrainConfig) -> None:
    """Values the optimiser would accept and then turn into NaN, or refuse mid-run."""
    finite = {"train.lr": t.lr, "train.weight_decay": t.weight_decay, "train.momentum": t.momentum,
              "train.grad_clip": t.grad_clip}
    for key, value in finite.items():
        if not math.isfinite(value):
            raise ConfigError(f"{key}={value} is not valid; it must be a finite number")
    if t.lr <= 0:
        raise ConfigError(f"train.lr={t.lr} is not valid; it must be > 0")
    steps = t.checkpoint_steps
    listed = OmegaConf.is_list(steps) or isinstance(steps, (list, tuple))
    if not (steps is None or steps == "log" or listed and all(
            isinstance(step, int) and not isinstance(step, bool) and step >= 1 for step in steps)):
        raise ConfigError(f"train.checkpoint_steps={steps} is not valid; choose null, log, or a list of steps >= 1 "
                          "(e.g. [10,20,50])")
    if not 0 <= t.warmup <= t.steps:    # a preset's warm-up follows train.steps (sinkexp/follow.py); the user's does not
        fix = f" (set train.warmup={t.steps} or less, or train.steps={t.warmup} or more)" if t.warmup > 0 else ""
        raise ConfigError(f"train.warmup={t.warmup} is not valid; it must lie in [0, train.steps={t.steps}]{fix}")
    for key in ("train.weight_decay", "train.grad_clip"):
        if finite[key] < 0:
            raise ConfigError(f"{key}={finite[key]} is not valid; it must be >= 0"
                              + (" (0 disables clipping)" if key == "train.grad_clip" else ""))
    if not 0 <= t.momentum < 1:
        raise ConfigError(f"train.momentum={t.momentum} is not valid; it must lie in [0, 1)")
    betas = list(t.betas)
    if len(betas) != 2 or not all(math.isfinite(b) and 0 <= b < 1 for b in betas):
        raise ConfigError(f"train.betas={betas} is not valid; it needs two values in [0, 1), e.g. [0.9, 0.999]")


def memory_estimate(cfg: Config) -> int:
    """Bytes a training step or an evaluation of `cfg` needs at the least (fp32): weights, gradients
    and two optimiser moments per replica, the task's structure, and the larger of the training
    step's and the captured evaluation's activations. A coarse floor, for refusing sizes no machine here can hold."""
    m, t = cfg.model, cfg.train
    dims = TASKS[cfg.task.name].dims(cfg.task)
    d, L, H = m.d_model, m.n_layers, m.n_heads
    T = dims.seq_len + m.n_registers
    width = dims.vocab_size or dims.input_dim
    mlp = 0 if m.mlp == "none" else 8 * d * d
    params = L * (4 * d * d + mlp) + width * d + d * dims.output_dim + T * d

    def activations(batch: int) -> int:   # per layer: scores and weights, and a dozen (T, d) tensors
        return L * batch * (3 * H * T * T + 12 * T * d + (12 * T * d if mlp else 0))

    data = t.data_chunk * t.batch_size * T * (dims.input_dim or 1)
    K = len(replica_configs(cfg))
    floats = (4 * params + data + dims.structure) * K + max(K * activations(t.batch_size),
                                                            activations(cfg.eval.batch_size))
    return 4 * floats


def to_dict(cfg: Config) -> dict:
    return dataclasses.asdict(cfg)


MLP_FLOPS = {"none": 0, "gelu": 16, "relu": 16, "swiglu": 16}   # x d^2 per position (4d hidden; SwiGLU 3 x 8/3 d)


def training_flops(cfg: Config) -> float:
    """Matmul FLOPs of one training step of one model, per position: per layer the q, k, v and
    output projections (8 d^2), scores and weighted values (4 T d: every key, the causal mask saves
    nothing) and the MLP, and the readout, each 3 x (forward, and the gradients of both operands);
    the input projection of vector tasks 2 x (no gradient for the data). A token embedding is a
    lookup. Norms, softmax and the optimiser are left out. tests/test_plan.py checks this against
    torch.utils.flop_counter on the explicit attention path."""
    m, t = cfg.model, cfg.train
    dims = TASKS[cfg.task.name].dims(cfg.task)
    T, d = dims.seq_len + m.n_registers, m.d_model
    blocks = m.n_layers * (8 * d * d + 4 * T * d + MLP_FLOPS[m.mlp] * d * d)
    readout = 2 * d * dims.output_dim if m.readout == "linear" else 0
    embed = 2 * d * dims.input_dim if m.embed == "linear" and dims.input_dim else 0
    return float(t.batch_size * T * (3 * (blocks + readout) + 2 * embed))
