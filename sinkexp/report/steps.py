"""The report's figure of `sinkexp measure` runs of several checkpoints: the sink rate, the first
token's attention and massive_ratio against each checkpoint's training step (config.yaml's `step`),
e.g. Pythia's checkpoints (revision=step1000, ...). report/runs.py labels the rows; pandas and
matplotlib only."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from sinkexp.report.save import Saver
from sinkexp.rundir.reading import FINISHED

# (metric, query type, over: the model's row, or the mean or max of the layers' rows, title)
PANELS = (
    ("sink_rate@0.3", "all", "model", "sink rate (alpha_s > 0.3), all heads"),
    ("sink_attn", "text", "mean", "attention on the first token, mean over layers"),
    ("massive_ratio", "all", "max", "massive_ratio, largest over layers"),
)


def measured_checkpoints(runs: pd.DataFrame, groups: list[str]) -> tuple[pd.DataFrame, list[str]]:
    """(the finished measure runs of a known step, none unless there are two steps or more; the
    settings that make a line: the varying ones that are not one step each, since a revision or a
    checkpoint's own folder is a point on a line, not a line)."""
    if "step" not in runs or "command" not in runs:
        return runs[:0], []
    measured = runs[(runs["command"] == "measure") & (runs["status"].isin(FINISHED)) & (runs["step"] >= 0)]
    if measured["step"].nunique() < 2:
        return runs[:0], []
    lines = [g for g in groups if g != "step" and measured.groupby(measured[g].astype(str))["step"].nunique().max() > 1]
    return measured, lines


def plot_checkpoints(rows: pd.DataFrame, colour: dict, path: Path, save: Saver = Saver()) -> None:
    """rows: final values (layer, query_type, metric, value) with each run's `label` and `step`."""
    fig, axes = plt.subplots(1, len(PANELS), figsize=(4.4 * len(PANELS) + 2.6, 3.6))
    for ax, (metric, query_type, over, title) in zip(axes, PANELS):
        chosen = rows[(rows["metric"] == metric) & (rows["query_type"] == query_type)]
        chosen = chosen[(chosen["layer"] < 0) == (over == "model")]
        per_run = chosen.groupby(["label", "step"])["value"].agg("max" if over == "max" else "mean")
        for label, curve in per_run.groupby(level="label"):
            ax.plot(curve.index.get_level_values("step"), curve.to_numpy(), marker="o", color=colour[label])
        ax.set(title=title, xlabel="checkpoint's training step", xscale="symlog")
    handles = [plt.Line2D([], [], color=colour[label], marker="o", label=label) for label in colour]
    fig.legend(handles=handles, loc="center right", fontsize=8, frameon=False)
    fig.suptitle("Measured checkpoints (sinkexp measure) against their training step", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1 - 2.6 / (4.4 * len(PANELS) + 2.6), 0.93))
    save(fig, path)
