"""`sinkexp report DIR`: collect every run below DIR into one table and draw the figures.

Reads run directories only (config.yaml, metrics.csv, losses.csv, attention.npz, DONE/FAILED),
never the model: the run directory is the interface between training and reporting. Settings
come from each run's config.yaml, not from folder names. Runs are grouped by every setting that
varies across them except the seed; each group's final values become mean, std and n over seeds.

Writes into DIR/report/: summary.csv (and summary.parquet when pyarrow is installed), runs.csv
(one row per run with its status), sink_attn_by_layer.png, dynamics.png, attention_<run>.png.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from omegaconf import OmegaConf

from sinkexp import rundir as R
from sinkexp.evaluate.tables import final_values
from sinkexp.rundir import UNHASHED_KEYS

IGNORED_SETTINGS = {"seed", *UNHASHED_KEYS}   # the seed is what groups average over; the rest is bookkeeping


def find_runs(root: Path) -> list[Path]:
    """Every folder below (or equal to) root that holds a run's config.yaml."""
    return sorted(p.parent for p in Path(root).rglob(R.CONFIG) if ".hydra" not in p.parts)


def settings(run: Path) -> dict:
    """The run's config as flat dotted keys (e.g. model.n_layers)."""
    flat = pd.json_normalize(OmegaConf.to_container(OmegaConf.load(run / R.CONFIG)), sep=".")
    return {key: (str(value) if isinstance(value, list) else value) for key, value in flat.iloc[0].items()}


def read_final(run: Path, steps: int) -> pd.DataFrame:
    """A finished run's final values, after checking that its files agree: metrics.csv, losses.csv
    and summary.json all end at train.steps. Raises ValueError saying what is wrong."""
    try:
        metrics, losses = pd.read_csv(run / R.METRICS), pd.read_csv(run / R.LOSSES)
        summary_step = R.read_json(run / R.SUMMARY)["step"]
    except (OSError, ValueError, KeyError, pd.errors.ParserError) as err:
        raise ValueError(f"{err.__class__.__name__}: {str(err).splitlines()[0] if str(err) else ''}") from None
    ends = {R.METRICS: metrics["step"].max() if len(metrics) else None,
            R.LOSSES: losses["step"].max() if len(losses) else None, R.SUMMARY: summary_step}
    if any(end != steps for end in ends.values()):
        raise ValueError("tables end at " + ", ".join(f"{name} step {end}" for name, end in ends.items())
                         + f", not train.steps={steps}")
    return final_values(metrics, losses)


