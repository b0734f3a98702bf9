"""The settings of `sinkexp measure`: the typed schema (MeasureConfig), the command line parsed
into one config per job (Hydra's override grammar, so `-m model=a,b revision=step1,step2` sweeps
as `sinkexp train -m` does), the config hash and the run directory's name. No model is touched.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import get_type_hints

from sinkexp.config.compose import expand
from sinkexp.config.compose import parse as parse_overrides
from sinkexp.errors import ConfigError, choices_error
from sinkexp.hf.sources import BOS_CHOICES

DTYPE_CHOICES = ("float32", "bfloat16", "float16")


@dataclass
class MeasureConfig:
    model: str | None = None  # a local folder, a hub id, a .gguf file or a shipped name (smollm2-135m, gemma3-270m)
    revision: str | None = None  # a hub revision: branch, tag or commit (Pythia: step1000)
    text: str = "kjv"  # kjv (task=lm's built-in corpus) or a text file (.xz/.gz decompressed)
    n: int = 100  # sequences (Gu et al. 2025's eval_sink_open_source.py: 100 x 64)
    seq_len: int = 64  # tokens per sequence, BOS included
    bos: str = "auto"  # auto (what the tokenizer adds in front of a text) | true | false | a token ('<|endoftext|>')
    dtype: str = "float32"  # float32 | bfloat16 | float16
    chunk: int | None = None  # sequences per forward pass (null: all n at once)
    perturb: bool = False  # Barbero et al.'s perturbation too (two more forward passes; docs/metrics.md)
    skip: int = 0  # tokens of the text skipped before the first sequence (a window further into the text)
    init: int | None = None  # measure the architecture at random initialisation, seeded with this (hf/measure.py)
    step: int | None = None  # the checkpoint's training step (null: from revision=stepN or an exported run)
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    dir: str | None = None  # the run's directory; with -m the sweep's (default under outputs/)
    name: str | None = None  # the sweep's folder name under outputs/sweeps (default: the UTC time)


KEYS = [field.name for field in dataclasses.fields(MeasureConfig)]
HINTS = {key: str(hint) for key, hint in get_type_hints(MeasureConfig).items()}  # e.g. "int | None"
UNHASHED = ("step", "device", "dir", "name")  # a label and bookkeeping: the same measurement


def parse(argv: list[str]) -> tuple[bool, list[dict[str, str]]]:
    """(multirun, one {key: value text} per job) from `[-m] [MODEL] [KEY=VALUE ...]`, read and
    expanded as `sinkexp train` reads its overrides (config/compose.py: Hydra's grammar and sweep order)."""
    multirun = any(arg in ("-m", "--multirun") for arg in argv)
    args = [arg for arg in argv if arg not in ("-m", "--multirun")]
    bare = [arg for arg in args if "=" not in arg]
    if len(bare) > 1:
        raise ConfigError(f"one MODEL at a time ({', '.join(bare)}); sweep several with -m model=A,B")
    args = [f"model={arg}" if "=" not in arg else arg for arg in args]
    for override in parse_overrides(args):
        if override.key_or_group not in KEYS:
            raise choices_error("key", override.key_or_group, KEYS)
    jobs = expand(args, multirun, params={}, command="sinkexp measure")
    # Hydra's values (quotes and escapes removed), as text for `typed`: null is "null", 3 is "3".
    return multirun, [
        {o.key_or_group: "null" if o.value() is None else str(o.value()) for o in parse_overrides(job)} for job in jobs
    ]


def typed(values: dict[str, str]) -> MeasureConfig:
    """A checked MeasureConfig from the command line's {key: text} (parse): each text read once as
    its key's type, then `checked`; ConfigError naming the key."""
    cfg: dict = {}
    for key, text in values.items():
        hint = HINTS.get(key, "")
        if "None" in hint and text.lower() in ("null", "none"):
            cfg[key] = None
        elif hint == str(bool):
            if text.lower() not in ("true", "false"):
                raise choices_error(key, text, ("true", "false"))
            cfg[key] = text.lower() == "true"
        elif "int" in hint:
            try:
                cfg[key] = int(text)
            except ValueError:
                raise ConfigError(f"{key}={text} is not an integer") from None
        else:
            cfg[key] = text
    return checked(cfg)


def checked(values: dict) -> MeasureConfig:
    """A MeasureConfig from {key: value} with Python values (typed's, or `sinkexp reproduce`'s
    settings through command.measure_checkpoint), checked: the keys, the types, the ranges and the
    choices; ConfigError naming the key."""
    values = dict(values)
    if isinstance(values.get("bos"), bool) or str(values.get("bos")).lower() in BOS_CHOICES:
        values["bos"] = str(values["bos"]).lower()  # in any case: True, "TRUE" and "true" alike; a token as spelled
    for key, value in values.items():
        if key not in HINTS:
            raise choices_error("key", key, KEYS)
        if value is None and "None" in HINTS[key]:
            continue
        if "int" in HINTS[key] and (isinstance(value, bool) or not isinstance(value, int)):
            raise ConfigError(f"{key}={value!r} is not an integer")
        if "str" in HINTS[key] and not isinstance(value, str):
            raise ConfigError(f"{key}={value!r} is not a string")
        if HINTS[key] == str(bool) and not isinstance(value, bool):
            raise choices_error(key, value, ("true", "false"))
    cfg = MeasureConfig(**values)
    if not cfg.model:
        raise ConfigError("model is missing: sinkexp measure MODEL (a model folder or a hub id)")
    checks = [("n", cfg.n, 1), ("seq_len", cfg.seq_len, 2), ("chunk", cfg.chunk, 1), ("step", cfg.step, -1)]
    checks += [("skip", cfg.skip, 0), ("init", cfg.init, 0)]
    for key, value, least in checks:
        if value is not None and value < least:
            raise ConfigError(f"{key}={value} is not valid; it must be >= {least}")
    if cfg.dtype not in DTYPE_CHOICES:
        raise choices_error("dtype", cfg.dtype, DTYPE_CHOICES)
    if not cfg.bos.strip():  # any other value is a token, looked up in the model's tokenizer (sources.bos_prefix)
        raise choices_error("bos", cfg.bos, BOS_CHOICES + ("a token of the model's tokenizer",))
    return cfg


def checkpoint_step(cfg: MeasureConfig, model_config) -> int:
    """The measured checkpoint's training step: step=, else a revision stepN (Pythia's), else an
    exported sinkexp run's step (config.json's `sinkexp` entry), else -1 (unknown)."""
    if cfg.step is not None:
        return cfg.step
    found = re.fullmatch(r"step(\d+)", cfg.revision or "")
    if found:
        return int(found.group(1))
    exported = getattr(model_config, "sinkexp", None)
    return int(exported["step"]) if isinstance(exported, dict) and "step" in exported else -1


def config_hash(cfg: MeasureConfig, model_digest: str, text_digest: str) -> str:
    """Eight hex digits over what changes the measurement: the model's files (model_digest), the
    text's content, and every setting but UNHASHED; `chunk` only where it splits the sequences."""
    settings = {key: value for key, value in dataclasses.asdict(cfg).items() if key not in UNHASHED}
    settings.update(
        model=model_digest,
        text=text_digest,
        revision=None,
        chunk=cfg.chunk if cfg.chunk is not None and cfg.chunk < cfg.n else None,
    )
    for key, default in (("perturb", False), ("skip", 0), ("init", None)):  # keys added later: the runs
        if settings[key] == default:  # measured before them keep their hashes
            del settings[key]
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:8]


