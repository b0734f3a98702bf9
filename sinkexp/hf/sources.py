"""What `sinkexp measure` reads, checked before anything runs: the model (a local folder, a hub id
at a revision, found in the Hugging Face cache or downloaded, or a GGUF checkpoint: a .gguf file or
a shipped name, dequantized into sinkexp's cache by hf/gguf.py) and the text, cut into N sequences
of T tokens. Every problem is a ConfigError: one line naming the key.

    folder = resolve("EleutherAI/pythia-14m", "step1000")     # the cached snapshot's folder
    config, family = check_model(folder, "EleutherAI/pythia-14m", seq_len=64)
    inputs = sequences(tokenizer(folder, ...), config, "kjv", n=100, seq_len=64, bos="auto")   # (100, 64)
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import torch

from sinkexp.config.settings import BOS_CHOICES  # or a token string of the model's tokenizer (bos_prefix)
from sinkexp.errors import ConfigError, choices_error
from sinkexp.hf import gguf
from sinkexp.hf.families import FAMILIES
from sinkexp.hf.shipped import SHIPPED, installed
from sinkexp.tasks.base import read_data_file
from sinkexp.tasks.lm import decompressed

SMALL_FILES = ["*.json", "*.txt", "*.model", "tokenizer*"]  # config and tokenizer: enough for the checks
WEIGHT_FILES = ("*.safetensors", "*.bin")  # safetensors first, as from_pretrained prefers
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")


def resolve(model: str, revision: str | None, weights: bool = False) -> Path:
    """The local folder of `model`: the folder itself, or a hub id's snapshot at `revision` from the
    Hugging Face cache, downloaded when it is not there and the hub can be reached. `weights`: the
    weights too (a run), not only config and tokenizer (the checks). A GGUF checkpoint's folder is its
    dequantized model in the cache (written there the first time, checked first: hf/gguf.py)."""
    if gguf.is_gguf(model):
        if revision is not None:
            raise ConfigError(
                f"revision={revision}: model={model} is a GGUF checkpoint; a revision names a hub checkpoint "
                "(drop revision=)"
            )
        return gguf.open_checkpoint(model).folder
    path = Path(model).expanduser()
    if path.exists():
        if revision is not None:
            raise ConfigError(
                f"revision={revision}: model={model} is a local folder; a revision names a hub "
                "checkpoint (drop revision=)"
            )
        if not (path / "config.json").is_file():
            raise ConfigError(
                f"model={model} is not a model folder (no config.json in it); give a folder written "
                "by save_pretrained or `sinkexp export`, or a hub id"
            )
        return path.resolve()
    if not HUB_ID.fullmatch(model) or model.startswith((".", "~")):
        raise ConfigError(f"model={model}: no such folder (and not a hub id such as EleutherAI/pythia-14m)")
    return _snapshot(model, revision, weights)


def _snapshot(model: str, revision: str | None, weights: bool) -> Path:
    from huggingface_hub import snapshot_download  # lazy: huggingface_hub comes with the hf extra

    at = f"model={model}" + (f" revision={revision}" if revision else "")
    patterns = [SMALL_FILES + [pattern] for pattern in WEIGHT_FILES] if weights else [SMALL_FILES]
    folder = None
    try:
        for allow in patterns:
            folder = Path(snapshot_download(model, revision=revision, allow_patterns=allow))
            if not weights or weight_files(folder):
                break
    except OSError as err:  # not cached and no network, an unknown repo or revision, a gated model
        first = str(err).strip().splitlines()[-1] if str(err).strip() else err.__class__.__name__
        raise ConfigError(
            f"{at}: not on this machine and not downloadable ({first[:160]}); download it where "
            f"there is a network (hf download {model}"
            + (f" --revision {revision}" if revision else "")
            + ") or give model=PATH"
        ) from None
    return folder


def on_disk(model: str, revision: str | None = None) -> bool:
    """Whether `model` (a folder, a hub id at `revision` in the Hugging Face cache, a shipped name
    whose packages are installed or a .gguf file) has its config and weights on this machine,
    without the network: what a claim on a named checkpoint checks before it runs ("not run" otherwise)."""
    from huggingface_hub import snapshot_download  # lazy: huggingface_hub comes with the hf extra

    if model in SHIPPED:
        try:
            installed(model)
        except ConfigError:
            return False
        return True
    path = Path(model).expanduser()
    if gguf.is_gguf(model):
        return path.is_file()
    if path.exists():
        return (path / "config.json").is_file() and bool(weight_files(path))
    try:
        folder = Path(snapshot_download(model, revision=revision, local_files_only=True))
    except (OSError, ValueError):
        return False
    return (folder / "config.json").is_file() and bool(weight_files(folder))


def weight_files(folder: Path) -> list[Path]:
    for pattern in WEIGHT_FILES:
        found = sorted(folder.glob(pattern))
        if found:
            return found
    return []


def file_digest(path: Path) -> str:
    """SHA-256 of a file's content; in the Hugging Face cache a weight file is a link to a blob named by
    that digest (its LFS object id), so the name is read instead of the gigabytes."""
    target = Path(os.path.realpath(path))
    if path.is_symlink() and re.fullmatch(r"[0-9a-f]{64}", target.name):
        return target.name
    return gguf.file_sha256(target)


def folder_digest(folder: Path) -> str:
    """One SHA-256 over a model folder's files (names and contents): the measured model's identity."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith(".")):
        digest.update(f"{path.relative_to(folder)}={file_digest(path)}\n".encode())
    return digest.hexdigest()


