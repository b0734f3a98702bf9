"""Causal interventions on a measured language model (a `sinkexp measure` run loaded back,
analysis/measured.py), each a replacement at one of hf/capture.py's capture points in the one
forward pass, the weights held fixed:

- the trained runs' replacements of the sink's value and weight (analysis/interventions.py's
  INTERVENTIONS, the attention weights held fixed), the sink being position 0: the BOS, or the
  first token where the run has none;
- the massive activations of a layer's output set to zero or to their mean over the measured
  sequences, the ablation of Sun et al. 2024 (§3, on LLaMA2-7B: zero breaks the model, the mean
  does not), with a control that zeroes as many random other entries;
- the first position removed at inference (first_token_removed; Barbero et al. 2025, Table 2, as
  analysis/interventions.py's without_bos).

    run = load_run(measured_dir)
    table = lm_interventions(run, layers=[0, 3])   # layer, intervention, query_type, loss, rms_change, kl
    removed = first_token_removed(run)

The massive activations of layer l (sinkexp's definition): the entries h[b, t, c] of the residual
stream after block l (`blocks.{l}.resid_post`) with |h| >= MASSIVE_FACTOR x the median |h| of
sequence b at that layer (its T x d entries; the lower median, as massive_ratio's). Each massive
entry's mean is over the massive entries of its channel in all N sequences, at the first position
and at the later ones apart (Sun et al. 2024's sit at the first token and at the first delimiter,
each with its own nearly fixed value). Sequences go through the model `chunk` at a time (the run's
setting, else LOGIT_ELEMENTS logits a chunk); the donor of the sink replacements is the next
sequence of the same chunk. Random keys and entries are drawn with `seed`.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch

from sinkexp.analysis.interventions import COLUMNS as SINK_COLUMNS
from sinkexp.analysis.interventions import INTERVENTIONS, drop_first, random_other_keys
from sinkexp.hf.capture import intervene, layer_by_layer
from sinkexp.hf.measure import text_batch

MASSIVE_FACTOR = 100.0  # sinkexp's spike threshold (docs/metrics.md): Sun et al. 2024 report 1e3-1e5 x the median
LOGIT_ELEMENTS = 2**26  # logits per chunk (256 MiB in float32): 21 SmolLM2 sequences of 64 tokens, 4 of Gemma-3


@dataclass
class Massive:
    """One layer's massive activations over the N measured sequences."""

    entries: torch.Tensor  # (K, 3) long: sequence, position, channel of each massive entry
    values: torch.Tensor  # (K,) their h
    means: torch.Tensor  # (2, d): the mean massive h per channel at the first position (row 0) and later (row 1)
    control: torch.Tensor  # (K, 3): as many entries drawn among the layer's other entries


def massive_mask(h: torch.Tensor, factor: float = MASSIVE_FACTOR) -> torch.Tensor:
    """(B, T, d) bool: the entries of h (B, T, d) with |h| >= factor x their sequence's median |h| (and > 0)."""
    magnitude = h.abs()
    median = magnitude.flatten(1).median(dim=1).values  # (B,), the lower median as torch.median
    return (magnitude >= factor * median[:, None, None]) & (magnitude > 0)


def set_entries(entries: torch.Tensor, values: torch.Tensor):
    """A replacement of h (B, T, d): h[b, t, c] := value for each (b, t, c) of `entries` (K, 3)."""

    def replace(h: torch.Tensor) -> torch.Tensor:
        out, at = h.clone(), entries.to(h.device)
        out[at[:, 0], at[:, 1], at[:, 2]] = values.to(h)
        return out

    return replace


def mean_values(massive: Massive, entries: torch.Tensor) -> torch.Tensor:
    """The mean massive value of each entry's channel, at the first position or the later ones."""
    return massive.means[(entries[:, 1] > 0).long(), entries[:, 2]]


def massive_zero(massive: Massive, entries: torch.Tensor, control: torch.Tensor):
    return set_entries(entries, torch.zeros(len(entries)))


def massive_mean(massive: Massive, entries: torch.Tensor, control: torch.Tensor):
    return set_entries(entries, mean_values(massive, entries))


