"""The measurement of a loaded transformers causal LM on token ids: sinkexp's own evaluator
(evaluate/evaluator.py: layer_rows, model_rows, loss_rows) on the taps capture.py records, so every
metric keeps its definition in docs/metrics.md and the rows their long format.

    folder, model = load_checkpoint("smollm2-135m", None, "float32", device)   # or load_model(folder, ...)
    metric_rows, loss_rows = measure(model, inputs, step=1000)      # inputs (N, T) token ids

Position 0 is the sink position (the BOS, or the first token without one) and not a query, as in
task=lm; every other position is a query of type `text`. The loss is each position's next-token
cross-entropy (the last position has no next token), beside the uniform predictor's log V; the
logits are made from the last hidden states READOUT_ELEMENTS at a time, never all N x T x V at once.

`chunk` sequences go through the model at once (default: all N), and each layer's taps are turned
into rows and dropped as soon as the layer is done, so memory holds one layer's attention maps of
one chunk. With several chunks every value is the mean of the chunks' values weighted by their
sequences: exactly the whole batch's value for the means over sequences and queries; for the
statistics pooled over the batch (massive_ratio, the key cosines, common_mode) the mean of the
chunks' values, and massive_position / massive_channel the most frequent over the chunks
(docs/measure.md).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import tempfile
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import pandas as pd
import torch
import torch.nn.functional as F

from sinkexp.evaluate.evaluator import Rows, layer_rows, loss_rows, model_rows, query_sets_of
from sinkexp.evaluate.perturbation import perturbed_position, relative_change, summarise, swap_token
from sinkexp.evaluate.tables import LOSS_COLUMNS, METRIC_COLUMNS
from sinkexp.hf import sources
from sinkexp.hf.capture import ATTENTION, layer_by_layer, register
from sinkexp.hf.families import FAMILIES
from sinkexp.hf.gguf import cache_root
from sinkexp.model.transformer import Anatomy, LayerAnatomy
from sinkexp.tasks.base import Batch

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
LOCATIONS = ("massive_position", "massive_channel")  # positions, not amounts: combined by the mode


# Logits per cross-entropy call in NextToken.loss: 16 MiB in float32, under glibc's largest mmap
# threshold, so with the freed memory kept (machine/allocator.py) each call's buffers are reused
# instead of mapped and faulted in again (scripts/bench_choices.py times 64 MiB calls beside it).
LOSS_ELEMENTS = 2**22
# Logits made at a time from the last hidden states (NextToken with a readout): 2^26 floats, 256 MiB,
# whatever the vocabulary, so the N x T x V logits are never held at once (Gemma-3's 262,144 at the
# default 100 x 64: 6.7 GB; here 256 positions at a time), and each block reads the readout's weights once.
READOUT_ELEMENTS = 2**26


class NextToken:
    """What loss_rows needs of a task: next-token cross-entropy, and the uniform predictor beside it.
    With `readout` (last hidden states (rows, d_model) -> logits (rows, V)) the loss takes the hidden
    states and makes the logits READOUT_ELEMENTS at a time; without, it takes the logits."""

    query_types = ("text",)
    reference = "uniform predictor over the vocabulary"

    def __init__(self, vocab_size: int, readout=None):
        self.vocab_size, self.readout = vocab_size, readout

    def loss(self, pred: torch.Tensor, batch: Batch) -> torch.Tensor:
        """Per position, (B, T), of logits (B, T, V) or, with a readout, hidden states (B, T, d_model)."""
        rows, targets = pred.flatten(0, 1), batch.targets.flatten()
        if self.readout is None:
            return cross_entropy(rows, targets).view(batch.targets.shape)
        block = max(1, READOUT_ELEMENTS // self.vocab_size)
        parts = zip(rows.split(block), targets.split(block))
        return torch.cat([cross_entropy(self.readout(part), part_targets) for part, part_targets in parts]).view(
            batch.targets.shape
        )

    def baseline_loss(self, batch: Batch) -> torch.Tensor:
        return torch.full(batch.targets.shape, math.log(self.vocab_size), device=batch.targets.device)


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Per row of logits (rows, V), LOSS_ELEMENTS logits per call. Each row's log-softmax is its
    own, so the values are the whole batch's without its buffers; over rows torch's log-softmax
    reduces in vector lanes, over a (B, V, T) view it summed the V terms one by one: slower and
    further from float64 (scripts/bench_choices.py times both, docs/performance.md)."""
    rows = max(1, LOSS_ELEMENTS // logits.shape[-1])
    parts = zip(logits.split(rows), targets.split(rows))
    return torch.cat([F.cross_entropy(part.float(), part_targets, reduction="none") for part, part_targets in parts])


def readout(model):
    """Last hidden states -> logits, as the model's forward makes them: its output embedding, then
    the final soft-capping where the config has one (Gemma-2 and -3's final_logit_softcapping)."""
    head, cap = model.get_output_embeddings(), getattr(model.config, "final_logit_softcapping", None)
    return head if not cap else lambda hidden: cap * torch.tanh(head(hidden) / cap)


def load_checkpoint(
    model: str, revision: str | None, dtype: str, device: torch.device, init: int | None = None
) -> tuple[Path, object]:
    """(its folder, the model loaded for measuring): the one loader of `sinkexp measure`, from the
    settings a measured run's config.yaml records: model (a folder, a hub id at `revision`, a .gguf
    file or a shipped name, dequantized from the cache: sources.resolve), revision, dtype, and `init`:
    the same architecture at random initialisation instead of its weights (initialised)."""
    folder = sources.resolve(model, revision, weights=init is None)
    return folder, load_model(folder, dtype, device) if init is None else initialised(folder, dtype, device, init)


def load_model(folder, dtype: str, device: torch.device):
    """The model in eval mode, its attention through capture.ATTENTION."""
    from transformers import AutoModelForCausalLM  # lazy: transformers is the hf extra

    quiet_transformers()
    model = AutoModelForCausalLM.from_pretrained(folder, attn_implementation=ATTENTION, dtype=DTYPES[dtype])
    return model.to(device).eval()


def initialised(folder, dtype: str, device: torch.device, seed: int):
    """The architecture of `folder`'s config.json at random initialisation, in eval mode: transformers'
    own initialisation (`from_config`: each module's `_init_weights`, e.g. Llama's and Gemma-3's linear
    and embedding weights N(0, initializer_range^2), their norms at the identity), drawn on the CPU
    after torch.manual_seed(seed), the global generator restored after: the untrained value of a claim
    on a pre-trained checkpoint (reproduce/checkpoints.py), the same weights for a seed on any machine
    with the same torch and transformers. Kept in the cache (init_folder) once drawn, and read from
    there after: transformers draws Gemma-3-270M's in about 40 s on 2 cores, and every analysis of
    an untrained run loads it again."""
    from transformers import AutoConfig, AutoModelForCausalLM  # lazy: transformers is the hf extra

    quiet_transformers()
    config = AutoConfig.from_pretrained(folder)
    kept = init_folder(config, seed, dtype)
    if not (kept / "config.json").is_file():
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = AutoModelForCausalLM.from_config(config, attn_implementation=ATTENTION, dtype=DTYPES[dtype])
        kept.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=kept.parent, prefix=f".{kept.name}-"))
        model.save_pretrained(staging)
        try:
            os.replace(staging, kept)
        except OSError:  # another process kept the same draw first: the same weights
            shutil.rmtree(staging, ignore_errors=True)
        return model.to(device).eval()
    model = AutoModelForCausalLM.from_pretrained(kept, attn_implementation=ATTENTION, dtype=DTYPES[dtype])
    return model.to(device).eval()