def collect(root: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(runs: one row per run with settings, status and, for a damaged run, the reason; finals: long
    rows of final values of finished runs). A run whose files cannot be read or disagree is
    `damaged`; the others are reported as usual."""
    runs, finals = [], []
    for run in find_runs(root):
        row = {"run": str(run.relative_to(root)) if run != Path(root) else ".", "status": R.status(run), "reason": ""}
        try:
            row.update(settings(run))
        except Exception as err:   # OmegaConf raises several types for a file that is not a mapping
            row.update(status="damaged", reason=f"{R.CONFIG} cannot be read ({err.__class__.__name__})")
        runs.append(row)
        if row["status"] != "done":
            continue
        try:
            final = read_final(run, int(row.get("train.steps", -1)))
        except ValueError as err:
            row.update(status="damaged", reason=str(err))
            continue
        finals.append(final.assign(run=row["run"]))
    runs = pd.DataFrame(runs)
    finals = pd.concat(finals, ignore_index=True) if finals else pd.DataFrame(columns=["run", "layer", "query_type", "metric", "value"])
    return runs, finals


def varying(runs: pd.DataFrame) -> list[str]:
    """Setting columns whose value differs between runs (the seed and bookkeeping excluded)."""
    columns = [c for c in runs.columns if c not in {"run", "status", "reason"} and c not in IGNORED_SETTINGS]
    chosen: list[str] = []
    for column in columns:
        values = runs[column].astype(str)
        if values.nunique() < 2:
            continue
        # A setting that only restates an earlier one (attn.normaliser next to attn.name) adds no group.
        if any(values.groupby(runs[c].astype(str)).nunique().max() == 1
               and runs[c].astype(str).groupby(values).nunique().max() == 1 for c in chosen):
            continue
        chosen.append(column)
    return chosen


def aggregate(runs: pd.DataFrame, finals: pd.DataFrame, groups: list[str]) -> pd.DataFrame:
    """mean, std and n over seeds of each final value, per group (the varying settings), layer, query type, metric."""
    keyed = finals.merge(runs[["run"] + groups], on="run")
    by = groups + ["layer", "query_type", "metric"]
    table = keyed.groupby(by, dropna=False)["value"].agg(mean="mean", std="std", n="count").reset_index()
    return table


def label_of(row: pd.Series, groups: list[str]) -> str:
    return ", ".join(f"{g.split('.')[-1]}={row[g]}" for g in groups) or "all runs"


def plot_sink_by_layer(summary: pd.DataFrame, groups: list[str], path: Path) -> None:
    import matplotlib.pyplot as plt

    rows = summary[(summary["metric"] == "sink_attn") & (summary["layer"] >= 0) & (summary["query_type"] != "all")]
    query_types = sorted(rows["query_type"].unique())
    fig, axes = plt.subplots(1, max(len(query_types), 1), figsize=(5 * max(len(query_types), 1), 3.6), squeeze=False)
    for ax, query_type in zip(axes[0], query_types):
        chosen = rows[rows["query_type"] == query_type]
        for key, group in (chosen.groupby(groups, dropna=False) if groups else [((), chosen)]):
            group = group.sort_values("layer")
            ax.errorbar(group["layer"], group["mean"], yerr=group["std"].fillna(0), marker="o", capsize=3,
                        label=label_of(group.iloc[0], groups))
        ax.set(title=f"{query_type} queries", xlabel="layer", ylabel="attention on the sink", ylim=(-0.05, 1.05))
        ax.set_xticks(sorted(chosen["layer"].unique()))
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_dynamics(root: Path, runs: pd.DataFrame, groups: list[str], path: Path) -> None:
    """Attention on the sink over training, one line per group and layer (mean over seeds and heads)."""
    import matplotlib.pyplot as plt

    curves = []
    for _, run in runs[runs["status"] == "done"].iterrows():
        metrics = pd.read_csv(Path(root) / run["run"] / R.METRICS)
        metrics = metrics[(metrics["metric"] == "sink_attn") & (metrics["query_type"] == "all") & (metrics["head"] >= 0)]
        curve = metrics.groupby(["step", "layer"], as_index=False)["value"].mean()
        curves.append(curve.assign(label=label_of(run, groups)))
    if not curves:
        return
    curves = pd.concat(curves).groupby(["label", "layer", "step"], as_index=False)["value"].mean()
    fig, ax = plt.subplots(figsize=(6, 3.8))
    for (label, layer), curve in curves.groupby(["label", "layer"]):
        ax.plot(curve["step"], curve["value"], label=f"{label}, layer {layer}")
    ax.set(xlabel="step", ylabel="attention on the sink (all queries)", ylim=(-0.05, 1.05), title="sink dynamics")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_heatmaps(run: Path, path: Path) -> None:
    """A layer x head grid of the run's mean attention maps (attention.npz)."""
    import matplotlib.pyplot as plt

    maps = np.load(run / R.ATTENTION)
    layers = sorted(maps.files, key=lambda name: int(name.removeprefix("layer")))
    n_heads = maps[layers[0]].shape[0]
    fig, axes = plt.subplots(len(layers), n_heads, figsize=(2.6 * n_heads, 2.4 * len(layers)), squeeze=False)
    for i, name in enumerate(layers):
        for h in range(n_heads):
            axes[i][h].imshow(maps[name][h], cmap="viridis", vmin=0)
            axes[i][h].set(title=f"layer {i}, head {h}", xlabel="key", ylabel="query")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def report(root: Path, out: Path | None = None) -> Path:
    root = Path(root)
    out = Path(out) if out else root / "report"
    runs, finals = collect(root)
    if runs.empty:
        raise FileNotFoundError(f"no run directories (with {R.CONFIG}) below {root}")
    out.mkdir(parents=True, exist_ok=True)
    groups = varying(runs[runs["status"] == "done"])   # the runs the summary aggregates
    summary = aggregate(runs, finals, groups)
    R.write_csv(out / "runs.csv", runs)
    R.write_csv(out / "summary.csv", summary)
    try:
        summary.to_parquet(out / "summary.parquet")
    except ImportError:
        pass
    plot_sink_by_layer(summary, groups, out / "sink_attn_by_layer.png")
    plot_dynamics(root, runs, groups, out / "dynamics.png")
    first = runs[runs["status"] == "done"]["run"]
    if not first.empty and (root / first.iloc[0] / R.ATTENTION).exists():
        plot_heatmaps(root / first.iloc[0], out / f"attention_{first.iloc[0].replace('/', '_').strip('._') or 'run'}.png")

    counts = runs["status"].value_counts().to_dict()
    print(f"{len(runs)} runs below {root}: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    for _, run in runs[runs["status"] != "done"].iterrows():
        print(f"  {run['status']:>10}: {run['run']}" + (f" ({run['reason']})" if run["reason"] else ""))
    headline = summary[(summary["metric"] == "sink_attn") & (summary["layer"] >= 0) & (summary["query_type"] != "all")]
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(headline.drop(columns="metric").round(4).to_string(index=False))
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