def check_model(folder: Path, model: str, seq_len: int):
    """(its transformers config, its FAMILIES name): a causal LM of a supported type whose attention
    goes through transformers' attention interface, with a context of at least seq_len."""
    from transformers import AutoConfig  # lazy: transformers is the hf extra
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    try:
        config = AutoConfig.from_pretrained(folder)
    except (OSError, ValueError, KeyError) as err:
        raise ConfigError(f"model={model}: its config.json cannot be read ({str(err).splitlines()[0][:160]})") from None
    kind = config.model_type
    if type(config) not in MODEL_FOR_CAUSAL_LM_MAPPING or getattr(config, "is_encoder_decoder", False):
        raise ConfigError(
            f"model={model} is a {kind} model, not a causal language model; choose one of the types: "
            + ", ".join(FAMILIES)
        )
    if kind not in FAMILIES:
        raise choices_error(f"model={model}: model type", kind, FAMILIES)
    if not getattr(MODEL_FOR_CAUSAL_LM_MAPPING[type(config)], "_supports_attention_backend", False):
        raise ConfigError(
            f"model={model}: this transformers version's {kind} does not route attention through "
            "its attention interface, so its attention weights cannot be returned"
        )
    context = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    if context is not None and seq_len > context:
        raise ConfigError(
            f"seq_len={seq_len} is longer than model={model}'s context ({context} positions); "
            f"choose seq_len <= {context}"
        )
    return config, kind


def load_tokenizer(folder: Path, model: str):
    from transformers import AutoTokenizer  # lazy: transformers is the hf extra

    try:
        return AutoTokenizer.from_pretrained(folder)
    except (OSError, ValueError, TypeError) as err:
        raise ConfigError(
            f"model={model} has no tokenizer that loads ({str(err).splitlines()[0][:120]}); "
            "its folder needs tokenizer files next to config.json"
        ) from None


def bos_prefix(tokenizer, config, bos: str) -> list[int]:
    """The ids put before every sequence: `auto` what the tokenizer itself adds in front of a text
    (BOS for Llama, none for GPT-2 and Pythia), `true` the model's BOS, `false` nothing, and any
    other value the token of that spelling in the tokenizer's vocabulary (SmolLM2's BOS is
    `<|im_start|>`; `bos='<|endoftext|>'` asks for its other start-of-text token)."""
    if bos == "false":
        return []
    if bos not in BOS_CHOICES:
        return [token_id(tokenizer, bos)]
    if bos == "true":
        token = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else config.bos_token_id
        if token is None:
            raise ConfigError("bos=true: this model has no BOS token; choose bos=false or bos=auto")
        return [token]
    plain = tokenizer("a", add_special_tokens=False)["input_ids"]
    special = tokenizer("a")["input_ids"]
    start = next((i for i in range(len(special)) if special[i : i + len(plain)] == plain), 0)
    return list(special[:start])


def token_id(tokenizer, token: str) -> int:
    """The id of the vocabulary entry spelled `token` (ConfigError naming the special tokens when none is)."""
    found = tokenizer.convert_tokens_to_ids(token)
    if found is None or tokenizer.convert_ids_to_tokens(found) != token:
        special = ", ".join(repr(name) for name in tokenizer.all_special_tokens)
        raise ConfigError(
            f"bos={token!r} is not a token of this model's tokenizer; choose auto, true, false or a token of "
            f"its vocabulary, e.g. a special one: {special}"
        )
    return found


def read_text(text: str) -> str:
    """The text a `text=` names: kjv (the built-in corpus of task=lm) or a file, .xz/.gz decompressed."""
    return decompressed("text", text, read_data_file("text", text)).decode("utf-8", errors="replace")


def sequences(tokenizer, config, text: str, n: int, seq_len: int, bos: str, skip: int = 0) -> torch.Tensor:
    """(n, seq_len) token ids: the prefix (bos_prefix), then the next seq_len - len(prefix) tokens of
    the text, in consecutive windows from its start, or from its token `skip` on."""
    prefix = bos_prefix(tokenizer, config, bos)
    body = seq_len - len(prefix)
    if body < 1:
        raise ConfigError(f"seq_len={seq_len} leaves no room for text after the {len(prefix)} BOS token(s)")
    full, need = read_text(text), n * body + skip
    chars, ids = need * 8, []
    while True:  # tokenise a growing start of the text; the last word of a cut start may tokenise differently
        ids = tokenizer(full[:chars], add_special_tokens=False)["input_ids"]
        if len(ids) > need + 16 or chars >= len(full):
            break
        chars *= 2
    if len(ids) < need:
        skipped = f" after skip={skip}" if skip else ""
        raise ConfigError(
            f"text={text} is {len(ids)} tokens long for this tokenizer; n={n} sequences of seq_len="
            f"{seq_len}{skipped} need {need}: choose a smaller n, seq_len or skip, or a longer text"
        )
    windows = torch.tensor(ids[skip:need], dtype=torch.long).view(n, body)
    return torch.cat([torch.tensor(prefix, dtype=torch.long).expand(n, -1), windows], dim=1)
