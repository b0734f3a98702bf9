"""What a `sinkexp measure` run keeps for its figures (report/model_figures.py draws them), read off
the taps of the measuring pass itself (hf/measure.py's `observe`), written into the run directory:

    attention.npz  layer<L>: (H, P, P) float32, each head's attention among the first P positions
                   (P = min(T, MAP_POSITIONS)), mean over the measured sequences; sink: 0. The causal
                   mask keeps those queries off the later keys, so each row is the query's whole row.
    massive.csv    per layer (the residual stream after the block, `blocks.{l}.resid_post`): top1,
                   top2, top3 and median, each sequence's largest, second and third largest and median
                   |h| averaged over the sequences (Sun et al. 2024's layerwise profile, §2: the three
                   largest magnitudes and the median at each layer, averaged over sequences); largest,
                   the largest |h| of any sequence, with its position and channel.

    record = Recorder()
    metric_rows, loss_rows = measure(model, inputs, step, chunk, observe=record.observe)
    record.write(run_dir)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import torch

from sinkexp.rundir import files as rundir_files

MAP_POSITIONS = 64  # the attention maps kept: 16 KiB a head (270 heads of SmolLM2: 4.4 MB); wider is unreadable
MASSIVE_COLUMNS = ["layer", "top1", "top2", "top3", "median", "largest", "position", "channel"]


class Recorder:
    """Sums, over the chunks of a measuring pass, of what the figures need; `write` turns them into files."""

    def __init__(self):
        self.maps: dict[int, torch.Tensor] = {}  # layer -> (H, P, P) sum over sequences
        self.profile: dict[int, torch.Tensor] = {}  # layer -> (4,) sums over sequences of top1..3, median
        self.largest: dict[int, tuple[float, int, int]] = {}  # layer -> (|h|, position, channel)
        self.sequences: dict[int, int] = {}

    def observe(self, layer: int, taps: dict) -> None:
        """Add one chunk's layer: its attention weights (b, H, T, T) and its output h (b, T, d)."""
        weights, h = taps[f"blocks.{layer}.attn.weights"], taps[f"blocks.{layer}.resid_post"]
        P = min(h.shape[1], MAP_POSITIONS)
        magnitude = h.abs().flatten(1)  # (b, T * d)
        top = magnitude.topk(min(3, magnitude.shape[1]), dim=1).values  # (b, <= 3)
        top = torch.cat([top, top[:, -1:].expand(-1, 3 - top.shape[1])], dim=1)  # d * T < 3: repeat the last
        median = magnitude.median(dim=1).values[:, None]  # the lower median, as massive_ratio's
        self.maps[layer] = self.maps.get(layer, 0) + weights[:, :, :P, :P].sum(0).cpu()
        self.profile[layer] = self.profile.get(layer, 0) + torch.cat([top, median], dim=1).sum(0).cpu()
        self.sequences[layer] = self.sequences.get(layer, 0) + h.shape[0]
        value, index = magnitude.max(dim=1)  # per sequence
        b = int(value.argmax())
        position, channel = divmod(int(index[b]), h.shape[2])
        if float(value[b]) > self.largest.get(layer, (-1.0,))[0]:
            self.largest[layer] = (float(value[b]), position, channel)

    def write(self, run_dir: Path) -> None:
        """attention.npz and massive.csv into run_dir (each written atomically)."""
        layers = sorted(self.sequences)
        maps = {f"layer{layer}": (self.maps[layer] / self.sequences[layer]).numpy() for layer in layers}
        rundir_files.write_arrays(Path(run_dir) / rundir_files.ATTENTION, {**maps, "sink": np.array(0)})
        rows = [
            [layer, *(self.profile[layer] / self.sequences[layer]).tolist(), *self.largest[layer]] for layer in layers
        ]
        rundir_files.write_csv(Path(run_dir) / rundir_files.MASSIVE, pd.DataFrame(rows, columns=MASSIVE_COLUMNS))
