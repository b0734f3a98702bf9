"""Barbero et al. 2025's perturbation on a trained run, with its BOS sink and with BOS removed at
inference (their Fig. 2: with BOS the change of one token stays local; without, it spreads): the
metric is sinkexp/evaluate/perturbation.py's, read at every block's output (the residual stream,
`blocks.<l>.resid_post`) on the run's held-out batch; on a measured language model (a `sinkexp
measure` run loaded back) the same with its first position (its BOS) kept and removed, on the
sequences it measured.

    from sinkexp import load_run
    from sinkexp.analysis.perturbation import perturbation
    values = perturbation(load_run(path))   # {"change_bos_0": ..., "reach_no_bos_0": ..., ...}
    values = measured_perturbation(load_run(measured_path))   # the same keys
"""

from __future__ import annotations

import torch

from sinkexp.analysis.interventions import drop_first
from sinkexp.evaluate.evaluator import captured_forward
from sinkexp.evaluate.perturbation import perturbed_position, spread, swap_token
from sinkexp.hf.capture import layer_by_layer


def representations(model, inputs: torch.Tensor) -> list[torch.Tensor]:
    """Each block's output over the task's tokens (B, T, d_model), from one captured forward pass."""
    names = [f"blocks.{layer}.resid_post" for layer in range(len(model.blocks))]
    _, cache = captured_forward(model, inputs, names)
    tokens = model.token_positions(inputs.shape[1], inputs.device)
    return [cache[name][:, tokens] for name in names]


@torch.no_grad()
def perturbation(run) -> dict[str, float]:
    """Per setting (bos: the batch as trained; no_bos: BOS removed at inference) and layer L,
    change_<setting>_<L> and reach_<setting>_<L> (evaluate/perturbation.spread) for the same change
    in both: the token a quarter of the way into the sequence (perturbed_position, counted with BOS)."""
    if not run.task.has_bos:
        raise ValueError(f"task {run.cfg.task.name!r} has no BOS to remove")
    position = perturbed_position(run.batch.inputs.shape[1])
    out = {}
    for name, batch, at in (("bos", run.batch, position), ("no_bos", drop_first(run.batch), position - 1)):
        clean = representations(run.model, batch.inputs)
        changed = representations(run.model, swap_token(batch.inputs, at))
        for layer, (before, after) in enumerate(zip(clean, changed)):
            out[f"change_{name}_{layer}"], out[f"reach_{name}_{layer}"] = spread(before, after, at)
    return out


def measured_representations(run, inputs: torch.Tensor) -> list[torch.Tensor]:
    """Each block's output (B, T, d_model) of a measured model over `inputs`, from one pass without the readout."""
    kept = {}

    def keep(layer: int, taps: dict) -> None:
        kept[layer] = taps[f"blocks.{layer}.resid_post"]

    with layer_by_layer(run.model, run.family, keep):
        run.model.base_model(input_ids=inputs, use_cache=False)
    return [kept[layer] for layer in sorted(kept)]


@torch.no_grad()
def measured_perturbation(run) -> dict[str, float]:
    """`perturbation`'s values on a measured LM: bos, its inputs as measured (position 0 its BOS, or its
    first token); no_bos, without their first position; the token a quarter of the way in changed."""
    position = perturbed_position(run.inputs.shape[1])
    out = {}
    for name, inputs, at in (("bos", run.inputs, position), ("no_bos", run.inputs[:, 1:], position - 1)):
        clean = measured_representations(run, inputs)
        changed = measured_representations(run, swap_token(inputs, at))
        for layer, (before, after) in enumerate(zip(clean, changed)):
            out[f"change_{name}_{layer}"], out[f"reach_{name}_{layer}"] = spread(before, after, at)
    return out
