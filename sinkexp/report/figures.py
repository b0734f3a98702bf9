"""The figures of `sinkexp report` (sinkexp/report/runs.py): the sink by layer, its dynamics over
training and each head's sink score, one colour per setting throughout (the attention maps: maps.py).

Drawn from run directories' tables (docs/rundir.md), never from a model. matplotlib is imported here,
at the top: this module is imported only by the commands that draw (report, reproduce's figures).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from sinkexp.report.save import Saver
from sinkexp.rundir import files as rundir_files
from sinkexp.rundir.reading import FINISHED

MARKERS, STYLES = ("o", "s", "^", "D", "v", "P"), ("-", "--", ":", "-.")  # per layer
SHARE_LABEL = "share of attention on the sink"  # sink_share: the raw weight for softmax, row-normalised otherwise


def setting_name(key: str) -> str:
    """attn.name -> attn, task.name -> task; every other key keeps its full dotted name."""
    return key.removesuffix(".name")


def label_of(row: pd.Series, groups: list[str]) -> str:
    """The run's values of the varying settings; a setting its run does not have (a trained run
    beside measured ones) is left out, not written as nan, and a whole number is written as one."""
    return ", ".join(f"{setting_name(g)}={plain(row[g])}" for g in groups if not pd.isna(row[g])) or "all runs"


def plain(value):
    """A whole number as one (8, not the 8.0 a column with missing values holds)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


ABSENT = "-"  # a setting a run does not have (a measured run's attn, a trained run's model), in a table


def shown(value):
    """A setting's value as a table shows it: plain, or ABSENT for one the run lacks (never NaN)."""
    return ABSENT if value is None or (isinstance(value, float) and np.isnan(value)) else plain(value)


def with_labels(table: pd.DataFrame, runs: pd.DataFrame, groups: list[str]) -> pd.DataFrame:
    """`table` (with a run column) plus each run's group label."""
    labels = runs.set_index("run").apply(lambda row: label_of(row, groups), axis=1).rename("label")
    return table.join(labels, on="run")


def colours(labels) -> dict[str, str]:
    """One colour per setting, the same in every panel and figure."""
    return {label: f"C{i % 10}" for i, label in enumerate(sorted(set(labels)))}


def compared(groups: list[str]) -> str:
    return "compared: " + ", ".join(setting_name(g) for g in groups) if groups else "one setting"


