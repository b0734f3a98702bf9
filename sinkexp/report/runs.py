"""`sinkexp report DIR`: collect every run below DIR into one table and draw the figures.

Reads run directories only (config.yaml, metrics.csv, losses.csv, attention.npz, DONE/FAILED),
never the model: the run directory is the interface between training and reporting. Settings
come from each run's config.yaml, not from folder names. Runs are grouped by every setting that
varies across them except the seed; each group's final values become mean, std and n over seeds.

Writes into DIR/report/: summary.csv (mean, std, n over seeds; summary.parquet too when pyarrow is
installed), runs.csv (one row per run with its status, and the reason for a damaged one),
finals.csv (every run's final values), sink_attn_by_layer.png and dynamics.png (the share of
attention on the sink: row-normalised weights, so unnormalised variants' raw weights above 1 are
never cut off the axis; the raw weights are in summary.csv as sink_attn), and
attention_<setting>.png (one representative seed per setting), and for models of several heads
heads_<setting>.png (each head's sink score as a layer x head grid, each layer's massive_ratio over
training), and for `sinkexp measure` runs of several checkpoints checkpoints.png (the sink rate, the
first token's attention and massive_ratio against each checkpoint's training step).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from sinkexp.config.schema import UNHASHED_KEYS
from sinkexp.evaluate.tables import FINAL_COLUMNS
from sinkexp.report.steps import measured_checkpoints, plot_checkpoints
from sinkexp.rundir import files as rundir_files
from sinkexp.rundir.files import collect

SHARE_LABEL = "share of attention on the sink"  # sink_share: the raw weight for softmax, row-normalised otherwise
IGNORED_SETTINGS = {"seed", *UNHASHED_KEYS}  # the seed is what groups average over; the rest is bookkeeping


def varying(runs: pd.DataFrame) -> list[str]:
    """Setting columns whose value differs between runs (the seed and bookkeeping excluded)."""
    columns = [c for c in runs.columns if c not in {"run", "status", "reason"} and c not in IGNORED_SETTINGS]
    chosen: list[str] = []
    for column in columns:
        values = runs[column].astype(str)  # as text, so that None, NaN and mixed types compare alike
        if values.nunique() < 2:
            continue
        # A setting that only restates an earlier one (attn.normaliser next to attn.name) adds no group.
        if any(
            values.groupby(runs[c].astype(str)).nunique().max() == 1
            and runs[c].astype(str).groupby(values).nunique().max() == 1
            for c in chosen
        ):
            continue
        chosen.append(column)
    return chosen


def aggregate(runs: pd.DataFrame, finals: pd.DataFrame, groups: list[str]) -> pd.DataFrame:
    """mean, std and n over seeds of each final value, per group (the varying settings), layer, query type, metric."""
    keyed = finals.merge(runs[["run"] + groups], on="run")
    by = groups + ["layer", "query_type", "metric"]
    # dropna=False: a setting a run lacks (written before the key existed) is a group of its own, not dropped
    return keyed.groupby(by, dropna=False)["value"].agg(mean="mean", std="std", n="count").reset_index()


def setting_name(key: str) -> str:
    """attn.name -> attn, task.name -> task; every other key keeps its full dotted name."""
    return key.removesuffix(".name")


def label_of(row: pd.Series, groups: list[str]) -> str:
    return ", ".join(f"{setting_name(g)}={row[g]}" for g in groups) or "all runs"


def with_labels(table: pd.DataFrame, runs: pd.DataFrame, groups: list[str]) -> pd.DataFrame:
    """`table` (with a run column) plus each run's group label."""
    labels = runs.set_index("run").apply(lambda row: label_of(row, groups), axis=1).rename("label")
    return table.join(labels, on="run")


def colours(labels) -> dict[str, str]:
    """One colour per setting, the same in every panel and figure."""
    return {label: f"C{i % 10}" for i, label in enumerate(sorted(set(labels)))}


def compared(groups: list[str]) -> str:
    return "compared: " + ", ".join(setting_name(g) for g in groups) if groups else "one setting"


