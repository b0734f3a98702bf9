"""Figure of the sink attention per query position and layer (sinkexp/analysis/positions.py's tables): one
panel per run, positions across, layers down, the colour the mean over sequences of the attention
on the sink. Plot code only: pandas and matplotlib, no model."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import pandas as pd

from sinkexp.report.save import Saver


def position_grid(table: pd.DataFrame) -> pd.DataFrame:
    """One run's panel: layers down, query positions across (NaN where no query of the type sits)."""
    return table.pivot(index="layer", columns="position", values="value")


def position_figure(tables: dict[str, pd.DataFrame], path: Path, title: str, save: Saver = Saver()) -> Path:
    """Write `path` (PNG, or the Saver's formats): a heatmap per run ({label: position_profile table})."""
    matplotlib.use("Agg")
    rows = sum(t["layer"].nunique() for t in tables.values())
    fig, axes = plt.subplots(
        len(tables),
        1,
        figsize=(9, 1.2 + 0.55 * rows + 0.45 * len(tables)),
        squeeze=False,
        sharex=True,
        layout="constrained",
    )
    for ax, (label, table) in zip(axes[:, 0], tables.items()):
        grid = position_grid(table)
        image = ax.imshow(grid.values, vmin=0, vmax=1, cmap="viridis", aspect="auto")
        ax.set_yticks(range(len(grid.index)), [f"layer {layer}" for layer in grid.index])
        ax.set_title(label, fontsize=9, loc="left")
    axes[-1, 0].set_xlabel("query position")
    fig.colorbar(image, ax=axes[:, 0].tolist(), label="attention on the sink (mean over sequences)")
    fig.suptitle(title, fontsize=10)
    return save(fig, path)[0]