def init_folder(config, seed: int, dtype: str) -> Path:
    """<cache>/init/<16 hex digits over the config, seed, dtype and the torch and transformers versions>."""
    import transformers  # lazy: transformers is the hf extra

    key = json.dumps([config.to_json_string(use_diff=False), seed, dtype, torch.__version__, transformers.__version__])
    return cache_root() / "init" / hashlib.sha256(key.encode()).hexdigest()[:16]


def quiet_transformers() -> None:
    """ATTENTION registered; transformers' progress bars and warnings off."""
    from transformers.utils import logging  # lazy: transformers is the hf extra

    register()
    logging.set_verbosity_error()
    logging.disable_progress_bar()


def text_batch(inputs: torch.Tensor) -> Batch:
    """Next-token targets (the last position has none: it is out of the loss); position 0 is the sink."""
    B, T = inputs.shape
    query_type = torch.zeros(B, T, dtype=torch.long, device=inputs.device)
    query_type[:, 0] = -1
    loss_mask = torch.ones(B, T, dtype=torch.bool, device=inputs.device)
    loss_mask[:, -1] = False
    return Batch(
        inputs=inputs,
        targets=torch.cat([inputs[:, 1:], inputs[:, :1]], dim=1),
        loss_mask=loss_mask,
        query_type=query_type,
        sink=torch.zeros(B, dtype=torch.long, device=inputs.device),
    )


def anatomy(model, family, T: int, device) -> Anatomy:
    """sinkexp's view of the model for sequences of T tokens: no registers, no slot, causal."""
    n_heads = model.config.num_attention_heads
    layers = []
    for layer in family.layer_modules(model):
        attn = family.attention_module(layer)
        w_q, w_k, w_o = (w.detach().float() for w in family.weights(attn, n_heads))
        gain = family.qk_gain(attn).detach().float() if family.qk_gain else None
        parts = dict(has_slot=False, has_gate=False, has_pathway=False, qk_gain=gain)
        layers.append(LayerAnatomy(n_heads, w_q, w_k, w_o, **parts))
    return Anatomy(
        tokens=torch.arange(T, device=device),
        registers=torch.zeros(0, dtype=torch.long, device=device),
        n_keys=T,
        visible=torch.ones(T, T, dtype=torch.bool, device=device).tril(),
        layers=layers,
    )


