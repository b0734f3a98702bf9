"""A `sinkexp measure` run loaded back (load_run's branch for them): the measured model, rebuilt
through the measure command's own loader from the run's config.yaml (hf/runner.py: build_measurement cuts
the inputs and checks the model, open_model loads it), the same N x T token ids it measured, and
its tables.

    run = load_run("outputs/runs/measure/<model>/<time>-<hash>")    # a MeasuredRun
    run.model, run.inputs, run.batch                                 # transformers model, (N, T) ids, their Batch
    logits, cache = run.forward(["blocks.3.resid_post"])             # one captured forward pass
    run.metrics, run.losses, run.summary                             # the tables as written

The rebuilt job's config hash must be the recorded one (meta.json): it covers the model's files,
the text's content and every measured setting, so a model folder or text that changed since the
run is refused rather than loaded as if it were the one measured; the inputs are checked against
inputs.npz. Interventions go through hf/capture.py's `intervene` (analysis/lm_interventions.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from omegaconf import OmegaConf

from sinkexp.config.settings import MeasureConfig, measure_config
from sinkexp.hf import require_transformers, runner
from sinkexp.hf.capture import layer_by_layer
from sinkexp.hf.families import FAMILIES
from sinkexp.hf.measure import NextToken, text_batch
from sinkexp.machine.devices import resolve_device
from sinkexp.rundir.files import RunDirError
from sinkexp.rundir.reading import FINISHED, RunFiles, run_status
from sinkexp.tasks.base import Batch

WRITTEN_ONLY = ("command", "measured")  # config.yaml's keys that are not MeasureConfig's settings


@dataclass
class MeasuredRun:
    """A finished `sinkexp measure` run: its settings, the measured model, inputs and tables."""

    path: Path
    cfg: MeasureConfig
    model: object  # the transformers causal LM, eval mode, attention through hf/capture.py
    inputs: torch.Tensor  # (N, T) token ids, as measured (inputs.npz), on the model's device
    step: int  # the checkpoint's training step (-1: unknown)
    metrics: pd.DataFrame
    losses: pd.DataFrame
    summary: dict

    @property
    def batch(self) -> Batch:
        """The inputs as measure reads them: next-token targets, position 0 the sink (hf/measure.py)."""
        return text_batch(self.inputs)

    @property
    def task(self) -> NextToken:
        return NextToken(self.model.config.vocab_size)

    @property
    def family(self):
        return FAMILIES[self.model.config.model_type]

    @property
    def n_layers(self) -> int:
        return len(self.family.layer_modules(self.model))

    @torch.no_grad()
    def forward(self, names: list[str] | None = None, inputs: torch.Tensor | None = None):
        """(logits, {tap name: tensor}) of one pass over the inputs (or `inputs`); names default to
        every tap hf/capture.py records."""
        inputs = self.inputs if inputs is None else inputs.to(self.inputs.device)
        cache: dict[str, torch.Tensor] = {}

        def keep(layer: int, taps: dict) -> None:
            cache.update({name: tensor for name, tensor in taps.items() if names is None or name in names})

        with layer_by_layer(self.model, self.family, keep):
            logits = self.model(input_ids=inputs, use_cache=False).logits
        return logits, cache


def settings_of(config) -> MeasureConfig:
    """The MeasureConfig a run's config.yaml records (its `step` the resolved checkpoint step)."""
    values = {key: value for key, value in OmegaConf.to_container(config).items() if key not in WRITTEN_ONLY}
    return measure_config(values)


def located(model: str, meta: dict | None) -> str:
    """`model` as measure named it, or, for a folder named relative to where measure ran and not
    found from here, its absolute path from meta.json (a hub snapshot's folder is named by its
    commit, never by the model's name, so a hub id stays a hub id)."""
    folder = ((meta or {}).get("model") or {}).get("folder")
    if folder and not Path(model).expanduser().exists() and Path(folder).name == Path(model).name:
        return folder
    return model


def load_measured(path: Path, config, step: int | None = None, device: str | None = None) -> MeasuredRun:
    """The finished measure run in `path` (config: its config.yaml) with its model on `device`
    (default: the run's device setting). RunDirError when it has not finished, when a step other
    than its own is asked for, or when its model or text changed since; ConfigError when the model
    cannot be loaded (transformers missing, the folder gone: the measure command's own lines)."""
    state, reason = run_status(path)
    if state not in FINISHED:
        raise RunDirError(
            f"{path} is a `sinkexp measure` run that has not finished ({state}{': ' + reason if reason else ''}); "
            "run the sinkexp measure "
            "command that started it again to finish it"
        )
    files = RunFiles(path)
    cfg = settings_of(config)
    if step is not None and step != cfg.step:
        raise RunDirError(f"{path} measured one checkpoint, of step {cfg.step}; drop step={step}")
    require_transformers()
    cfg.dir, cfg.model = str(path), located(cfg.model, files.meta)
    job = runner.build_measurement(cfg, multirun=False, started="")
    recorded = (files.meta or {}).get("config_hash")
    if job.digest != recorded:
        raise RunDirError(
            f"{path}: its model or text has changed since it was measured (config hash {job.digest} now, "
            f"{recorded} recorded); measure the model again into another dir to read it"
        )
    measured = np.load(path / runner.INPUTS)["inputs"] if (path / runner.INPUTS).exists() else None
    if measured is not None and not np.array_equal(measured, job.inputs.numpy()):
        raise RunDirError(f"{path}: the text cuts into other tokens than {runner.INPUTS} holds (another tokenizer?)")
    _, model = runner.open_model(job, resolve_device(device or cfg.device))
    device_of = next(model.parameters()).device
    return MeasuredRun(
        path=path,
        cfg=cfg,
        model=model,
        inputs=job.inputs.to(device_of),
        step=job.step,
        metrics=files.metrics,
        losses=files.losses,
        summary=files.summary,
    )
