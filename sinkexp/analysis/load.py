"""Load a run directory back: its config, task, trained model, held-out batch and tables.

    from sinkexp import load_run
    run = load_run("outputs/runs/trigger/softmax/L1/<time>-<hash>")     # step=N: a kept checkpoint
    pred, cache = run.forward(["blocks.0.attn.weights"])                 # one captured forward pass
    run.metrics, run.losses, run.summary                                 # the tables as written

The model is rebuilt from config.yaml, on the device kind the run trained on (meta.json), and loaded
from the checkpoint (the last one, or checkpoints/step_<N>.pt from train.keep_checkpoints) with the
same safe loader training uses. The held-out batch is the evaluation batch of the run (same seed,
same task structure, drawn by a generator of the same kind). Interventions
(`sinkexp.model.intervene`) work on `run.model` as on any model. A `sinkexp measure` run loads as
a MeasuredRun (analysis/measured.py): the measured transformers model, rebuilt through the measure
command's loader, with the N x T token ids it measured.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch

from sinkexp.analysis.measured import MeasuredRun, load_measured
from sinkexp.config.schema import Config
from sinkexp.config.validate import from_dictconfig
from sinkexp.evaluate.evaluator import captured_forward
from sinkexp.machine.devices import device_kind, resolve_device, usable_gpus
from sinkexp.model import Transformer, tap_names
from sinkexp.rundir import files as rundir_files
from sinkexp.rundir.lifecycle import RunDir, RunDirError
from sinkexp.rundir.reading import RunFiles, damage, unreadable
from sinkexp.tasks import TASKS, held_out_batch
from sinkexp.tasks.base import Batch


@dataclass
class LoadedRun:
    """A run directory loaded back: its config, task, trained model at `step`, held-out batch, tables."""

    path: Path
    cfg: Config
    task: object
    model: Transformer  # eval mode, weights of `step`
    batch: Batch  # the run's held-out evaluation batch
    step: int  # the training step the weights are from
    metrics: pd.DataFrame  # metrics.csv
    losses: pd.DataFrame  # losses.csv
    summary: dict | None  # summary.json (None before the run finished)

    @torch.no_grad()
    def forward(self, names: list[str] | None = None, inputs: torch.Tensor | None = None):
        """(prediction, {tap name: tensor}) for the held-out batch (or `inputs`); names default to every tap."""
        inputs = self.batch.inputs if inputs is None else inputs.to(self.batch.inputs.device)
        return captured_forward(self.model, inputs, tap_names(self.model) if names is None else names)

    def kept_steps(self) -> list[int]:
        """Steps with a kept checkpoint (train.keep_checkpoints), loadable with load_run(path, step=N)."""
        return RunFiles(self.path).kept_steps()


def missing_checkpoint(path: Path, name: str, step: int | None) -> str:
    """What is missing, and for a step, the steps a run kept."""
    if step is None:
        return f"{path / name} does not exist"
    kept = sorted(p.stem for p in (path / rundir_files.KEPT).glob("step_*.pt"))
    return (
        f"{path / name} does not exist; kept steps: {kept} "
        "(train.keep_checkpoints=true keeps them; step 0 is rebuilt from the seed)"
    )


def load_run(path, step: int | None = None, device: str | None = None) -> LoadedRun | MeasuredRun:
    """The run in `path` with its weights at `step` (default: its last checkpoint; 0: the untrained
    model, rebuilt from the run's seed when no checkpoint of step 0 was kept), on `device`
    (default: the kind it trained on, cuda or cpu). RunDirError for a device of another kind: the
    held-out batch would then come from another generator, not the one the run was evaluated on.
    A `sinkexp measure` run gives a MeasuredRun: the measured model, its inputs and tables."""

    path = Path(path)
    if not (path / rundir_files.CONFIG).exists():
        raise FileNotFoundError(f"{path} is not a run directory (no {rundir_files.CONFIG})")
    files = RunFiles(path)
    reason = damage(path) if (path / rundir_files.DONE).exists() else None  # the manifest, checked
    try:
        config = files.config
    except Exception as err:  # OmegaConf raises several types for a file that is not a mapping
        reason = reason or unreadable(err)
    if reason is not None:
        raise RunDirError(f"{path}: damaged: {reason}; the run cannot be loaded (train it again into another folder)")
    if config.get("command") == "measure":  # the measured model and inputs (analysis/measured.py)
        return load_measured(path, config, step, device)
    cfg = from_dictconfig(config)
    trained = ((files.meta or {}).get("device") or {}).get("resolved") or "cpu"  # e.g. cuda:0
    kind = device_kind(trained)
    why = (
        f"{path} was trained on {trained}, so it loads on {kind} only (its held-out batch comes from a {kind} "
        f"generator)"
    )
    if device_kind(device or trained) != kind:
        raise RunDirError(f"{why}; drop device={device}")
    if kind == "cuda" and not usable_gpus():
        raise RunDirError(f"{why}; this machine has no usable GPU")
    device = resolve_device(device or kind)
    name = rundir_files.CHECKPOINT if step is None else rundir_files.kept_checkpoint(step)
    state = RunDir(path, cfg, kind=kind).load_checkpoint(name)
    task = TASKS[cfg.task.name](cfg.task)
    if state is None and step == 0:  # untrained: initialised exactly as training initialised it (runner.make_trainer)
        torch.manual_seed(cfg.seed)
        state = {"trainer": {"step": 0, "model": Transformer(cfg.model, cfg.attn, task).state_dict()}}
    if state is None:
        raise RunDirError(missing_checkpoint(path, name, step))
    model = Transformer(cfg.model, cfg.attn, task).to(device)
    model.load_state_dict(state["trainer"]["model"])
    model.eval()
    batch = held_out_batch(task, cfg.eval.batch_size, cfg.eval.seed, device)
    return LoadedRun(
        path=path,
        cfg=cfg,
        task=task,
        model=model,
        batch=batch,
        step=state["trainer"]["step"],
        metrics=files.metrics,
        losses=files.losses,
        summary=files.summary,
    )
