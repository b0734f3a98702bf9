"""The config schema: typed dataclasses, the one home of every default.

The YAML files under `configs/` hold only what differs from these defaults (a task's own sizes, an
attention preset's axes, the sizes of another scale); `register_schema` puts the
dataclasses into Hydra's ConfigStore, so a composed config has every key with its default. Library
code receives a `Config` (plain dataclasses), never a DictConfig. sinkexp/config/validate.py turns
Hydra's composed config into a checked `Config`; sinkexp/jobs/cost.py says what one costs.

The task section is typed per task: `task.name` picks the task's own dataclass from the task
registry (`sinkexp.tasks.TASKS`), so adding a task never touches this file. Importing this module
loads no torch (the task files import it on first use: sinkexp/tasks/lazy.py), so that tools that only
read the schema (a paper's declaration, `reproduce --list`) answer at once.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import itertools
from dataclasses import dataclass, field
from importlib.resources import files
from typing import Any, Optional, Tuple

from omegaconf import MISSING, OmegaConf

from sinkexp.errors import ConfigError, omegaconf_message
from sinkexp.tasks import TASKS

CONFIG_MODULE = "sinkexp.conf"  # configs/, installed as a package (pyproject.toml's package-dir)
OPTIMIZERS = ("adamw", "sgd")
PRECISIONS = ("exact", "tf32")
# Run sizes (docs/tasks.md, "Scales"): `cpu` is each task file's own; `paper` applies
# configs/task_scale/<task>_paper.yaml: the source's sizes where a source gives them (damping,
# damping_dynamics, broadcast, backcopy), sinkexp's own GPU sizes for lm and trigger (no source gives
# theirs); `reach` changes no task's sizes: it is `sinkexp reproduce`'s, each experiment's own
# smallest sizes at which its phenomenon forms on 2 CPU cores (reproduce/declare.py). Smallest to
# largest: reproduce judges a claim at the largest scale it was run at (reproduce/scales.py).
SCALES = ("cpu", "reach", "paper")
# What may differ between the runs of one pack (besides each task's `packable` data settings): the
# replicas' own seeds, learning rates and weight decays (sinkexp/train/replicas.py).
PACKABLE = ("seed", "train.lr", "train.weight_decay")

# Keys that do not change a run's result, so they stay out of its hash (and out of the report's
# grouping): a replica trained beside others, or compiled, is the same run as alone.
UNHASHED_KEYS = (
    "device",
    "name",
    "threads",
    "train.replicas",
    "train.compile",
    "train.keep_checkpoints",
    "pack",
    "tensorboard",
    "wandb",
)
# Keys added after run directories existed: at these values (the earlier behaviour) they stay out
# of the hash, so earlier runs keep their directory names, and a run that lacks one is read as
# having this value.
LATER_KEYS = {
    "train.data_chunk": 1,
    "task.sampler": "multinomial",
    "model.pos_init_std": 0.02,
    "task.centred": False,
    "model.pos_into": "stream",
    "model.mlp_bias": None,
    "model.hide_bos": False,
    "model.global_pathway": "none",
    "train.bos_penalty": 0.0,
    "train.common_mode_penalty": 0.0,
    "train.warmup": 0,
    "train.schedule": "constant",
    "model.embed_norm": False,
    "task.form": "causal",
    "train.checkpoint_steps": None,
    "eval.at_checkpoints": False,
    "precision": "exact",
    "model.attn_out": "linear",
    "model.freeze_readout": False,
}


@dataclass
class AttnConfig:
    """One entry per independent axis (registries in sinkexp/model/attention.py); `name` labels the
    preset (configs/attn/<name>.yaml)."""

    name: str = "softmax"
    normaliser: str = "softmax"  # scores -> weights
    slot: str = "none"  # none | learned: a learned key/value every query sees
    gate: str = "none"  # none | headwise | elementwise: sigma(x W_g) on the head output
    sigmoid_bias: Optional[float] = None  # sigmoid's b in sigma(s + b); None = -log(number of keys)


@dataclass
class ModelConfig:
    n_layers: int = 1
    n_heads: int = 1
    d_model: int = 64
    norm: str = "pre"  # where the norm sits: pre | post | sandwich | none
    norm_type: str = "layernorm"
    final_norm: bool = False  # a norm before the readout (GPT-style); off for regression tasks
    mlp: str = "none"
    pos: str = "learned"
    pos_init_std: float = 0.02  # learned positions start at N(0, std^2) (nn.Embedding's default would be 1)
    # stream | first_attn: added positions enter the residual stream, or block 0's attention input only
    pos_into: str = "stream"
    qk_norm: bool = False  # RMSNorm on q and k per head
    n_registers: int = 0  # learned tokens after BOS, dropped at the output (Darcet et al. 2023)
    bos_vector: bool = False  # a learned vector added at position 0 (Fesser et al.'s sink token)
    # a norm on the embedded stream (after positions and BOS vector): the residual carries the normalised input
    embed_norm: bool = False
    hide_bos: bool = False  # no query but BOS itself sees the BOS key (blocks the sink; tasks with a BOS)
    embed: str = "linear"  # linear | identity (identity: the inputs are the residual stream)
    readout: str = "linear"  # linear | identity (identity: the residual stream is the prediction)
    residual: bool = True
    bias: bool = False
    mlp_bias: Optional[bool] = None  # the MLP's Linear biases; None: as model.bias
    global_pathway: str = "none"  # none | learned | fixed: Fesser et al.'s global pathway beside attention
    attn_out: str = "linear"  # linear: W_O | identity: no W_O, each head writes its own slice of the stream
    freeze_readout: bool = False  # the readout keeps its initial weights (a control: nothing learned there)


@dataclass
class TrainConfig:
    steps: int = 1500
    batch_size: int = 128
    optim: str = "adamw"
    lr: float = 3e-3
    weight_decay: float = 0.0
    betas: Tuple[float, float] = (0.9, 0.999)
    momentum: float = 0.9  # sgd only
    grad_clip: float = 1.0  # 0 disables clipping
    log_every: int = 100
    checkpoint_every: int = 500
    data_chunk: int = 1  # steps' batches drawn per sampler call (fewer GPU launches; changes the data)
    replicas: int = 1  # K > 1: seeds seed .. seed+K-1 trained together, one run directory each
    compile: bool = False  # torch.compile the training step (CUDA graphs on a GPU)
    keep_checkpoints: bool = False  # also keep each checkpoint as checkpoints/step_<N>.pt (for load_run)
    # null | log | [steps]: checkpoints besides every checkpoint_every (sinkexp/config/schedule.py)
    checkpoint_steps: Any = None
    warmup: int = 0  # steps of linear learning-rate warm-up (sinkexp/config/schedule.py)
    schedule: str = "constant"  # constant | cosine: the learning rate after the warm-up
    bos_penalty: float = 0.0  # lambda x mean attention on BOS, added to the loss (sinkexp/evaluate/penalties.py)
    common_mode_penalty: float = 0.0  # lambda x sum over layers of the attention write's common-mode fraction


@dataclass
class EvalConfig:
    every: int = 250  # also evaluated at step 0 and at the last step
    batch_size: int = 512
    seed: int = 12345  # the held-out batch is the same for every run seed
    # also evaluate at every checkpoint step (with train.checkpoint_steps=log: where sinks form)
    at_checkpoints: bool = False


@dataclass
class Config:
    task: Any = MISSING  # the task's own dataclass, chosen by task.name
    attn: AttnConfig = field(default_factory=AttnConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    seed: int = 0
    # auto | cpu | cuda | cuda:N; hashed as its kind, a CUDA run only (identity.config_hash)
    device: str = "auto"
    name: Optional[str] = None  # sweep name (folder under outputs/sweeps); not part of the hash
    threads: Optional[int] = None  # torch threads per job; None: 1 under the parallel launcher, else torch's
    precision: str = "exact"  # exact | tf32: float32 matmuls on NVIDIA GPUs (devices.configure)
    pack: Any = None  # {key: [values]}: runs trained together in one process (run_configs); not hashed
    tensorboard: bool = False  # event files of every evaluation in the run directory (rundir/curves.py); not hashed
    wandb: bool = False  # the same into a Weights & Biases run in the run directory (rundir/tracker.py); not hashed


def register_schema() -> None:
    """Put the schema into Hydra's ConfigStore: `schema` (the root, configs/config.yaml's first
    default), each task's dataclass as `task_schema/<name>` (a task file's first default), and the
    options of `scale`, which set nothing themselves (they choose configs/task_scale/)."""
    from hydra.core.config_store import ConfigStore  # lazy: hydra (0.2 s) only to compose; readers skip it

    store = ConfigStore.instance()
    store.store(name="schema", node=Config)
    for name, task in TASKS.items():
        store.store(group="task_schema", name=name, node=task.Config)
    for scale in SCALES:
        store.store(group="scale", name=scale, node={}, package="_global_")


GROUPS = ("attn", "experiment", "model", "scale", "task")  # the groups a user chooses an option of
TASK_SCHEMA = "/task_schema/"  # a task file's first default names its schema: /task_schema/<task>@task


@functools.cache
def group_options() -> dict[str, tuple[str, ...]]:
    """Every user-facing config group's options: configs/<group>/*.yaml, and the registered scales."""
    root = files(CONFIG_MODULE)
    return {
        group: SCALES
        if group == "scale"
        else tuple(
            sorted(f.name.removesuffix(".yaml") for f in root.joinpath(group).iterdir() if f.name.endswith(".yaml"))
        )
        for group in GROUPS
    }


