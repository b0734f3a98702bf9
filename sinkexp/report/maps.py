"""One run's attention maps as `sinkexp report` draws them (attention_<setting>.png), from its
attention.npz (docs/rundir.md): a layer's maps per head, per query type where the task has several,
as the normaliser's shares beside the raw weights where the two differ (sigmoid, ReLU, a slot,
registers), and per example sequence, each with its own sink, where the sink moves between
sequences (a mean over them would spread the sink over every position). examples/inspect_run.py
draws its maps with the same attention_panel.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap, LogNorm
from matplotlib.transforms import blended_transform_factory

from sinkexp.rundir import files as rundir_files

FLOOR = 1e-3  # the attention maps' colour scale starts here (sinkexp's choice: a sink at 0.05 is 50x it)
NO_QUERY = ListedColormap(["0.8"])  # grey: query rows without a query of the panel's type


def attention_panel(fig, ax, weights: np.ndarray, sink: int, title: str) -> None:
    """One (T, T) attention map on a log colour scale from FLOOR to its largest weight (at least 1:
    raw weights of unnormalised variants may pass it), so that a sink of 0.05 shows as plainly as one
    of 0.99: black below FLOOR, white exactly 0 (masked keys, ReLU's zeros), grey a row that is NaN
    (no query of the type there); its colour bar, and a red mark above the sink's column when `sink` >= 0."""
    cmap = plt.get_cmap("viridis").with_extremes(under="black", bad="white")  # bad: 0, which a log scale masks
    peak = np.nanmax(weights) if not np.isnan(weights).all() else 1.0
    image = ax.imshow(np.nan_to_num(weights), cmap=cmap, norm=LogNorm(vmin=FLOOR, vmax=max(1.0, float(peak))))
    if np.isnan(weights).any():
        ax.imshow(np.where(np.isnan(weights), 1.0, np.nan), cmap=NO_QUERY, vmin=0, vmax=1)  # NaN: see-through
    if sink >= 0:  # a mark above its column, which a line over it would hide
        above = blended_transform_factory(ax.transData, ax.transAxes)
        ax.plot([sink], [1.0], marker="v", color="red", markersize=6, transform=above, clip_on=False)
    ax.set(xlabel="key" + (f" (sink {sink}: red mark)" if sink >= 0 else ""), ylabel="query")
    ax.set_title(title, fontsize=9, pad=8)
    fig.colorbar(image, ax=ax, fraction=0.046, extend="min", label="attention (log)")


def layer_panels(maps, layer: int) -> list[tuple[str, np.ndarray, int]]:
    """One layer's panels (title, (T, T) map, sink): for each kind (the weights, then their shares
    where kept) per example sequence when the sink moves, else per query type where kept, else the
    batch mean; each per head."""
    kinds = [("", "weights")] + ([("share_", "share")] if f"share_layer{layer}" in maps.files else [])
    panels = []
    for prefix, kind in kinds:
        said = f", {kind}" if len(kinds) > 1 else ""
        if f"{prefix}example_layer{layer}" in maps.files:
            examples = zip(maps[f"{prefix}example_layer{layer}"], maps["example_sink"])
            for e, (heads, sink) in enumerate(examples):
                panels += [(f"sequence {e}, head {h}{said}", m, int(sink)) for h, m in enumerate(heads)]
        elif f"{prefix}type_layer{layer}" in maps.files:
            for query_type, heads in zip(maps["query_types"], maps[f"{prefix}type_layer{layer}"]):
                panels += [(f"head {h}, {query_type} queries{said}", m, int(maps["sink"])) for h, m in enumerate(heads)]
        else:
            panels += [(f"head {h}{said}", m, int(maps["sink"])) for h, m in enumerate(maps[f"{prefix}layer{layer}"])]
    return panels


def plot_heatmaps(run: Path, label: str, path: Path) -> None:
    """A grid of one run's attention maps (attention.npz): a row per layer, layer_panels across."""
    with np.load(run / rundir_files.ATTENTION) as maps:
        layers = sorted(int(name[5:]) for name in maps.files if name.startswith("layer"))
        rows = [layer_panels(maps, layer) for layer in layers]
        moving = "example_sink" in maps.files
        grey = any(np.isnan(weights).any() for panels in rows for _, weights, _ in panels)
    width = max(len(panels) for panels in rows)
    fig, axes = plt.subplots(len(rows), width, figsize=(3.6 * width, 3.2 * len(rows)), squeeze=False)
    for row, layer, panels in zip(axes, layers, rows):
        for ax, (title, weights, sink) in zip(row, panels):
            attention_panel(fig, ax, weights, sink, f"layer {layer}, {title}")
        for ax in row[len(panels) :]:
            ax.set_axis_off()
    what = "the first sequences' own maps (the sink moves between sequences)" if moving else "mean over the batch"
    title = f"{label}: attention on the held-out batch, {what} ({run.name}); white: exactly 0"
    title += ", grey: no query of the type" if grey else ""
    fig.suptitle(textwrap.fill(title, 40 * width), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