@torch.no_grad()
def measure_chunk(model, family, parts: Anatomy, inputs: torch.Tensor, step: int, observe=None) -> tuple[list, list]:
    """Metric rows and loss rows of one forward pass over `inputs` (B, T); observe(layer, taps) sees
    each layer's taps too (hf/record.py)."""
    batch, task = text_batch(inputs), NextToken(model.config.vocab_size, readout(model))
    query_sets, rows, scores = query_sets_of(batch, task.query_types), Rows(step), []

    def on_layer(layer: int, cache: dict) -> None:
        visible = cache.pop(f"blocks.{layer}.attn.visible", None)  # the layer's own mask: a sliding window's
        seen = parts if visible is None else replace(parts, visible=visible.bool())
        scores.append(layer_rows(rows, layer, cache, seen, batch, query_sets))
        if observe is not None:
            observe(layer, cache)

    with layer_by_layer(model, family, on_layer):
        hidden = model.base_model(input_ids=inputs, use_cache=False).last_hidden_state  # (B, T, d_model)
    model_rows(rows, scores)
    return list(rows), loss_rows(task, hidden, batch, step)


def measure(model, inputs: torch.Tensor, step: int = 0, chunk: int | None = None, observe=None) -> tuple[list, list]:
    """(metric rows, loss rows) of `model` on `inputs` (N, T), `chunk` sequences per forward pass;
    observe(layer, taps), when given, is called with each layer's taps of each chunk."""
    family = FAMILIES[model.config.model_type]
    device = next(model.parameters()).device
    inputs = inputs.to(device)
    parts = anatomy(model, family, inputs.shape[1], device)
    size = chunk or len(inputs)
    chunks = [(len(part), *measure_chunk(model, family, parts, part, step, observe)) for part in inputs.split(size)]
    if len(chunks) == 1:
        return chunks[0][1], chunks[0][2]
    metrics = combine([(n, pd.DataFrame(rows, columns=METRIC_COLUMNS)) for n, rows, _ in chunks])
    losses = combine([(n, pd.DataFrame(rows, columns=LOSS_COLUMNS)) for n, _, rows in chunks])
    return list(metrics.itertuples(index=False, name=None)), list(losses.itertuples(index=False, name=None))


@torch.no_grad()
def perturbation_rows(model, inputs: torch.Tensor, step: int, chunk: int | None = None) -> list[tuple]:
    """`perturb=true`: Barbero et al.'s perturbation (evaluate/perturbation.py, docs/metrics.md) per
    layer L, perturb_change and perturb_reach rows (head -1, query type all) of hidden_states[L + 1]
    as transformers returns them (each layer's output; the last after the final norm in GPT-2 and
    Llama): two more forward passes, `chunk` sequences at a time, the change the same in every chunking."""
    at = perturbed_position(inputs.shape[1])
    pairs = zip(inputs.split(chunk or len(inputs)), swap_token(inputs, at).split(chunk or len(inputs)))
    changes = defaultdict(list)
    for clean, changed in pairs:
        before = model.base_model(input_ids=clean, use_cache=False, output_hidden_states=True).hidden_states[1:]
        after = model.base_model(input_ids=changed, use_cache=False, output_hidden_states=True).hidden_states[1:]
        for layer, (h, h_changed) in enumerate(zip(before, after)):
            changes[layer].append(relative_change(h.float(), h_changed.float(), at))
    rows = []
    for layer, parts in changes.items():
        for metric, value in zip(("perturb_change", "perturb_reach"), summarise(torch.cat(parts))):
            if math.isfinite(value):  # no later representation moved: no reach (docs/metrics.md)
                rows.append((step, layer, -1, "all", metric, value))
    return rows


def combine(chunks: list[tuple[int, pd.DataFrame]]) -> pd.DataFrame:
    """Rows of several chunks as one: values weighted by the chunk's sequences; LOCATIONS by the mode."""
    frame = pd.concat([rows.assign(n=n) for n, rows in chunks], ignore_index=True)
    value = frame.columns[-2]  # `value` or `loss`
    keys = [c for c in frame.columns if c not in (value, "n")]
    located = frame["metric"].isin(LOCATIONS) if "metric" in frame else pd.Series(False, index=frame.index)
    frame["weighted"] = frame[value] * frame["n"]
    sums = frame[~located].groupby(keys, sort=False)[["weighted", "n"]].sum()
    means = (sums["weighted"] / sums["n"]).rename(value).reset_index()
    modes = frame[located].groupby(keys, sort=False)[value].agg(lambda v: v.mode().min()).reset_index()
    return pd.concat([means, modes], ignore_index=True)[keys + [value]]
