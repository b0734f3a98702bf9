"""Live curves: a run's evaluations as TensorBoard event files in <run dir>/tensorboard/, with
`tensorboard=true` (the tensorboard extra: pip install -e .[tensorboard]), and the same into a
Weights & Biases run in <run dir>/wandb/ with `wandb=true` (rundir/tracker.py; the wandb extra).

    sinkexp train task=trigger tensorboard=true
    tensorboard --logdir outputs                      # every run below outputs/, live

What each evaluation writes, at its step (docs/rundir.md, tensorboard/ and wandb/):
- scalars `loss/<split>` (eval/<query type>, baseline/<query type>; `loss/train` at every log
  step), and per layer `layer<L>/<metric>/<query type>` of SCALARS, the mean over heads of the
  metrics table's values (docs/metrics.md);
- images `attention/layer<L>`: the layer's attention maps averaged over the held-out batch, its
  heads side by side, each scaled to its own largest weight (white: that weight, black: 0).
A resumed run opens its TensorBoard writer with purge_step at the first step after its checkpoint:
TensorBoard drops what the interrupted attempt wrote from that step on, so no step is shown twice
(wandb has no such purge: tracker.py logs each step once instead).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np

from sinkexp.config.schema import Config

SCALARS = ("sink_attn", "sink_share", "max_inflow", "sink_rate@0.3", "sink_rate@0.8", "massive_ratio")
FOLDER = "tensorboard"


class Curves:
    """One run's live curves: each evaluation's scalars and images, and the train loss at each log
    step, handed to its trackers (TensorBoard, WandB: each with `write(scalars, images, step)`, `close()`)."""

    def __init__(self, trackers: list):
        self.trackers = trackers

    def evaluated(self, rows: list[tuple], losses: list[tuple], maps: dict, step: int) -> None:
        """One evaluation: its metric rows (step, layer, head, query type, metric, value), its loss rows
        (step, split, loss) and evaluator.mean_attention's maps ({"layer<L>": (H, T, T)})."""
        scalars = {f"loss/{split}": loss for _, split, loss in losses}
        per_head = defaultdict(list)
        for _, layer, _, query_type, metric, value in rows:
            if metric in SCALARS and layer >= 0:
                per_head[(layer, metric, query_type)].append(value)
        for (layer, metric, query_type), values in sorted(per_head.items()):
            scalars[f"layer{layer}/{metric}/{query_type}"] = float(np.mean(values))
        images = {f"attention/{name}": side_by_side(heads) for name, heads in maps.items() if name.startswith("layer")}
        for tracker in self.trackers:
            tracker.write(scalars, images, step)

    def logged(self, step: int, loss: float) -> None:
        for tracker in self.trackers:
            tracker.write({"loss/train": loss}, {}, step)

    def close(self) -> None:
        for tracker in self.trackers:
            tracker.close()


def open_curves(cfg: Config, run_dir: Path, digest: str, purge_step: int | None) -> Curves | None:
    """The run's curves, as its config asks (tensorboard=true, wandb=true), or None for neither;
    `purge_step`: a resumed run's first step after its checkpoint, None for a new run."""
    trackers = []
    if cfg.tensorboard:
        trackers.append(TensorBoard(run_dir, purge_step))
    if cfg.wandb:
        from sinkexp.rundir.tracker import WandB  # lazy: imports wandb, the extra

        trackers.append(WandB(run_dir, cfg, digest))
    return Curves(trackers) if trackers else None


class TensorBoard:
    """One run's TensorBoard writer in <run dir>/tensorboard/; `purge_step` (a resumed run's first
    step after its checkpoint): what the interrupted attempt logged from there on is dropped."""

    def __init__(self, run_dir: Path, purge_step: int | None):
        from torch.utils.tensorboard import SummaryWriter  # lazy: the tensorboard extra (1 s to import)

        self.writer = SummaryWriter(log_dir=str(Path(run_dir) / FOLDER), purge_step=purge_step)

    def write(self, scalars: dict[str, float], images: dict[str, np.ndarray], step: int) -> None:
        for tag, value in scalars.items():
            self.writer.add_scalar(tag, value, step)
        for tag, image in images.items():
            self.writer.add_image(tag, image, step, dataformats="HW")
        if images:  # an evaluation: on disk now, for a live view
            self.writer.flush()

    def close(self) -> None:
        self.writer.close()


def side_by_side(heads: np.ndarray) -> np.ndarray:
    """(H, T, T) maps as one (T, H x T) image in [0, 1], each head divided by its own largest weight."""
    peak = heads.max(axis=(1, 2), keepdims=True)
    scaled = np.divide(heads, peak, out=np.zeros_like(heads), where=peak > 0)
    return np.concatenate(list(scaled), axis=1)
