"""Config: every option composes and builds, bad values are refused with one line naming the key."""

import pytest
import torch

from sinkexp.commands.overrides import read_sweep
from sinkexp.config import schema as config_schema
from sinkexp.config.schema import group_options
from sinkexp.errors import ConfigError
from sinkexp.jobs.plan import plan
from sinkexp.model import AXES as MODEL_AXES
from sinkexp.model import Transformer
from sinkexp.tasks import TASKS

ATTN_PRESETS = group_options()["attn"]  # configs/attn/*.yaml: a new preset is tested without an edit here
AXES = {
    **{
        key: tuple(registry) for key, registry in MODEL_AXES.items() if key not in ("model.embed", "model.readout")
    },  # identity needs vector data of width d_model
    "model.qk_norm": (True,),
    "model.n_registers": (2,),
    "train.optim": config_schema.OPTIMIZERS,
    "attn": ATTN_PRESETS,
    "task": tuple(TASKS),
}
BIDIRECTIONAL = ("model.global_pathway",)  # the pathway pools over the whole sequence


@pytest.mark.parametrize("key,value", [(k, v) for k, values in AXES.items() for v in values])
def test_every_option_composes_builds_and_runs(make_config, key, value):
    cfg = make_config(f"{key}={value}", "model.n_layers=2", *(["task=broadcast"] if key in BIDIRECTIONAL else []))
    task = TASKS[cfg.task.name](cfg.task)
    model = Transformer(cfg.model, cfg.attn, task)
    batch = task.sample(2, torch.Generator().manual_seed(0), "cpu")
    loss = task.loss(model(batch.inputs), batch)[batch.loss_mask].mean()
    loss.backward()
    assert torch.isfinite(loss)


@pytest.mark.parametrize("attn", ATTN_PRESETS)
@pytest.mark.parametrize("task", sorted(TASKS))
def test_every_variant_with_every_task_runs_a_step(make_config, attn, task):
    from sinkexp.evaluate.evaluator import evaluate
    from sinkexp.jobs.runner import make_trainer

    for n_layers in (1, 2):
        cfg = make_config(
            f"task={task}",
            f"attn={attn}",
            f"model.n_layers={n_layers}",
            "model.n_registers=1",
            "train.batch_size=2",
            "device=cpu",
        )
        (task_,), trainer = make_trainer([cfg], torch.device("cpu"))
        assert torch.isfinite(trainer.train_step())
        rows, losses = evaluate(trainer.model, task_, task_.sample(4, torch.Generator().manual_seed(1), "cpu"), 1)
        metrics = {row[4] for row in rows}
        assert {"sink_attn", "register_attn", "value_norm_ratio"} <= metrics
        assert ("slot_attn" in metrics) == (cfg.attn.slot == "learned")
        assert ("gate" in metrics) == (cfg.attn.gate != "none")


def test_library_code_receives_dataclasses(make_config):
    cfg = make_config("attn=relu", "model.n_heads=4", "seed=3")
    assert isinstance(cfg, config_schema.Config) and isinstance(cfg.model, config_schema.ModelConfig)
    assert type(cfg.task) is TASKS["trigger"].Config
    assert (cfg.attn.name, cfg.model.n_heads, cfg.seed) == ("relu", 4, 3)


@pytest.mark.parametrize("task", sorted(TASKS))
def test_paper_scale_composes_for_every_task(make_config, task):
    cpu, paper = make_config(f"task={task}"), make_config(f"task={task}", "scale=paper")
    assert paper.train.steps > cpu.train.steps