@functools.cache
def preset_keys(group: str, option: str) -> frozenset[str]:
    """The dotted keys a config group's option sets (configs/<group>/<option>.yaml, with the presets
    it includes: task=lm's model=llama): what choosing it brings with it."""

    def keys_of(path, package: str) -> set[str]:
        node = OmegaConf.to_container(OmegaConf.load(path))
        if path.read_text().startswith("# @package _global_"):
            package = ""
        found = set()
        for entry in node.get("defaults") or []:  # another group's preset, placed at its package
            target, _, at = str(entry).lstrip("/").partition("@")
            if "/" in target and not target.startswith(TASK_SCHEMA.strip("/")):
                found |= keys_of(files(CONFIG_MODULE).joinpath(f"{target}.yaml"), at or target.split("/")[0])
        return found | set(leaves({k: v for k, v in node.items() if k != "defaults"}, f"{package}." if package else ""))

    return frozenset(keys_of(files(CONFIG_MODULE).joinpath(group, f"{option}.yaml"), group))


def leaves(node: dict, prefix: str) -> list[str]:
    """The dotted keys of a nested mapping (its leaves)."""
    keys = []
    for key, value in node.items():
        keys += leaves(value, f"{prefix}{key}.") if isinstance(value, dict) else [f"{prefix}{key}"]
    return keys