def run_dir(cfg: MeasureConfig, multirun: bool, digest: str, started: str) -> Path:
    """One run: dir=, or outputs/runs/measure/<model>/<UTC time>-<hash>; a sweep's run:
    <dir= or outputs/sweeps/<name or UTC time>>/measure/<model>/<revision or main>[_<key=value>...]-<hash>,
    with each measured setting that is not the default (e.g. main_bos=false_n=16-<hash>)."""
    local = Path(cfg.model).expanduser()
    model = safe(local.resolve().name if local.exists() else cfg.model.rstrip("/").replace("/", "--"))
    if not multirun:
        return Path(cfg.dir or f"outputs/runs/measure/{model}/{started}-{digest}").absolute()
    root = Path(cfg.dir or f"outputs/sweeps/{cfg.name or started}")
    name = "_".join([cfg.revision or "main", *changed_settings(cfg)])
    return (root / "measure" / model / f"{safe(name)}-{digest}").absolute()


# what sweep folder names show (when not default)
NAMED = ("text", "n", "seq_len", "bos", "dtype", "perturb", "skip", "init")


def changed_settings(cfg: MeasureConfig) -> list[str]:
    """key=value for each of NAMED that differs from the default (a text file by its file name)."""
    default = MeasureConfig()
    changed = [key for key in NAMED if getattr(cfg, key) != getattr(default, key)]
    value = {key: str(getattr(cfg, key)).lower() if key == "perturb" else getattr(cfg, key) for key in changed}
    return [f"{key}={Path(cfg.text).name if key == 'text' else value[key]}" for key in changed]


def safe(name: str) -> str:
    """A folder name: characters other than letters, digits and . = - _ become _."""
    return re.sub(r"[^\w.=-]", "_", name)


def as_written(cfg: MeasureConfig, step: int, model_config) -> dict:
    """config.yaml of a measure run: its settings (not dir and name: bookkeeping), the checkpoint's
    step (rundir.reading.last_step reads it) and what was measured."""
    settings = {key: value for key, value in dataclasses.asdict(cfg).items() if key not in ("dir", "name")}
    return {
        "command": "measure",
        **settings,
        "step": step,
        "measured": {
            "model_type": model_config.model_type,
            "n_layers": model_config.num_hidden_layers,
            "n_heads": model_config.num_attention_heads,
            "vocab_size": model_config.vocab_size,
        },
    }