@pytest.mark.parametrize(
    "overrides,needles",
    [
        (["task=nope"], ["task=", "trigger"]),
        (["attn=nope"], ["attn=", "softmax", "relu_raw", "sink_kv"]),
        (["attn.gate=sometimes"], ["attn.gate=", "headwise", "elementwise"]),
        (["model.pos=rope", "model.d_model=6", "model.n_heads=2"], ["model.pos=rope", "even"]),
        (["model.n_layer=2"], ["model.n_layer", "n_layers"]),
        (["nope=1"], ["nope", "top level"]),
        (["model.n_layers=two"], ["model.n_layers", "two"]),
        (["model.n_heads=3"], ["model.d_model=64", "model.n_heads=3"]),
        (["model.n_layers=0"], ["model.n_layers=0", ">= 1"]),
        (["task.seq_len=2"], ["task.seq_len=2", ">= 3"]),
        (["task.p_trigger=1.5"], ["task.p_trigger=1.5", "[0, 1]"]),
        (["train.steps=0"], ["train.steps=0"]),
        (["model.norm=middle"], ["model.norm=", "pre", "sandwich"]),
        (["attn.slot=two"], ["attn.slot=", "none", "learned"]),
        (["model.mlp=tanh"], ["model.mlp=", "gelu", "swiglu"]),
        (["model.pos=alibi"], ["model.pos=", "learned", "rope"]),
        (["model.pos_into=middle"], ["model.pos_into=", "stream", "first_attn"]),
        (["task=broadcast", "model.hide_bos=true"], ["model.hide_bos=true", "'broadcast' has none", "trigger"]),
        (["model.pos=rope", "model.pos_into=first_attn"], ["model.pos_into=first_attn", "model.pos=rope", "learned"]),
        (["task=broadcast", "train.bos_penalty=1"], ["train.bos_penalty=1", "'broadcast' has none", "trigger"]),
        (["train.bos_penalty=-1"], ["train.bos_penalty=-1", ">= 0"]),
        (["train.common_mode_penalty=nan"], ["train.common_mode_penalty=nan", "finite"]),
        (["train.bos_penalty=1", "train.replicas=2"], ["train.bos_penalty", "train.replicas=2"]),
        (["model.global_pathway=sometimes"], ["model.global_pathway=", "none", "learned", "fixed"]),
        (["model.global_pathway=learned"], ["model.global_pathway=learned", "causal", "broadcast"]),
        (["model.norm_type=batchnorm"], ["model.norm_type=", "layernorm", "dyt"]),
        (["device=tpu"], ["device=", "auto", "cuda"]),
        (["model.embed=identity"], ["model.embed=identity", "model.d_model=64", "width 18"]),
        (["task=backcopy", "model.readout=identity"], ["model.readout=identity", "use model.readout=linear"]),
        (["task=damping", "task.p=1.0"], ["task.p=1.0", "(0, 1)"]),
        (["task=broadcast", "task.d=1", "model.d_model=1"], ["task.d=1", ">= 2", "task.centred=false"]),
        (["task=backcopy", "task.bigram_table=/nonexistent.json"], ["task.bigram_table=/nonexistent.json"]),
        (["scale=huge"], ["scale=", "cpu", "paper"]),
        (["model.n_layers=é"], ["cannot parse the overrides"]),
        (["model.n_layers=[1"], ["cannot parse the overrides"]),
        (["device=cuda:abc"], ["device=", "cuda:N"]),
        (["precision=bf16"], ["precision='bf16'", "exact", "tf32"]),
        (["hydra.run.dir="], ["hydra.run.dir is empty"]),
        (["hydra.run.dir=/proc/sinkexp"], ["/proc/sinkexp cannot be created", "choose another hydra.run.dir"]),
        (["name=../../x"], ["name=", "one folder name"]),
        (["model.n_layers=1000000000"], ["model.n_layers=1000000000", "GiB"]),
        (["train.batch_size=100000000"], ["train.batch_size=100000000", "GiB"]),
        (["train.lr=nan"], ["train.lr=nan", "finite"]),
        (["train.lr=inf"], ["train.lr=inf", "finite"]),
        (["train.weight_decay=-1"], ["train.weight_decay=-1", ">= 0"]),
        (["train.betas=[1.5,0.9]"], ["train.betas", "[0, 1)"]),
        (["train.betas=[0.9]"], ["train.betas", "two values"]),
        (["train.optim=sgd", "train.momentum=-0.5"], ["train.momentum=-0.5", "[0, 1)"]),
        (["train.grad_clip=-1"], ["train.grad_clip=-1", ">= 0"]),
        (["seed=9223372036854775808"], ["seed=", "2^63"]),
        (["seed=9223372036854775807", "train.replicas=2"], ["seed=", "train.replicas=2"]),
        (["eval.seed=-1"], ["eval.seed=-1"]),
        (["model.pos_init_std=-1"], ["model.pos_init_std=-1", ">= 0"]),
        (["name=${oops}"], ["name: Interpolation key 'oops' not found", "resolved against the composed config"]),
        (["train.lr=${oc.env:SINKEXP_UNSET_VARIABLE}"], ["train.lr:", "SINKEXP_UNSET_VARIABLE", "${...}"]),
        (["train.lr=${train.lr}"], ["train.lr: Recursive interpolation", "${...}"]),
        (["seed=${nosuch:1}"], ["seed: Unsupported interpolation type nosuch", "${...}"]),
        (["name=a\nb"], ["cannot parse the overrides: 'name=a\\nb'"]),
    ],
)
def test_bad_input_is_one_line_naming_the_key(make_config, overrides, needles):
    with pytest.raises(ConfigError) as err:
        plan(read_sweep(overrides, multirun=False))
    message = str(err.value)
    assert "\n" not in message
    for needle in needles:
        assert needle in message


def test_an_override_may_refer_to_another_key(make_config):
    cfg = make_config("train.steps=40", "train.warmup=${train.steps}")
    assert cfg.train.warmup == 40
    from sinkexp.config.identity import config_hash

    assert config_hash(cfg) == config_hash(make_config("train.steps=40", "train.warmup=40"))  # the value, not the text


def test_a_sweep_into_a_folder_that_cannot_be_written_names_the_key_the_user_set():
    with pytest.raises(ConfigError, match="^/proc/sinkexp/.* cannot be created .*; choose another hydra.sweep.dir$"):
        plan(read_sweep(["hydra.sweep.dir=/proc/sinkexp", "seed=0,1"], multirun=True))