def random_entries_zero(massive: Massive, entries: torch.Tensor, control: torch.Tensor):
    return set_entries(control, torch.zeros(len(control)))


# name -> (the layer's Massive, its entries and control entries in the chunk) -> replacement of resid_post
MASSIVE_INTERVENTIONS = {
    "massive_zero": massive_zero,
    "massive_mean": massive_mean,
    "random_entries_zero": random_entries_zero,
}
KL = "kl, KL(p || p') of the unchanged and changed next-token distributions, nats, mean over positions"
COLUMNS = f"{SINK_COLUMNS}; {KL}"
DEFINITIONS = {  # what each LM row is, one line each (the sink ones: analysis/interventions.py)
    "massive_zero": "the massive activations of the layer's output (|h| >= 100 x its sequence's median |h|) := 0",
    "massive_mean": "each massive activation := the mean massive h of its channel over the measured sequences "
    "(first position and later ones apart)",
    "random_entries_zero": "as many random non-massive entries of the layer's output := 0 (massive_zero's control)",
    "first_token_removed": "every sequence without its first position (the BOS, or the first token) at inference",
}


def chunks(run, chunk: int | None = None) -> list[tuple[int, torch.Tensor]]:
    """(offset, (b, T) inputs) pieces of the run's inputs: `chunk` (else the run's, else LOGIT_ELEMENTS) a piece."""
    N, T = run.inputs.shape
    size = chunk or run.cfg.chunk or max(1, LOGIT_ELEMENTS // (T * run.model.config.vocab_size))
    return [(start, run.inputs[start : start + size]) for start in range(0, N, size)]


@torch.no_grad()
def find_massive(run, layers, seed: int = 0, chunk: int | None = None) -> dict[int, Massive]:
    """Each of `layers`' massive activations (massive_mask) over the run's inputs, their means and controls."""
    found = {layer: [] for layer in layers}

    def keep(layer: int, taps: dict) -> None:
        if layer in found:  # `offset`: the chunk now going through the model
            h = taps[f"blocks.{layer}.resid_post"]
            mask = massive_mask(h)
            found[layer].append((mask.nonzero().cpu() + torch.tensor([offset, 0, 0]), h[mask].cpu()))

    for offset, part in chunks(run, chunk):
        with layer_by_layer(run.model, run.family, keep):
            run.model(input_ids=part, use_cache=False)
    N, T = run.inputs.shape
    d = run.model.config.hidden_size
    out = {}
    for layer, parts in found.items():
        entries, values = torch.cat([e for e, _ in parts]), torch.cat([v for _, v in parts])
        group = (entries[:, 1] > 0).long() * d + entries[:, 2]  # (first or later, channel) as one index
        sums = torch.zeros(2 * d).index_add_(0, group, values)
        counts = torch.zeros(2 * d).index_add_(0, group, torch.ones(len(values)))
        flat = (entries * torch.tensor([T * d, d, 1])).sum(1)
        drawn = torch.randperm(N * T * d, generator=torch.Generator().manual_seed(seed + layer))
        drawn = drawn[~torch.isin(drawn, flat)][: len(entries)]
        control = torch.stack([drawn // (T * d), drawn // d % T, drawn % d], dim=1)
        out[layer] = Massive(entries, values, (sums / counts.clamp_min(1)).view(2, d), control)
    return out


def position_losses(run, batch, logits: torch.Tensor, baseline: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per position (b, T): the next-token loss, the mean squared change of the logits and the KL
    divergence of the next-token distribution from the unchanged model's."""
    base, changed = baseline.float().log_softmax(-1), logits.float().log_softmax(-1)
    return {
        "loss": run.task.loss(logits, batch),
        "rms_change": (logits - baseline).float().pow(2).mean(-1),
        "kl": (base.exp() * (base - changed)).sum(-1),
    }


def chunk_replacements(run, layer: int, name: str, massive: Massive | None, part, offset: int, other) -> dict:
    """{tap: replacement} of intervention `name` at `layer` for the sequences offset..offset+len(part)."""
    if name in INTERVENTIONS:
        sink = torch.zeros(len(part), dtype=torch.long, device=part.device)
        taps = INTERVENTIONS[name](sink, other[offset : offset + len(part)].to(part.device))
        return {f"blocks.{layer}.attn.{tap}": fn for tap, fn in taps.items()}

    def within(entries: torch.Tensor) -> torch.Tensor:
        chosen = entries[(entries[:, 0] >= offset) & (entries[:, 0] < offset + len(part))]
        return chosen - torch.tensor([offset, 0, 0])

    replace = MASSIVE_INTERVENTIONS[name](massive, within(massive.entries), within(massive.control))
    return {f"blocks.{layer}.resid_post": replace}


@torch.no_grad()
def lm_interventions(
    run, layers, names=(*INTERVENTIONS, *MASSIVE_INTERVENTIONS), seed: int = 0, massive=None, chunk=None
) -> pd.DataFrame:
    """Per layer and intervention (and `none`, the unchanged model): the loss, the RMS change of the
    logits and the KL divergence from the unchanged model, per query type (text) and over all, on the
    run's inputs, `chunk` sequences a pass. Massive interventions are left out at a layer without
    massive activations (`massive`: find_massive's, found here when not given)."""
    massive = massive if massive is not None else find_massive(run, layers, seed)
    N, T = run.inputs.shape
    other = random_other_keys(torch.zeros(N, dtype=torch.long), torch.arange(T), seed)
    values: dict[tuple[int, str], list[dict]] = {}
    for offset, part in chunks(run, chunk):
        batch = text_batch(part)
        baseline = run.model(input_ids=part, use_cache=False).logits
        for layer in layers:
            for name in ("none", *names):
                if name in MASSIVE_INTERVENTIONS and not len(massive[layer].entries):
                    continue
                logits = baseline
                if name != "none":
                    taps = chunk_replacements(run, layer, name, massive.get(layer), part, offset, other)
                    with intervene(run.model, run.family, taps):
                        logits = run.model(input_ids=part, use_cache=False).logits
                values.setdefault((layer, name), []).append(position_losses(run, batch, logits, baseline))
    query_sets = {"text": (run.batch.query_type == 0) & run.batch.loss_mask, "all": run.batch.loss_mask}
    rows = []
    for (layer, name), parts in values.items():
        per_position = {key: torch.cat([part[key] for part in parts]) for key in parts[0]}
        for query_type, queries in query_sets.items():
            row = {key: per_position[key][queries].mean().item() for key in per_position}
            row["rms_change"] = row["rms_change"] ** 0.5
            rows.append({"layer": layer, "intervention": name, "query_type": query_type, **row})
    return pd.DataFrame(rows)


@torch.no_grad()
def first_token_removed(run) -> dict[str, float]:
    """The inputs as measured and without their first position: per setting the attention on the
    first position (mean over the later queries, heads and layers) and the loss over the same
    predictions (all but the one the first position makes, which has nothing to be read from without it)."""
    sums = {key: 0.0 for key in ("first_attn_first", "first_attn_no_first", "loss_first", "loss_no_first")}
    counts = dict.fromkeys(sums, 0)
    for _, part in chunks(run):
        for name, batch in (("first", text_batch(part)), ("no_first", drop_first(text_batch(part)))):
            attention = []
            with layer_by_layer(run.model, run.family, lambda _, taps: attention.append(first_column(taps))):
                logits = run.model(input_ids=batch.inputs, use_cache=False).logits
            counted = batch.loss_mask.clone()
            if name == "first":
                counted[:, 0] = False  # the first position's own prediction: dropped with it
            measured = {"first_attn": torch.stack(attention), "loss": run.task.loss(logits, batch)[counted]}
            for key, values in measured.items():
                sums[f"{key}_{name}"] += values.sum().item()
                counts[f"{key}_{name}"] += values.numel()
    return {key: sums[key] / counts[key] if counts[key] else float("nan") for key in sums}  # T = 2: no later query


def first_column(taps: dict) -> torch.Tensor:
    """A layer's attention on the first position from every later query, (b, H, T - 1)."""
    weights = next(tensor for name, tensor in taps.items() if name.endswith(".attn.weights"))
    return weights[:, :, 1:, 0]