def plot_sink_by_layer(finals: pd.DataFrame, runs: pd.DataFrame, groups: list[str], path: Path) -> None:
    """Final attention on the sink per layer and query type: each seed as a dot, mean +- std as a bar."""
    import matplotlib.pyplot as plt

    rows = with_labels(finals, runs, groups)
    rows = rows[(rows["metric"] == "sink_share") & (rows["layer"] >= 0) & (rows["query_type"] != "all")]
    if rows.empty:
        return
    query_types, labels = sorted(rows["query_type"].unique()), sorted(rows["label"].unique())
    colour = colours(labels)
    layers = sorted(rows["layer"].unique())
    fig, axes = plt.subplots(1, len(query_types), figsize=(4.6 * len(query_types) + 2.6, 3.8), squeeze=False)
    width = 0.8 / len(labels)
    for ax, query_type in zip(axes[0], query_types):
        for i, label in enumerate(labels):
            chosen = rows[(rows["query_type"] == query_type) & (rows["label"] == label)]
            for layer, seeds in chosen.groupby("layer"):
                x = layers.index(layer) - 0.4 + width * (i + 0.5)
                ax.errorbar(
                    x,
                    seeds["value"].mean(),
                    yerr=seeds["value"].std() if len(seeds) > 1 else 0,
                    fmt="s",
                    color=colour[label],
                    capsize=4,
                    markersize=7,
                )
                ax.scatter([x] * len(seeds), seeds["value"], color=colour[label], s=12, alpha=0.5)
        ax.set(title=f"{query_type} queries", xlabel="layer", ylabel=SHARE_LABEL, ylim=(-0.05, 1.05))
        ax.set_xticks(range(len(layers)), [str(layer) for layer in layers])
        ax.set_xlim(-0.5, len(layers) - 0.5)
    n = rows.groupby("label")["run"].nunique()
    handles = [
        plt.Line2D([], [], color=colour[label], marker="s", linestyle="", label=f"{label} (n={n[label]})")
        for label in labels
    ]
    fig.legend(handles=handles, loc="center right", fontsize=8, frameon=False)
    fig.suptitle(
        f"Final share of attention on the sink, mean ± std over seeds (dots: seeds); {compared(groups)}", fontsize=10
    )
    fig.tight_layout(rect=(0, 0, 1 - 2.6 / (4.6 * len(query_types) + 2.6), 0.95))
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_dynamics(root: Path, runs: pd.DataFrame, groups: list[str], path: Path) -> None:
    """Attention on the sink over training per query type (a line per setting and layer, the band
    spanning its seeds), and the held-out loss over training."""
    import matplotlib.pyplot as plt

    curves, losses = [], []
    for _, run in runs[runs["status"] == "done"].iterrows():
        label = label_of(run, groups)
        metrics = pd.read_csv(Path(root) / run["run"] / rundir_files.METRICS)
        metrics = metrics[
            (metrics["metric"] == "sink_share") & (metrics["query_type"] != "all") & (metrics["head"] >= 0)
        ]
        curves.append(
            metrics.groupby(["step", "layer", "query_type"], as_index=False)["value"].mean().assign(label=label)
        )
        loss = pd.read_csv(Path(root) / run["run"] / rundir_files.LOSSES)
        losses.append(loss[loss["split"] == "eval/all"].assign(label=label))
    if not curves:
        return
    curves, losses = pd.concat(curves), pd.concat(losses)
    query_types = sorted(curves["query_type"].unique())
    colour = colours(curves["label"])
    styles = ["-", "--", ":", "-."]
    fig, axes = plt.subplots(1, len(query_types) + 1, figsize=(4.4 * (len(query_types) + 1) + 2.6, 3.8), squeeze=False)
    for ax, query_type in zip(axes[0], query_types):
        for (label, layer), curve in curves[curves["query_type"] == query_type].groupby(["label", "layer"]):
            band = curve.groupby("step")["value"].agg(["mean", "min", "max"])
            ax.plot(band.index, band["mean"], color=colour[label], linestyle=styles[layer % len(styles)])
            ax.fill_between(band.index, band["min"], band["max"], color=colour[label], alpha=0.15)
        ax.set(title=f"{query_type} queries", xlabel="step", ylabel=SHARE_LABEL, ylim=(-0.05, 1.05))
    for label, curve in losses.groupby("label"):
        band = curve.groupby("step")["loss"].agg(["mean", "min", "max"])
        axes[0][-1].plot(band.index, band["mean"], color=colour[label])
        axes[0][-1].fill_between(band.index, band["min"], band["max"], color=colour[label], alpha=0.15)
    axes[0][-1].set(title="held-out loss (all queries)", xlabel="step", ylabel="loss", yscale="log")
    handles = [plt.Line2D([], [], color=colour[label], label=label) for label in colour]
    handles += [
        plt.Line2D([], [], color="grey", linestyle=styles[layer % len(styles)], label=f"layer {layer}")
        for layer in sorted(curves["layer"].unique())
    ]
    fig.legend(handles=handles, loc="center right", fontsize=8, frameon=False)
    fig.suptitle(
        f"Sink formation over training: mean over seeds, band from the lowest to the highest seed; {compared(groups)}",
        fontsize=10,
    )
    total = 4.4 * (len(query_types) + 1) + 2.6
    fig.tight_layout(rect=(0, 0, 1 - 2.6 / total, 0.95))
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_heatmaps(run: Path, label: str, path: Path) -> None:
    """A layer x head grid of one run's mean attention maps (attention.npz), the sink column marked."""
    import matplotlib.pyplot as plt

    maps = np.load(run / rundir_files.ATTENTION)
    layers = sorted((name for name in maps.files if name.startswith("layer")), key=lambda name: int(name[5:]))
    sink = int(maps["sink"]) if "sink" in maps.files else -1
    n_heads = maps[layers[0]].shape[0]
    fig, axes = plt.subplots(len(layers), n_heads, figsize=(3.6 * n_heads, 3.2 * len(layers)), squeeze=False)
    for i, name in enumerate(layers):
        for h in range(n_heads):
            top = max(1.0, float(maps[name][h].max()))  # raw weights of unnormalised variants may pass 1
            image = axes[i][h].imshow(maps[name][h], cmap="viridis", vmin=0, vmax=top)
            if sink >= 0:
                axes[i][h].axvline(sink, color="red", linestyle="--", linewidth=1)
            axes[i][h].set(
                title=f"layer {i}, head {h}",
                xlabel="key" + (f" (sink: {sink}, dashed)" if sink >= 0 else ""),
                ylabel="query",
            )
            fig.colorbar(image, ax=axes[i][h], fraction=0.046)
    fig.suptitle(f"{label}\nmean attention over the held-out batch ({run.name})", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_heads(run: Path, label: str, path: Path) -> None:
    """For a model of several heads (an LM): each head's final sink score alpha_s, the share of
    attention on the first token (a layer x head grid), and each layer's massive_ratio over training."""
    import matplotlib.pyplot as plt

    metrics = pd.read_csv(run / rundir_files.METRICS)
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
    for layer in massive.columns:
        right.plot(massive.index, massive[layer], label=f"layer {layer}")
    right.set(
        xlabel="step",
        ylabel="max |h| / median |h|",
        yscale="log",
        title="massive_ratio of the residual stream after each block",
    )
    right.legend(fontsize=8, frameon=False)
    fig.suptitle(f"{label} ({run.name})", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(root: Path, out: Path | None = None) -> tuple[Path, pd.DataFrame, pd.DataFrame]:
    """Write DIR/report/ (or `out`) for every run below `root`, printing nothing; returns (the
    folder, the runs table, the summary). FileNotFoundError when there is no run below root."""
    root = Path(root)
    out = Path(out) if out else root / "report"
    runs, finals = collect(root)
    if runs.empty:
        raise FileNotFoundError(f"no run directories (with {rundir_files.CONFIG}) below {root}")
    out.mkdir(parents=True, exist_ok=True)
    groups = varying(runs[runs["status"] == "done"])  # the runs the summary aggregates
    summary = aggregate(runs, finals, groups)
    rundir_files.write_csv(out / "runs.csv", runs)
    rundir_files.write_csv(out / "summary.csv", summary)
    try:
        summary.to_parquet(out / "summary.parquet")
    except ImportError:
        pass
    rundir_files.write_csv(out / "finals.csv", with_labels(finals, runs, groups)[["run", "label", *FINAL_COLUMNS]])
    plot_sink_by_layer(finals, runs, groups, out / "sink_attn_by_layer.png")
    plot_dynamics(root, runs, groups, out / "dynamics.png")
    done = runs[runs["status"] == "done"]
    for label, members in done.groupby(done.apply(lambda row: label_of(row, groups), axis=1)):
        # one seed's maps per setting, not one figure per run; the first by folder name, so that a
        # rerun draws the same one
        first = members["run"].iloc[0]
        name = "".join(c if c.isalnum() or c in "=-." else "_" for c in label.replace(", ", "_"))
        if (root / first / rundir_files.ATTENTION).exists():
            plot_heatmaps(root / first, label, out / f"attention_{name}.png")
        if heads(members.iloc[0]) > 1:
            plot_heads(root / first, label, out / f"heads_{name}.png")
    measured, lines = measured_checkpoints(runs, groups)
    if len(measured):
        rows = with_labels(finals, measured, lines).merge(measured[["run", "step"]], on="run")
        plot_checkpoints(rows, colours(rows["label"]), out / "checkpoints.png")
    return out, runs, summary


def heads(run: pd.Series) -> int:
    """A run's heads over all layers: its model's (trained) or the measured model's (sinkexp measure)."""
    prefix = "measured" if run.get("command") == "measure" else "model"
    return int(run[f"{prefix}.n_layers"]) * int(run[f"{prefix}.n_heads"])


def report(root: Path, out: Path | None = None) -> Path:
    """write_report, then print what it found: run counts, the runs that did not finish, and the
    final sink attention per setting and layer."""
    out, runs, summary = write_report(root, out)
    counts = runs["status"].value_counts().to_dict()
    print(f"{len(runs)} runs below {root}: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    for _, run in runs[runs["status"] != "done"].iterrows():
        print(f"  {run['status']:>10}: {run['run']}" + (f" ({run['reason']})" if run["reason"] else ""))
    headline = summary[(summary["metric"] == "sink_attn") & (summary["layer"] >= 0) & (summary["query_type"] != "all")]
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(headline.round(4).to_string(index=False))
    print(f"report: {out}")
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="sinkexp report", description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path, help="a sweep directory, or a single run directory")
    parser.add_argument("--out", type=Path, default=None, help="where to write (default DIR/report)")
    args = parser.parse_args(argv)
    if not args.dir.is_dir():
        print(f"sinkexp: error: {args.dir} is not a directory", file=sys.stderr)
        return 2
    try:
        report(args.dir, args.out)
    except FileNotFoundError as err:
        print(f"sinkexp: error: {err}", file=sys.stderr)
        return 2
    return 0