# Config hashes name existing run directories (docs/rundir.md): these defaults' must never change,
# whatever follows what (sinkexp/config/follow.py).
PINNED = {
    (): "96365c1e",
    ("task=lm",): "62b3b899",
    ("task=lm", "scale=paper"): "37c6702b",
    ("task=lm", "train.steps=100"): "4c679acd",
    ("task=damping",): "a98183c9",
    ("task=broadcast",): "d562f907",
    ("task=backcopy",): "b37d5942",
    ("task=damping_dynamics",): "9026a4d8",
    ("model=llama",): "3c0c0569",
}


@pytest.mark.parametrize("overrides", list(PINNED), ids=lambda overrides: " ".join(overrides) or "default")
def test_defaults_keep_their_config_hashes(make_config, overrides):
    from sinkexp.config.identity import config_hash

    assert config_hash(make_config(*overrides)) == PINNED[overrides]


def test_a_preset_value_follows_the_one_key_the_user_changed(make_config):
    """task=lm's warm-up is at most the run's steps; damping's and broadcast's placement of added
    positions gives way when model.pos adds none. A value the user sets never follows: two that
    conflict are refused with one line naming both and the fix."""
    from sinkexp.config.identity import config_hash

    assert make_config("task=lm", "train.steps=60").train.warmup == 60
    assert make_config("task=lm", "train.steps=60", "scale=paper").train.warmup == 60  # the paper rung's 1000 too
    assert make_config("task=lm", "train.steps=5000").train.warmup == 100
    for task in ("damping", "broadcast"):
        assert make_config(f"task={task}").model.pos_into == "first_attn"
        for pos in ("none", "rope"):
            followed = make_config(f"task={task}", f"model.pos={pos}")
            assert followed.model.pos_into == "stream"  # the same run as asked for plainly, the same name
            assert config_hash(followed) == config_hash(
                make_config(f"task={task}", f"model.pos={pos}", "model.pos_into=stream")
            )
    with pytest.raises(
        ConfigError,
        match=r"^train.warmup=100 .*train.steps=60\] \(set train.warmup=60 or less, or "
        r"train.steps=100 or more\)$",
    ):
        make_config("task=lm", "train.steps=60", "train.warmup=100")
    with pytest.raises(
        ConfigError,
        match="^model.pos_into=first_attn needs added positions; model.pos=none adds none "
        r"\(use model.pos=learned or sinusoidal, or drop model.pos_into\)$",
    ):
        make_config("task=damping", "model.pos=none", "model.pos_into=first_attn")


def test_every_job_of_a_sweep_is_checked_before_any_runs(make_config):
    plan(read_sweep(["attn=softmax,relu", "seed=0,1"], multirun=True))
    with pytest.raises(ConfigError, match="model.n_heads=3"):
        plan(read_sweep(["attn=softmax,relu", "model.n_heads=1,3"], multirun=True))
    with pytest.raises(ConfigError, match="-m"):
        plan(read_sweep(["seed=0,1"], multirun=False))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
def test_cuda_without_a_gpu_is_refused(make_config):
    with pytest.raises(ConfigError, match="device=cuda"):
        plan(read_sweep(["device=cuda"], multirun=False))


@pytest.mark.parametrize("task", sorted(TASKS))
def test_the_composed_task_section_has_every_field_of_its_schema(task):
    """Every task key is overridable (task.KEY=VALUE, no +): the task file's first default is its schema."""
    from hydra import compose, initialize_config_module

    config_schema.register_schema()
    with initialize_config_module(config_schema.CONFIG_MODULE, version_base="1.3"):
        section = compose("config", overrides=[f"task={task}"]).task
    assert set(section) == set(TASKS[task].Config.__dataclass_fields__)


@pytest.mark.parametrize("module", ["sinkexp.config.schema", "sinkexp.report.runs", "sinkexp.reproduce.declare"])
def test_the_schema_and_the_report_load_no_torch(module):
    """Tools that read only the schema or run directories answer without torch's import."""
    import subprocess
    import sys

    code = f"import sys, {module}; print(type(sys.modules.get('torch')).__name__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out in ("NoneType", "_LazyModule")  # never imported, or only its lazy placeholder


def test_no_yaml_file_repeats_a_schema_default():
    """A group file holds only what differs from the schema (sinkexp/config/schema.py): a task file's keys
    from the dataclasses' defaults, an attention preset's from AttnConfig's."""
    from importlib.resources import files

    from omegaconf import OmegaConf

    from sinkexp.config.schema import task_of
    from sinkexp.config.typed import config_keys

    root = files(config_schema.CONFIG_MODULE)
    for path in [*root.joinpath("task").iterdir(), *root.joinpath("attn").iterdir()]:
        if not path.name.endswith(".yaml"):
            continue
        node = OmegaConf.to_container(OmegaConf.load(path))
        node = {"attn": node} if path.parent.name == "attn" else node
        defaults = config_keys(task_of(path.name[:-5]) if path.parent.name == "task" else "trigger")
        for section, values in node.items():
            for key, value in values.items() if section != "defaults" else ():
                default = defaults[f"{section}.{key}"]
                assert value != (list(default) if isinstance(default, tuple) else default), (
                    f"{path.name}: {section}.{key}"
                )