def plot_sink_by_layer(
    finals: pd.DataFrame, runs: pd.DataFrame, groups: list[str], path: Path, save: Saver = Saver()
) -> None:
    """Final attention on the sink per layer and query type: each seed as a dot, the mean as a square
    and a bar from the lowest to the highest seed (a share's spread stays in [0, 1], where mean +- std
    would not)."""
    rows = with_labels(finals, runs, groups)
    rows = rows[(rows["metric"] == "sink_share") & (rows["layer"] >= 0) & (rows["query_type"] != "all")]
    if rows.empty:
        return
    query_types, labels = sorted(rows["query_type"].unique()), sorted(rows["label"].unique())
    colour = colours(labels)
    layers = sorted(rows["layer"].unique())
    fig, axes = panels(len(query_types), 4.6)
    for ax, query_type in zip(axes, query_types):
        present = sorted(rows.loc[rows["query_type"] == query_type, "label"].unique())  # a slot each, centred
        width = 0.8 / len(present)
        for i, label in enumerate(present):
            chosen = rows[(rows["query_type"] == query_type) & (rows["label"] == label)]
            for layer, seeds in chosen.groupby("layer"):
                x = layers.index(layer) - 0.4 + width * (i + 0.5)
                ax.scatter([x] * len(seeds), seeds["value"], color=colour[label], s=10, alpha=0.4, zorder=2)
                mean, low, high = seeds["value"].mean(), seeds["value"].min(), seeds["value"].max()
                ax.errorbar(  # above the seeds' dots, so that a small spread stays visible
                    x,
                    mean,
                    yerr=[[mean - low], [high - mean]] if len(seeds) > 1 else None,
                    fmt="s",
                    color=colour[label],
                    capsize=4,
                    markersize=6,
                    zorder=3,
                )
        ax.set(title=f"{query_type} queries", xlabel="layer", ylabel=SHARE_LABEL, ylim=(-0.05, 1.05))
        every = max(1, len(layers) // 15)  # a real model's 30 layers: every other one named
        ax.set_xticks(range(0, len(layers), every), [str(layer) for layer in layers[::every]])
        ax.set_xlim(-0.5, len(layers) - 0.5)
    n = rows.groupby("label")["run"].nunique()
    handles = [
        plt.Line2D([], [], color=colour[label], marker="s", linestyle="", label=f"{label} (n={n[label]})")
        for label in labels
    ]
    legend_below(fig, handles)
    said = "Final share of attention on the sink: mean over seeds, bar from the lowest to the highest seed"
    said += f" (dots: seeds); {compared(groups)}"
    fig.suptitle(textwrap.fill(said, int(15 * fig.get_figwidth())), fontsize=10)
    save(fig, path)


def training_curves(root: Path, runs: pd.DataFrame, groups: list[str]) -> tuple[list, list]:
    """Per finished trained run: sink_share over training (mean over heads, by step, layer and query type)
    and the held-out loss over all queries, each labelled with the run's setting."""
    curves, losses = [], []
    trained = runs["command"] != "measure" if "command" in runs else True  # a measured checkpoint has no curve
    for _, run in runs[runs["status"].isin(FINISHED) & trained].iterrows():
        label = label_of(run, groups)
        metrics = pd.read_csv(Path(root) / run["run"] / rundir_files.METRICS_CSV)
        metrics = metrics[
            (metrics["metric"] == "sink_share") & (metrics["query_type"] != "all") & (metrics["head"] >= 0)
        ]
        curves.append(
            metrics.groupby(["step", "layer", "query_type"], as_index=False)["value"].mean().assign(label=label)
        )
        loss = pd.read_csv(Path(root) / run["run"] / rundir_files.LOSSES)
        losses.append(loss[loss["split"] == "eval/all"].assign(label=label))
    return curves, losses


def plot_dynamics(root: Path, runs: pd.DataFrame, groups: list[str], path: Path, save: Saver = Saver()) -> None:
    """Attention on the sink over training per query type (a line per setting and layer, the band
    spanning its seeds), and the held-out loss over training."""
    curves, losses = training_curves(root, runs, groups)
    if not curves:
        return
    curves, losses = pd.concat(curves), pd.concat(losses)
    query_types, layers = sorted(curves["query_type"].unique()), sorted(curves["layer"].unique())
    # one setting: a colour per layer; several: a colour per setting, a marker and line style per layer
    by_layer = curves["label"].nunique() == 1
    colour = {layer: f"C{layer % 10}" for layer in layers} if by_layer else colours(curves["label"])
    done = runs[runs["status"].isin(FINISHED)]
    seeds = done.groupby(done.apply(lambda row: label_of(row, groups), axis=1))["run"].nunique()  # a band needs 2
    fig, axes = panels(len(query_types) + 1, 4.4)
    for ax, query_type in zip(axes, query_types):
        for (label, layer), curve in curves[curves["query_type"] == query_type].groupby(["label", "layer"]):
            band = curve.groupby("step")["value"].agg(["mean", "min", "max"])
            style = dict(color=colour[layer if by_layer else label], marker=MARKERS[layer % len(MARKERS)])
            ax.plot(
                band.index,
                band["mean"],
                linestyle=STYLES[0 if by_layer else layer % len(STYLES)],
                markersize=4,
                **style,
            )
            if seeds.get(label, 1) > 1:
                ax.fill_between(band.index, band["min"], band["max"], color=style["color"], alpha=0.15)
        ax.set(title=f"{query_type} queries", xlabel="step", ylabel=SHARE_LABEL, ylim=(-0.05, 1.05))
    for label, curve in losses.groupby("label"):
        band = curve.groupby("step")["loss"].agg(["mean", "min", "max"])
        line_colour = "black" if by_layer else colour[label]
        axes[-1].plot(band.index, band["mean"], color=line_colour)
        if seeds.get(label, 1) > 1:
            axes[-1].fill_between(band.index, band["min"], band["max"], color=line_colour, alpha=0.15)
    axes[-1].set(title="held-out loss (all queries)", xlabel="step", ylabel="loss", yscale="log")
    handles = [] if by_layer else [plt.Line2D([], [], color=colour[label], label=label) for label in colour]
    handles += [
        plt.Line2D(
            [],
            [],
            color=colour[layer] if by_layer else "grey",
            marker=MARKERS[layer % len(MARKERS)],
            linestyle=STYLES[0 if by_layer else layer % len(STYLES)],
            label=f"layer {layer}",
        )
        for layer in layers
    ]
    legend_below(fig, handles)
    band = "band from the lowest to the highest seed" if seeds.max() > 1 else "one seed each"
    said = f"Sink formation over training: mean over seeds, {band}; {compared(groups)}"
    fig.suptitle(textwrap.fill(said, int(15 * fig.get_figwidth())), fontsize=10)
    save(fig, path)


COLUMNS = 3  # panels side by side at most; more wrap into rows (a grid, not a strip)


def panels(n: int, width: float) -> tuple:
    """A figure of `n` panels of `width` inches, COLUMNS to a row, laid out to make room for the
    legend below (legend_below); returns (the figure, its n axes), the spare cells left blank."""
    columns = min(n, COLUMNS)
    rows = -(-n // columns)
    fig, grid = plt.subplots(
        rows, columns, figsize=(width * columns, 3.4 * rows + 0.6), squeeze=False, layout="constrained"
    )
    for ax in grid.flat[n:]:
        ax.set_axis_off()
    return fig, list(grid.flat[:n])


def legend_below(fig, handles: list) -> None:
    """The figure's legend in rows under its panels, with the room it takes (constrained layout)."""
    columns = max(
        1, min(len(handles), 4, round(fig.get_figwidth() / 3))
    )  # about 3 inches an entry: no wider than the panels
    fig.legend(handles=handles, loc="outside lower center", ncol=columns, fontsize=8, frameon=False)


def plot_heads(run: Path, label: str, path: Path, save: Saver = Saver()) -> None:
    """For a model of several heads (an LM): each head's final sink score alpha_s, the share of
    attention on the first token (a layer x head grid), and each layer's massive_ratio over training."""
    metrics = pd.read_csv(run / rundir_files.METRICS_CSV)
    final = metrics[(metrics["step"] == metrics["step"].max()) & (metrics["metric"] == "sink_score")]
    grid = final.pivot_table(index="layer", columns="head", values="value")
    massive = metrics[metrics["metric"] == "massive_ratio"].pivot_table(index="step", columns="layer", values="value")
    fig, (left, right) = plt.subplots(1, 2, figsize=(4 + 0.8 * grid.shape[1] + 5, 0.6 * grid.shape[0] + 3.2))
    image = left.imshow(grid.values, cmap="viridis", vmin=0, vmax=1, aspect="auto")
    for (i, j), value in np.ndenumerate(grid.values):
        left.text(j, i, f"{value:.2f}", ha="center", va="center", color="white" if value < 0.5 else "black", fontsize=8)
    left.set(
        xticks=range(grid.shape[1]),
        yticks=range(grid.shape[0]),
        xlabel="head",
        ylabel="layer",
        title=f"sink score alpha_s at step {metrics['step'].max()}",
    )
    fig.colorbar(image, ax=left, fraction=0.046)
    massive_panel(right, massive)
    fig.suptitle(textwrap.fill(f"{label} ({run.name})", int(13 * fig.get_figwidth())), fontsize=9)
    fig.tight_layout()
    save(fig, path)


def massive_panel(ax, massive: pd.DataFrame) -> None:
    """Each layer's massive_ratio (a table: steps down, layers across) over training, or, for a run of
    one step (a measured checkpoint), per layer at that step; a log axis where it spans a decade or
    more (a spike forming), else a linear one whose ticks can be read."""
    if massive.empty:  # a run without massive_ratio rows draws none
        return
    if len(massive.index) == 1:
        ax.plot(list(massive.columns), massive.iloc[0].to_numpy(), marker="o")
        ax.set(
            xlabel="layer",
            xticks=list(massive.columns),
            title=f"massive_ratio after each block, step {massive.index[0]}",
        )
    else:
        for layer in massive.columns:
            ax.plot(
                massive.index,
                massive[layer],
                marker=MARKERS[layer % len(MARKERS)],
                markersize=3,
                label=f"layer {layer}",
            )
        ax.set(xlabel="step", title="massive_ratio of the residual stream after each block")
        ax.legend(fontsize=8, frameon=False)
    spans = massive.max().max() > 10 * massive.min().min()
    ax.set(ylabel="max |h| / median |h|", yscale="log" if spans else "linear")
