"""Causal interventions on a trained run (Fesser et al. 2026, App. A.3/A.4): change what one layer's
sink contributes, with that layer's attention weights held fixed, and measure the loss and how far
the output moves. Each is a replacement at a capture point (`sinkexp.model.intervene`) in the one
forward pass, never a second model.

Each intervention is defined once, in DEFINITIONS: the legend `sinkexp intervene` (analysis/intervene.py)
prints, its --help and docs/reproduce.md's table read it there. For broadcast, `payload_transfer`: with the donor's sink
value, does the donor's payload reach every recipient (cosine), as one change common to all tokens
(common energy)? For tasks with a BOS, `without_bos`: the held-out batch with BOS removed at inference.

    from sinkexp import load_run
    from sinkexp.analysis.interventions import run_interventions
    table = run_interventions(load_run(path), layer=0)   # one row per intervention

Values are (B, H, S, D) at `blocks.<l>.attn.v`, weights (B, H, T, S) at `blocks.<l>.attn.weights`;
S counts the model's sequence (registers included): sinks and keys are positions in it. A random
key is drawn with `seed` (one per sequence, shared by the heads), the donor is sequence b + 1 mod B.
"""

from __future__ import annotations

from typing import Callable

import pandas as pd
import torch

from sinkexp.evaluate.evaluator import captured_forward
from sinkexp.model import intervene
from sinkexp.tasks.base import Batch

Replacement = Callable[[torch.Tensor], torch.Tensor]


