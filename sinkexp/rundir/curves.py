"""Live curves: a run's evaluations as TensorBoard event files in <run dir>/tensorboard/, with
`tensorboard=true` (the tensorboard extra: pip install -e .[tensorboard]).

    sinkexp train task=trigger tensorboard=true
    tensorboard --logdir outputs                      # every run below outputs/, live

What each evaluation writes, at its step (docs/rundir.md, tensorboard/):
- scalars `loss/<split>` (eval/<query type>, baseline/<query type>; `loss/train` at every log
  step), and per layer `layer<L>/<metric>/<query type>` of SCALARS, the mean over heads of the
  metrics table's values (docs/metrics.md);
- images `attention/layer<L>`: the layer's attention maps averaged over the held-out batch, its
  heads side by side, each scaled to its own largest weight (white: that weight, black: 0).
A resumed run opens its writer with purge_step at the first step after its checkpoint: TensorBoard
drops what the interrupted attempt wrote from that step on, so no step is shown twice.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np

SCALARS = ("sink_attn", "sink_share", "max_inflow", "sink_rate@0.3", "sink_rate@0.8", "massive_ratio")
FOLDER = "tensorboard"


class Curves:
    """One run's TensorBoard writer; `purge_step`: a resumed run's first step after its checkpoint
    (what the interrupted attempt logged from there on is dropped), None for a new run."""

    def __init__(self, run_dir: Path, purge_step: int | None):
        from torch.utils.tensorboard import SummaryWriter  # lazy: the tensorboard extra (1 s to import)

        self.writer = SummaryWriter(log_dir=str(Path(run_dir) / FOLDER), purge_step=purge_step)

    def evaluated(self, rows: list[tuple], losses: list[tuple], maps: dict, step: int) -> None:
        """One evaluation: its metric rows (step, layer, head, query type, metric, value), its loss rows
        (step, split, loss) and evaluator.mean_attention's maps ({"layer<L>": (H, T, T)})."""
        for _, split, loss in losses:
            self.writer.add_scalar(f"loss/{split}", loss, step)
        per_head = defaultdict(list)
        for _, layer, _, query_type, metric, value in rows:
            if metric in SCALARS and layer >= 0:
                per_head[(layer, metric, query_type)].append(value)
        for (layer, metric, query_type), values in sorted(per_head.items()):
            self.writer.add_scalar(f"layer{layer}/{metric}/{query_type}", float(np.mean(values)), step)
        for name, heads in maps.items():
            if name.startswith("layer"):
                self.writer.add_image(f"attention/{name}", side_by_side(heads), step, dataformats="HW")
        self.writer.flush()

    def logged(self, step: int, loss: float) -> None:
        self.writer.add_scalar("loss/train", loss, step)

    def close(self) -> None:
        self.writer.close()


def side_by_side(heads: np.ndarray) -> np.ndarray:
    """(H, T, T) maps as one (T, H x T) image in [0, 1], each head divided by its own largest weight."""
    peak = heads.max(axis=(1, 2), keepdims=True)
    scaled = np.divide(heads, peak, out=np.zeros_like(heads), where=peak > 0)
    return np.concatenate(list(scaled), axis=1)
