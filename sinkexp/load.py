"""Load a run directory back: its config, task, trained model, held-out batch and tables.

    from sinkexp import load_run
    run = load_run("outputs/runs/trigger/softmax/L1/<time>-<hash>")     # step=N: a kept checkpoint
    pred, cache = run.forward(["blocks.0.attn.weights"])                 # one captured forward pass
    run.metrics, run.losses, run.summary                                 # the tables as written

The model is rebuilt from config.yaml and loaded from the checkpoint (the last one, or
checkpoints/step_<N>.pt from train.keep_checkpoints) with the same safe loader training uses. The
held-out batch is the evaluation batch of the run (same seed, same task structure). Interventions
(`sinkexp.model.intervene`) work on `run.model` as on any model.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch
from omegaconf import OmegaConf

from sinkexp import rundir as R
from sinkexp.config import Config, from_dictconfig
from sinkexp.evaluate.evaluator import captured_forward
from sinkexp.model import Transformer, tap_names
from sinkexp.rundir import RunDir, RunDirError
from sinkexp.tasks import TASKS
from sinkexp.tasks.base import Batch


@dataclass
class Run:
    path: Path
    cfg: Config
    task: object
    model: Transformer        # eval mode, weights of `step`
    batch: Batch              # the run's held-out evaluation batch
    step: int                 # the training step the weights are from
    metrics: pd.DataFrame     # metrics.csv
    losses: pd.DataFrame      # losses.csv
    summary: dict | None      # summary.json (None before the run finished)

    @torch.no_grad()
    def forward(self, names: list[str] | None = None, inputs: torch.Tensor | None = None):
        """(prediction, {tap name: tensor}) for the held-out batch (or `inputs`); names default to every tap."""
        inputs = self.batch.inputs if inputs is None else inputs.to(self.batch.inputs.device)
        return captured_forward(self.model, inputs, tap_names(self.model) if names is None else names)

    def kept_steps(self) -> list[int]:
        """Steps with a kept checkpoint (train.keep_checkpoints), loadable with load_run(path, step=N)."""
        return sorted(int(p.stem.removeprefix("step_")) for p in (self.path / R.KEPT).glob("step_*.pt"))


def load_run(path, step: int | None = None, device: str = "cpu") -> Run:
    """The run in `path` with its weights at `step` (default: its last checkpoint)."""
    from sinkexp.runner import resolve_device

    path = Path(path)
    if not (path / R.CONFIG).exists():
        raise FileNotFoundError(f"{path} is not a run directory (no {R.CONFIG})")
    cfg = from_dictconfig(OmegaConf.load(path / R.CONFIG))
    device = resolve_device(device)
    name = R.CHECKPOINT if step is None else R.kept_checkpoint(step)
    state = RunDir(path, cfg).load_checkpoint(name)
    if state is None:
        raise RunDirError(f"{path / name} does not exist" + ("" if step is None else
                          f"; kept steps: {sorted(p.stem for p in (path / R.KEPT).glob('step_*.pt'))} "
                          "(train.keep_checkpoints=true keeps them)"))
    task = TASKS[cfg.task.name](cfg.task)
    model = Transformer(cfg.model, cfg.attn, task).to(device)
    model.load_state_dict(state["trainer"]["model"])
    model.eval()
    generator = torch.Generator(device=device).manual_seed(cfg.eval.seed)
    batch = task.sample(cfg.eval.batch_size, generator, device)

    def table(name: str) -> pd.DataFrame | None:
        return pd.read_csv(path / name) if (path / name).exists() else None

    summary = R.read_json(path / R.SUMMARY) if (path / R.SUMMARY).exists() else None
    return Run(path=path, cfg=cfg, task=task, model=model, batch=batch, step=state["trainer"]["step"],
               metrics=table(R.METRICS), losses=table(R.LOSSES), summary=summary)