@functools.cache
def task_of(option: str) -> str:
    """The task a task option chooses (damping_dynamics -> damping): the schema its file names."""
    defaults = OmegaConf.load(files(CONFIG_MODULE).joinpath("task", f"{option}.yaml")).get("defaults") or []
    return next(
        str(entry).removeprefix(TASK_SCHEMA).split("@")[0] for entry in defaults if str(entry).startswith(TASK_SCHEMA)
    )


def packable_keys(task_name: str) -> tuple[str, ...]:
    return (*PACKABLE, *(f"task.{key}" for key in TASKS[task_name].packable))


def run_configs(cfg: Config) -> list[Config]:
    """The lone runs one job trains together (sinkexp/train/replicas.py): every combination of `pack`'s
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
            raise ConfigError(
                f"pack: {key} cannot be packed (task {cfg.task.name}); choose among: {', '.join(allowed)}"
            )
        if not isinstance(values, (list, tuple)) or not values or len(set(map(repr, values))) != len(values):
            raise ConfigError(f"pack.{key}={values} is not valid; give a list of distinct values, e.g. [0,0.1]")
    run_cfgs = []
    for combination in itertools.product(*pack.values()):
        run_cfg = copy.deepcopy(cfg)
        run_cfg.pack = None
        for key, value in zip(pack, combination):
            _set(run_cfg, key, value)
        run_cfgs += [dataclasses.replace(run_cfg, seed=run_cfg.seed + k) for k in range(cfg.train.replicas)]
    return run_cfgs


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


def to_dict(cfg: Config) -> dict:
    return dataclasses.asdict(cfg)
