"""One run's attention maps as `sinkexp report` draws them (attention_<setting>.png), from its
attention.npz (docs/rundir.md) or the same arrays computed again (evaluate.evaluator.mean_attention,
as examples/inspect_run.py does): a grid of a panel per head across and a row per layer and view,
on one logarithmic colour scale with one colour bar. A layer's views: per query type where the task
has several, per example sequence (each with its own sink) where the sink moves between sequences
(a mean over them would spread the sink over every position), else the batch mean; each as the
normaliser's shares beside the raw weights where the two differ (sigmoid, ReLU, a slot, registers).
A model of one head has its views across instead, a row per layer.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap, LogNorm
from matplotlib.transforms import blended_transform_factory

from sinkexp.report.save import Saver
from sinkexp.rundir import files as rundir_files

FLOOR = 1e-3  # the attention maps' colour scale starts here (sinkexp's choice: a sink at 0.05 is 50x it)
NO_QUERY = ListedColormap(["0.8"])  # grey: query rows without a query of the panel's type
PANEL = 2.6  # inches per panel
MAX_COLUMNS = 8  # panels across at most
ASPECT = 1.5  # panels across per row that a grid's arrangement aims at: a screen's or a page's shape


def colour_scale(maps: list[np.ndarray]) -> LogNorm:
    """The log scale every panel of a figure shares: FLOOR to the largest weight, at least 1 (raw
    weights of unnormalised variants may pass it)."""
    peaks = [np.nanmax(weights) for weights in maps if not np.isnan(weights).all()]
    return LogNorm(vmin=FLOOR, vmax=max([1.0, *map(float, peaks)]))


def attention_panel(ax, weights: np.ndarray, sink: int, title: str, norm: LogNorm):
    """One (T, T) attention map on the colour scale `norm`, so that a sink of 0.05 shows as plainly as
    one of 0.99: black below FLOOR, white exactly 0 (masked keys, ReLU's zeros), grey a row that is NaN
    (no query of the type there); a red mark above the sink's column when `sink` >= 0. Returns the
    image, for the figure's one colour bar."""
    cmap = plt.get_cmap("viridis").with_extremes(under="black", bad="white")  # bad: 0, which a log scale masks
    image = ax.imshow(np.nan_to_num(weights), cmap=cmap, norm=norm)
    if np.isnan(weights).any():
        ax.imshow(np.where(np.isnan(weights), 1.0, np.nan), cmap=NO_QUERY, vmin=0, vmax=1)  # NaN: see-through
    if sink >= 0:  # a mark above its column, which a line over it would hide
        above = blended_transform_factory(ax.transData, ax.transAxes)
        ax.plot([sink], [1.0], marker="v", color="red", markersize=5, transform=above, clip_on=False)
    ax.set_title(title, fontsize=8, pad=7)
    ax.tick_params(labelsize=7)
    return image


def layer_views(maps: dict, layer: int) -> list[tuple[str, str, np.ndarray, int]]:
    """One layer's views (kind, which, (H, T, T) maps, sink): for each kind (the weights, then their
    shares where kept, "" when there are only weights) per example sequence when the sink moves, else
    per query type where kept, else the batch mean (which: "")."""
    kinds = [("", "weights")] + ([("share_", "shares")] if f"share_layer{layer}" in maps else [])
    views = []
    for prefix, kind in kinds:
        kind = kind if len(kinds) > 1 else ""
        if f"{prefix}example_layer{layer}" in maps:
            examples = zip(maps[f"{prefix}example_layer{layer}"], maps["example_sink"])
            views += [(kind, f"sequence {e}", m, int(sink)) for e, (m, sink) in enumerate(examples)]
        elif f"{prefix}type_layer{layer}" in maps:
            types = zip(maps["query_types"], maps[f"{prefix}type_layer{layer}"])
            views += [(kind, f"{query_type} queries", m, int(maps["sink"])) for query_type, m in types]
        else:
            views.append((kind, "", maps[f"{prefix}layer{layer}"], int(maps["sink"])))
    return views


def grid(maps: dict) -> tuple[list[str], list[list[tuple[str, np.ndarray, int]]]]:
    """(row labels, rows of panels (title, (T, T) map, sink)): a row per layer and kind (weights,
    shares), and across it each head of each view (query type, example sequence); or a view's heads
    across, a row per view; or a head's views across, a row per head: whichever is nearest ASPECT
    with at most MAX_COLUMNS panels across (the first on a tie)."""
    layers = sorted(int(name[5:]) for name in maps if name.startswith("layer"))
    layouts = ([], [], [])  # (label, panels) rows of each arrangement
    for layer in layers:
        views = layer_views(maps, layer)
        for kind in dict.fromkeys(view[0] for view in views):
            mine = [(which, heads, sink) for k, which, heads, sink in views if k == kind]
            said = f"layer {layer}" + (f", {kind}" if kind else "")
            layouts[0].append(
                (said, [(title(h, which), m, sink) for which, heads, sink in mine for h, m in enumerate(heads)])
            )
            for which, heads, sink in mine:
                layouts[1].append((f"{said}\n{which}", [(f"head {h}", m, sink) for h, m in enumerate(heads)]))
            for h in range(len(mine[0][1])):
                layouts[2].append(
                    (f"{said}\nhead {h}", [(which or f"head {h}", heads[h], sink) for which, heads, sink in mine])
                )

    def squareness(rows: list) -> float:
        across = max(len(panels) for _, panels in rows)
        return abs(math.log(across / len(rows) / ASPECT)) if across <= MAX_COLUMNS else math.inf

    best = min(layouts, key=squareness)
    return [label for label, _ in best], [panels for _, panels in best]


def title(head: int, which: str) -> str:
    return f"head {head}" + (f", {which}" if which else "")


def draw_maps(maps: dict, title: str, path: Path, save: Saver = Saver()) -> list[Path]:
    """The grid of `maps` (attention.npz's arrays, or mean_attention's) under `title`, one colour bar."""
    labels, rows = grid(maps)
    width = max(map(len, rows))
    fig, axes = plt.subplots(
        len(rows), width, figsize=(PANEL * width + 1.2, PANEL * len(rows) + 0.9), squeeze=False, layout="constrained"
    )
    norm = colour_scale([weights for row in rows for _, weights, _ in row])
    for row_axes, label, panels in zip(axes, labels, rows):
        for ax, (name, weights, sink) in zip(row_axes, panels):
            image = attention_panel(ax, weights, sink, name, norm)
        row_axes[0].set_ylabel(f"{label}\nquery", fontsize=8)
        for ax in row_axes[len(panels) :]:
            ax.set_axis_off()
    for ax in axes[-1]:
        ax.set_xlabel("key", fontsize=8)
    height = PANEL * len(rows) + 0.9
    fig.colorbar(image, ax=axes, extend="min", label="attention (log scale)", shrink=min(1.0, 4.0 / height), aspect=25)
    grey = any(np.isnan(weights).any() for row in rows for _, weights, _ in row)
    said = "white: exactly 0" + (", grey: no query of the type" if grey else "") + "; red mark: the sink's column"
    fig.suptitle(textwrap.fill(f"{title}; {said}", int(11 * (PANEL * width + 1.2))), fontsize=9)
    return save(fig, path)


def plot_heatmaps(run: Path, label: str, path: Path, save: Saver = Saver()) -> list[Path]:
    """attention_<setting>.png: one run's attention.npz as draw_maps draws it."""
    with np.load(run / rundir_files.ATTENTION) as stored:
        maps = {name: stored[name] for name in stored.files}
    moving = "example_sink" in maps
    what = "the first sequences' own maps (the sink moves between sequences)" if moving else "mean over the batch"
    return draw_maps(maps, f"{label}: attention on the held-out batch, {what} ({run.name})", path, save)
