"""The settings of the commands that read a model rather than train one: `sinkexp measure`,
`intervene` and `export`, each a dataclass typed by the schema's machinery (config/typed.py), as
`train`'s Config is. A field's `help` is what the command's --help says of it (config/arguments.py
reads it); a default lives here only.

    cfg = measure_config({"model": "gpt2", "n": 1e2})       # MeasureConfig(model='gpt2', n=100, ...)

Each is typed and checked alike (`typed`; measure's ranges and choices by `measure_config`): an
unknown key, a value of the wrong type, out of range or not among the choices is a ConfigError, one
line naming the key. No model and no torch here: what
needs the model (the text long enough for it, a token of its tokenizer) is checked by hf/sources.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, replace
from pathlib import Path
from typing import Any, List, Optional

from sinkexp.config.sweep import Sweep
from sinkexp.config.typed import typed
from sinkexp.errors import ConfigError, choices_error

DTYPE_CHOICES = ("float32", "bfloat16", "float16")
BOS_CHOICES = ("auto", "true", "false")  # or a token of the model's tokenizer (hf/sources.py bos_prefix)
DEVICE_CHOICES = ("auto", "cpu", "cuda", "cuda:N")
FORMATS = ("png", "pdf", "svg")  # what report's --format takes (report/save.py)
DPI = 120  # report's default: a 4-panel figure is about 2,000 pixels wide
HYDRA_CFG = ("job", "hydra", "all")  # what train's --cfg prints, as Hydra's app names them
HYDRA_INFO = ("all", "config", "defaults", "defaults-tree", "plugins", "searchpath")


def about(help: str, default: Any = MISSING, **more) -> Any:
    """A field with its default and what --help and completion say of it (config/arguments.py reads
    them): `choices`, `metavar`, `positional` (an argument rather than a --flag or a key, or, for a
    key, either), `short` (a flag's other spellings: ("-c",)), `const` (a flag's value when it is
    given without one), `negatable` (--X and --no-X), `hidden` (parsed, never shown), `usage`
    (False: in --help's flags, left off the usage line), and
    `instead_of` (another command's keys for it, which an unknown-key error points from)."""
    return field(default=default, metadata={"help": help, **more})


@dataclass
class MeasureConfig:
    """`sinkexp measure`'s settings (docs/measure.md); their hash names the run (hf/identity.py)."""

    model: Optional[str] = about(
        "a model folder, a hub id, a .gguf file or a shipped name (smollm2-135m)",
        None,
        positional=True,
        metavar="MODEL",
    )
    revision: Optional[str] = about("a hub revision: branch, tag or commit (Pythia: step1000)", None)
    text: str = about("kjv (task=lm's built-in corpus) or a text file (.xz, .gz decompressed)", "kjv")
    n: int = about("sequences (Gu et al. 2025's eval_sink_open_source.py: 100 x 64)", 100)
    seq_len: int = about("tokens per sequence, BOS included", 64)
    bos: str = about("auto (what the tokenizer adds) | true | false | a token", "auto", choices=BOS_CHOICES)
    dtype: str = about("the weights' dtype", "float32", choices=DTYPE_CHOICES)
    chunk: Optional[int] = about("sequences per forward pass (null: all n at once)", None)
    perturb: bool = about("Barbero et al.'s perturbation too (two more forward passes; docs/metrics.md)", False)
    skip: int = about("tokens of the text skipped before the first sequence (a window further in)", 0)
    init: Optional[int] = about("S: the architecture at random initialisation after manual_seed(S), no weights", None)
    step: Optional[int] = about("the checkpoint's training step (null: from revision=stepN or the export)", None)
    device: str = about("auto | cpu | cuda | cuda:N", "auto", choices=DEVICE_CHOICES)
    dir: Optional[str] = about(
        "the run's folder; with -m the sweep's (default under outputs/)",
        None,
        instead_of=("hydra.run.dir", "hydra.sweep.dir"),
    )
    name: Optional[str] = about("the sweep's folder name under outputs/sweeps (default: the UTC time)", None)


def measure_config(values: dict[str, Any]) -> MeasureConfig:
    """A checked MeasureConfig from {key: Python value} (the command line's, as Hydra reads it, or
    `sinkexp reproduce`'s settings of a checkpoint); ConfigError naming the key."""
    values = dict(values)
    bos = values.get("bos")
    if isinstance(bos, bool) or str(bos).lower() in BOS_CHOICES:  # true, True and TRUE alike; a token as spelled
        values["bos"] = str(bos).lower()
    cfg = typed(MeasureConfig, values)
    if not cfg.model:
        raise ConfigError("model is missing: sinkexp measure MODEL (a model folder or a hub id)")
    for key, value, least in (
        ("n", cfg.n, 1),
        ("seq_len", cfg.seq_len, 2),
        ("chunk", cfg.chunk, 1),
        ("step", cfg.step, -1),
        ("skip", cfg.skip, 0),
        ("init", cfg.init, 0),
    ):
        if value is not None and value < least:
            raise ConfigError(f"{key}={value} is not valid; it must be >= {least}")
    if cfg.dtype not in DTYPE_CHOICES:
        raise choices_error("dtype", cfg.dtype, DTYPE_CHOICES)
    if not cfg.bos.strip():  # any other value is a token, looked up in the model's tokenizer (sources.bos_prefix)
        raise choices_error("bos", cfg.bos, BOS_CHOICES + ("a token of the model's tokenizer",))
    return cfg


@dataclass
class InterveneConfig:
    """`sinkexp intervene`'s settings (docs/reproduce.md, "Causal interventions")."""

    run: str = about("a run directory (trained, or a sinkexp measure run)", metavar="RUN_DIR", positional=True)
    layer: Optional[List[int]] = about("layers (default: every layer)", None, metavar="L")
    seed: int = about("draws the random non-sink keys", 0, metavar="N")
    unfinished: bool = about(
        "read a run that has not finished (failed, interrupted, running) at its last checkpoint", False
    )
    sequences: Optional[int] = about(
        "a sinkexp measure run: only its first N sequences (default: all)", None, metavar="N"
    )


@dataclass
class ExportConfig:
    """`sinkexp export`'s settings (docs/measure.md)."""

    run: str = about("a finished run of the model=llama preset", metavar="RUN_DIR", positional=True)
    out: Optional[str] = about(
        "the new folder (default: outputs/export/<the run's folder name>)", None, metavar="OUT", positional=True
    )


@dataclass
class ReportConfig:
    """`sinkexp report`'s settings (docs/sweeps.md)."""

    dir: Path = about("a sweep directory, or a single run directory", positional=True, metavar="DIR")
    out: Optional[Path] = about("where to write (default DIR/report)", None, metavar="DIR")
    list: bool = about("only list the runs, one line each (status, task, ..., hash); write nothing", False)
    format: str = about(f"the figures' formats, comma-separated: {', '.join(FORMATS)}", "png", metavar="FORMATS")
    dpi: int = about("the figures' pixels per inch", DPI, metavar="N")
    heads: Optional[str] = about(
        "a sinkexp measure run's attention maps (default: the heads of the largest, the median and the "
        "smallest sink score)",
        None,
        metavar="LAYER.HEAD,...",
    )


@dataclass
class ReproduceFlags:
    """`sinkexp reproduce`'s paper and flags (docs/reproduce.md); its KEY=VALUE words are decided into
    ReproduceSettings (reproduce/command.py)."""

    paper: Optional[str] = about("a paper, or all of them", None, positional=True, metavar="PAPER|all")
    estimate: bool = about("the cost estimate: the jobs, FLOPs and predicted wall time; nothing trains", False)
    recalibrate: bool = about("with --estimate: time the planned jobs again", False)
    pack: Optional[bool] = about("pack runs into shared processes (default: on a GPU only)", None, negatable=True)
    docs: Optional[Path] = about(
        "write DIR/results.md and the README headline (without PAPER: again, from DIR/claims.csv)", None, metavar="DIR"
    )
    list: bool = about("every claim and its last verdict", False)
    wide: bool = about("with --list: whole lines, not cut to the terminal's width", False)
    plan: bool = about("--estimate's old name, refused naming it", False, hidden=True)


@dataclass
class TrainFlags:
    """`sinkexp train`'s flags: Hydra's app flags (`hydra.main`'s), spelled as it spells them. The
    command decides on -m and on whether Hydra prints rather than trains, then hands the line to
    Hydra; its keys are the config's. Those of Hydra's own uses are left off the usage line."""

    cfg: Optional[str] = about("print the composed config instead of training", None, short=("-c",), choices=HYDRA_CFG)
    info: Optional[str] = about("print Hydra's information", None, short=("-i",), choices=HYDRA_INFO, const="all")
    resolve: bool = about("with --cfg: resolve the interpolations", False, usage=False)
    package: Optional[str] = about("with --cfg: the config package to print", None, short=("-p",), usage=False)
    run: bool = about("a single run (the default without -m)", False, short=("-r",), usage=False)
    hydra_help: bool = about("Hydra's own help", False, usage=False)
    shell_completion: bool = about("a completion script: -sc install=bash|zsh|fish", False, short=("-sc",), usage=False)
    config_path: Optional[str] = about("Hydra's config path", None, short=("-cp",), usage=False)
    config_name: Optional[str] = about("Hydra's config name", None, short=("-cn",), usage=False)
    config_dir: Optional[str] = about(
        "a config directory added to Hydra's search path", None, short=("-cd",), usage=False
    )
    experimental_rerun: Optional[str] = about("Hydra's rerun of a pickled config", None, metavar="FILE", usage=False)


OUTPUT_ROOT = Path("outputs/reproduce")  # reproduce's runs, claims and reports (one paper's: <paper>/)


@dataclass(frozen=True)
class ReproduceSettings:
    """What `sinkexp reproduce`'s command line decided, once (reproduce/command.py's `decided`): the
    papers, the overrides every run gets, each with its key, what reproduce itself reads of them,
    its folders, and each experiment's overrides read (reproduce/sweeps.py). Nothing below the
    command reads an override's text again."""

    overrides: tuple[tuple[str, str], ...] = ()  # (key or group, KEY=VALUE) as given, for every run
    scale: str = "cpu"  # the experiments' sizes too (reproduce/scales.py)
    device: str = "auto"  # where the pool's jobs run; packing pays on a GPU only (sweeps.packs_pay)
    workers: Optional[int] = None  # hydra.launcher.n_jobs=N: reproduce's own pool size (None: one per core)
    launcher: bool = False  # a Hydra launcher of the user's (hydra/launcher=slurm, ...): one sweep per experiment
    papers: tuple[Any, ...] = ()  # the papers named (reproduce/declare.py's Paper: config/ imports no reproduce/)
    docs: Optional[Path] = None  # --docs DIR: the findings tables into DIR's findings pages too (write_findings)
    weights: Optional[Path] = None  # weights=DIR: a folder of the checkpoints' weights (checkpoints.py)
    root: Path = OUTPUT_ROOT
    pack: bool = False  # a job trains its grid's packable keys together (sweeps.packs_pay: the default)
    # Each experiment trained at `scale`, by (paper, experiment), its overrides read once; and the same
    # experiments at the CPU sizes, whose jobs the cost estimate times for a larger scale's (None: `sweeps`).
    sweeps: Mapping[tuple[str, str], Sweep] = field(default_factory=dict)
    sweeps_at_cpu: Optional[Mapping[tuple[str, str], Sweep]] = None

    @property
    def keys(self) -> set[str]:
        return {key for key, _ in self.overrides}

    def lines(self) -> list[str]:
        """The overrides as Hydra composes them."""
        return [line for _, line in self.overrides]

    def at_cpu(self) -> ReproduceSettings:
        """The same settings at scale=cpu (the CPU-size jobs the cost estimate times for a larger scale's)."""
        cpu = self.sweeps if self.sweeps_at_cpu is None else self.sweeps_at_cpu
        overrides = tuple(o for o in self.overrides if o[0] != "scale")
        return replace(self, overrides=overrides, scale="cpu", sweeps=cpu, sweeps_at_cpu=None)