def set_key(v: torch.Tensor, key: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
    """v (B, H, S, D) with v[b, :, key[b]] := new[b] (new: (B, H, D))."""
    out = v.clone()
    out[torch.arange(v.shape[0], device=v.device), :, key] = new
    return out


def at_key(v: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    """v[b, :, key[b]], (B, H, D)."""
    return v[torch.arange(v.shape[0], device=v.device), :, key]


def zero_sink_value(sink: torch.Tensor, other: torch.Tensor) -> dict[str, Replacement]:
    return {"v": lambda v: set_key(v, sink, torch.zeros_like(at_key(v, sink)))}


def donor_sink_value(sink: torch.Tensor, other: torch.Tensor) -> dict[str, Replacement]:
    return {"v": lambda v: set_key(v, sink, at_key(v, sink).roll(-1, dims=0))}


def donor_value_at_sink(sink: torch.Tensor, other: torch.Tensor) -> dict[str, Replacement]:
    return {"v": lambda v: set_key(v, sink, at_key(v, other).roll(-1, dims=0))}


def zero_random_value(sink: torch.Tensor, other: torch.Tensor) -> dict[str, Replacement]:
    return {"v": lambda v: set_key(v, other, torch.zeros_like(at_key(v, other)))}


def redirect(sink: torch.Tensor, other: torch.Tensor) -> dict[str, Replacement]:
    def replace(weights: torch.Tensor) -> torch.Tensor:
        out = weights.clone()
        out[torch.arange(weights.shape[0], device=weights.device), :, :, sink] = 0.0
        mass = weights.sum(-1, keepdim=True)  # 1 for softmax; kept for unnormalised variants
        return out * mass / out.sum(-1, keepdim=True).clamp_min(1e-12)

    return {"weights": replace}


# What each row of the table is, one line each: the legend, --help and docs/reproduce.md's table read it
# (a test checks the docs against it). v: the layer's values, a (B, H, S, D) tap; the donor is sequence b + 1 mod B.
DEFINITIONS = {
    "none": "the model unchanged: the row the others are compared with",
    "zero_sink_value": "v at each sequence's sink key := 0",
    "donor_sink_value": "v at the sink := the sink's value in a donor sequence (the next one in the batch)",
    "donor_value_at_sink": "v at the sink := the donor's value at a random non-sink key",
    "zero_random_value": "v at one random non-sink key := 0 (a control: a key that is not the sink)",
    "redirect": "the sink's attention weight := 0, each row rescaled over its other keys to its former total",
}
ROWS = (
    "rows: the change made in the layer (v: its values at each key), its attention weights as computed unless changed:"
)
COLUMNS = "columns: loss, the task's per query type; rms_change, the prediction's RMS change from the row `none`"

# name -> (sink keys (B,), random non-sink keys (B,)) -> {tap in the layer's attention: replacement}
INTERVENTIONS = {
    "zero_sink_value": zero_sink_value,
    "donor_sink_value": donor_sink_value,
    "donor_value_at_sink": donor_value_at_sink,
    "zero_random_value": zero_random_value,
    "redirect": redirect,
}


def sink_keys(model, batch) -> tuple[torch.Tensor, torch.Tensor]:
    """(the task's token positions in the model's sequence (T,), each sequence's sink position in it (B,))."""
    tokens = model.anatomy(batch.inputs.shape[1], batch.inputs.device).tokens
    return tokens, tokens[batch.sink]


def random_other_keys(sink: torch.Tensor, tokens: torch.Tensor, seed: int) -> torch.Tensor:
    """One uniformly drawn task token per sequence that is not its sink, (B,) positions in the model."""
    generator = torch.Generator().manual_seed(seed)
    draw = torch.randint(0, len(tokens) - 1, (len(sink),), generator=generator).to(sink.device)
    index_of_sink = (tokens[None, :] == sink[:, None]).float().argmax(1)
    return tokens[draw + (draw >= index_of_sink).long()]  # skip the sink's own index


@torch.no_grad()
def run_interventions(run, layer: int, names=tuple(INTERVENTIONS), seed: int = 0) -> pd.DataFrame:
    """Loss per query type (and over all) and the RMS change of the prediction per query type, for the
    unchanged model (`none`) and each intervention on `layer`, on the run's held-out batch."""
    model, batch, task = run.model, run.batch, run.task
    tokens, sink = sink_keys(model, batch)
    other = random_other_keys(sink, tokens, seed)
    query_sets = {name: (batch.query_type == i) & batch.loss_mask for i, name in enumerate(task.query_types)}
    query_sets["all"] = batch.loss_mask
    baseline = model(batch.inputs)
    rows = []
    for name in ("none", *names):
        if name == "none":
            pred = baseline
        else:
            taps = INTERVENTIONS[name](sink, other)
            with intervene(model, {f"blocks.{layer}.attn.{tap}": fn for tap, fn in taps.items()}):
                pred = model(batch.inputs)
        per_position = task.loss(pred, batch)
        change = (pred - baseline).float().pow(2).flatten(2).mean(-1)  # (B, T): mean over the output channels
        for query_type, queries in query_sets.items():
            if queries.any():
                rows.append(
                    {
                        "layer": layer,
                        "intervention": name,
                        "query_type": query_type,
                        "loss": per_position[queries].mean().item(),
                        "rms_change": change[queries].mean().sqrt().item(),
                    }
                )
    return pd.DataFrame(rows)


@torch.no_grad()
def payload_transfer(run, layer: int) -> dict[str, float]:
    """Broadcast only (its targets are x_i + alpha x_{j*} R, so targets - inputs is the payload each
    token must receive): with the donor's sink value at the sink of `layer`, how much of the donor's
    payload reaches the recipients (every token but j*). Returns `cosine`, the mean over sequences of
    cos(mean over recipients of the output change, alpha (payload_donor - payload_own)), and
    `common_energy`, the share of the change's energy in its mean over the sequence's tokens
    (1: every token moved alike, a rank-one broadcast)."""
    model, batch = run.model, run.batch
    _, sink = sink_keys(model, batch)
    baseline = model(batch.inputs)
    with intervene(model, {f"blocks.{layer}.attn.v": donor_sink_value(sink, sink)["v"]}):
        change = model(batch.inputs) - baseline  # (B, T, d)
    payload = (batch.targets - batch.inputs)[:, 0]  # (B, d): alpha x_{j*} R
    expected = payload.roll(-1, dims=0) - payload
    recipients = torch.arange(change.shape[1], device=change.device)[None, :] != batch.sink[:, None]
    mean_change = (change * recipients[..., None]).sum(1) / recipients.sum(1, keepdim=True)
    cosine = torch.nn.functional.cosine_similarity(mean_change, expected, dim=-1).mean()
    common = change.mean(1).pow(2).mean() / change.pow(2).mean().clamp_min(1e-12)
    return {"cosine": cosine.item(), "common_energy": common.item()}


def drop_first(batch):
    """The batch without its first position (BOS): every field's position 0 dropped."""

    return Batch(
        inputs=batch.inputs[:, 1:],
        targets=batch.targets[:, 1:],
        loss_mask=batch.loss_mask[:, 1:],
        query_type=batch.query_type[:, 1:],
        sink=torch.zeros_like(batch.sink),
    )


@torch.no_grad()
def without_bos(run) -> dict[str, float]:
    """Barbero et al. 2025, Table 2: the held-out batch as trained (BOS first) and with BOS removed
    at inference (each sequence starts at its first content token). Per setting, the attention on
    the first position (mean over the later queries, heads and layers) and the loss over the same
    predictions in both: every target the batch counts but the one BOS predicts (task=lm's first
    byte; the synthetic tasks count none there), which has nothing to be predicted from without BOS."""

    if not run.task.has_bos:
        raise ValueError(f"task {run.cfg.task.name!r} has no BOS to remove")
    out = {}
    names = [f"blocks.{layer}.attn.weights" for layer in range(len(run.model.blocks))]
    for name, batch in (("bos", run.batch), ("no_bos", drop_first(run.batch))):
        pred, cache = captured_forward(run.model, batch.inputs, names)
        tokens = run.model.anatomy(batch.inputs.shape[1], batch.inputs.device).tokens
        first = torch.stack([cache[n][:, :, tokens[1:]][..., tokens[0]].mean() for n in names]).mean()
        counted = batch.loss_mask.clone()
        if name == "bos":
            counted[:, 0] = False  # BOS's own prediction: dropped along with BOS below
        out[f"first_attn_{name}"] = first.item()
        out[f"loss_{name}"] = run.task.loss(pred, batch)[counted].mean().item()
    return out
