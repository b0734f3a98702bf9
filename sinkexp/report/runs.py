"""`sinkexp report DIR`: collect every run below DIR into one table and draw the figures.

Reads run directories only (config.yaml, metrics.csv, losses.csv, attention.npz, DONE/FAILED),
never the model: the run directory is the interface between training and reporting. Settings
come from each run's config.yaml, not from folder names. Runs are grouped by every setting that
varies across them except the seed, each named however they co-vary, unless a choice named before
it brings it (BRINGS); each group's final values become mean, std and n over seeds.

Writes into DIR/report/: summary.csv (mean, std, n over seeds; summary.parquet too when pyarrow is
installed), runs.csv (one row per run with its status and reason: rundir/reading.py's STATUSES, the
words of `--list` and the plan too),
finals.csv (every run's final values), sink_attn_by_layer.png and dynamics.png (the share of
attention on the sink: row-normalised weights, so unnormalised variants' raw weights above 1 are
never cut off the axis; the raw weights are in summary.csv as sink_attn), and
attention_<setting>.png (one representative seed per setting), and for models of several heads
heads_<setting>.png (each head's sink score as a layer x head grid, each layer's massive_ratio over
training), and for `sinkexp measure` runs of several checkpoints checkpoints.png (the sink rate, the
first token's attention and massive_ratio against each checkpoint's training step). A measured run
(one per setting) gets the figures of a real model instead of the training ones (model_figures.py).
Each figure goes through one Saver (report/save.py): PNG, or the formats and dpi of --format and --dpi.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd

from sinkexp.commands import COMMANDS
from sinkexp.config.arguments import read
from sinkexp.config.helptext import help_text
from sinkexp.config.schema import UNHASHED_KEYS, group_options, preset_keys, task_of
from sinkexp.errors import ConfigError, refuse
from sinkexp.evaluate.tables import FINAL_COLUMNS
from sinkexp.hf import quantization
from sinkexp.report.figures import (
    ABSENT,
    colours,
    label_of,
    plot_dynamics,
    plot_heads,
    plot_sink_by_layer,
    shown,
    with_labels,
)
from sinkexp.report.listing import listing
from sinkexp.report.maps import plot_heatmaps
from sinkexp.report.model_figures import BadHeads, draw_measured, parse_heads
from sinkexp.report.save import Saver, saver
from sinkexp.report.steps import measured_checkpoints, plot_checkpoints
from sinkexp.rundir import files as rundir_files
from sinkexp.rundir.faults import RunFileError
from sinkexp.rundir.reading import FINISHED, collect

STATISTICS = ("mean", "std", "n")  # summary.csv's columns beside the groups (n: the count of seeds)
IGNORED_SETTINGS = {"seed", *UNHASHED_KEYS}  # the seed is what groups average over; the rest is bookkeeping


# A choice that brings other settings with it: whether a key is one of them, given the values the runs
# choose. A key that varies only with such a choice restates it (attn.normaliser beside attn; model.mlp
# beside task, when configs/task/backcopy.yaml sets it); any other varying key is named, however it
# co-varies (model.n_heads beside attn). `command` (train or measure) brings every setting of its kind.
BRINGS = {
    "command": lambda key, values: True,
    "task.name": lambda key, values: key.startswith("task.") or set_by_preset("task", values, key),
    "attn.name": lambda key, values: key.startswith("attn.") or set_by_preset("attn", values, key),
    "model": lambda key, values: key.startswith("measured."),  # a measured checkpoint's own facts (sinkexp measure)
}


def set_by_preset(group: str, names, key: str) -> bool:
    """Whether a preset of `group` that one of `names` (task.name or attn.name values) chooses sets `key`."""
    options = [o for o in group_options()[group] if (task_of(o) if group == "task" else o) in set(names)]
    return any(key in preset_keys(group, option) for option in options)


def varying(runs: pd.DataFrame) -> list[str]:
    """Setting columns whose value differs between runs (the seed and bookkeeping excluded), but
    for one that only restates a choice named before it (BRINGS)."""
    columns = [c for c in runs.columns if c not in {"run", "status", "reason"} and c not in IGNORED_SETTINGS]
    chosen: list[str] = []
    for column in columns:
        values = runs[column].map(str)  # text, None and NaN alike ("nan"; astype(str) keeps NaN)
        if values.nunique() < 2:
            continue
        if any(
            c in BRINGS and BRINGS[c](column, runs[c].dropna().unique()) and determined(values, runs[c].map(str))
            for c in chosen
        ):
            continue
        chosen.append(column)
    return chosen


def determined(a: pd.Series, b: pd.Series) -> bool:
    """Whether each value of `b` goes with one value of `a` (two tasks may share a seq_len)."""
    return a.groupby(b).nunique().max() == 1


def aggregate(runs: pd.DataFrame, finals: pd.DataFrame, groups: list[str]) -> pd.DataFrame:
    """mean, std and n over seeds of each final value, per group (the varying settings), layer, query type, metric."""
    # a setting named as a statistic (sinkexp measure's `n`) is `<name>_setting` here
    named = {group: f"{group}_setting" if group in STATISTICS else group for group in groups}
    settings = runs[["run"] + groups].rename(columns=named)
    for column in named.values():  # a setting a run lacks is a group of its own, shown as "-", not NaN
        values = settings[column].map(shown)
        settings[column] = values.map(str) if (values == ABSENT).any() else values  # text beside "-": sortable
    keyed = finals.merge(settings, on="run")
    by = [named[group] for group in groups] + ["layer", "query_type", "metric"]
    return keyed.groupby(by)["value"].agg(mean="mean", std="std", n="count").reset_index()


def write_report(
    root: Path, out: Path | None = None, save: Saver = Saver(), head_maps=None
) -> tuple[Path, pd.DataFrame, pd.DataFrame]:
    """Write DIR/report/ (or `out`) for every run below `root`, printing nothing, each figure through
    `save` (its formats and dpi); returns (the folder, the runs table, the summary).
    FileNotFoundError when there is no run below root. `head_maps`: the (layer, head) pairs whose
    maps a measured run's figures draw (model_figures.py)."""
    root = Path(root)
    out = Path(out) if out else root / "report"
    runs, finals = collect(root)
    if runs.empty:
        raise FileNotFoundError(no_runs(root))
    out.mkdir(parents=True, exist_ok=True)
    groups = varying(runs[runs["status"].isin(FINISHED)])  # the runs the summary aggregates
    summary = aggregate(runs, finals, groups)
    rundir_files.write_csv(out / "runs.csv", runs)
    rundir_files.write_csv(out / "summary.csv", summary)
    try:
        summary.to_parquet(out / "summary.parquet")
    except ImportError:
        pass
    rundir_files.write_csv(out / "finals.csv", with_labels(finals, runs, groups)[["run", "label", *FINAL_COLUMNS]])
    plot_sink_by_layer(finals, runs, groups, out / "sink_attn_by_layer.png", save)
    is_measured = runs["command"].eq("measure") if "command" in runs else pd.Series(False, index=runs.index)
    plot_dynamics(root, runs[~is_measured], groups, out / "dynamics.png", save)  # a measured run has no training
    done = runs[runs["status"].isin(FINISHED)]
    for label, members in done.groupby(done.apply(lambda row: label_of(row, groups), axis=1)):
        # one seed's maps per setting, not one figure per run; the first by folder name, so that a
        # rerun draws the same one
        first = members["run"].iloc[0]
        name = file_name(label)
        if is_measured[members.index[0]]:
            draw_measured(root / first, label, name, out, head_maps, save)
            continue
        if (root / first / rundir_files.ATTENTION).exists():
            plot_heatmaps(root / first, label, out / f"attention_{name}.png", save)
        if heads(members.iloc[0]) > 1:
            plot_heads(root / first, label, out / f"heads_{name}.png", save)
    measured, lines = measured_checkpoints(runs, groups)
    if len(measured):
        rows = with_labels(finals, measured, lines).merge(measured[["run", "step"]], on="run")
        plot_checkpoints(rows, colours(rows["label"]), out / "checkpoints.png", save)
    return out, runs, summary


def file_name(label: str) -> str:
    """A setting's label as a file name's part (attn=relu_model.n_heads=2); a long one cut, with eight
    hex digits of the whole label, so that it stays one name under any file system's 255 bytes."""
    name = "".join(c if c.isalnum() or c in "=-." else "_" for c in label.replace(", ", "_"))
    return name if len(name) <= 150 else f"{name[:140]}_{hashlib.sha256(label.encode()).hexdigest()[:8]}"


def heads(run: pd.Series) -> int:
    """A run's heads over all layers: its model's (trained) or the measured model's (sinkexp measure)."""
    prefix = "measured" if run.get("command") == "measure" else "model"
    return int(run[f"{prefix}.n_layers"]) * int(run[f"{prefix}.n_heads"])


def no_runs(root: Path) -> str:
    """The one line for a folder without runs, `report` and `--list` alike (exit status 2)."""
    return f"no run directories (with {rundir_files.CONFIG}) below {root}"


class NothingFinished(RuntimeError):
    """No run below the folder finished (done or unverified): the report has no summary."""


def report(root: Path, out: Path | None = None, save: Saver = Saver(), head_maps=None) -> Path:
    """write_report, then print what it found: run counts, the runs that did not finish, and the
    final sink attention per setting and layer."""
    out, runs, summary = write_report(root, out, save, head_maps)
    counts = runs["status"].value_counts().to_dict()
    print(f"{len(runs)} runs below {root}: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    for _, run in runs[runs["status"] != "done"].iterrows():
        print(f"  {run['status']:>11}: {run['run']}" + (f" ({run['reason']})" if run["reason"] else ""))
    if not runs["status"].isin(FINISHED).any():
        raise NothingFinished(f"no run below {root} has finished: nothing to summarise ({out / 'runs.csv'})")
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(headline(summary).round(4).to_string(index=False, na_rep=ABSENT))  # one seed: no std
    for model, kind in quantized(runs).items():  # the weights of a GGUF checkpoint, as measure said them
        print(f"{model}: {quantization.bits(kind)}-bit GGUF weights ({kind}), dequantized to float32")
    print(f"report: {out}")
    return out


def quantized(runs: pd.DataFrame) -> dict[str, str]:
    """{model: its GGUF file type} of the measured runs whose weights came from a GGUF (config.yaml's
    measured.gguf, hf/quantization.py), so that the report says they were dequantized."""
    if quantization.FILE_TYPE not in runs:
        return {}
    chosen = runs[runs[quantization.FILE_TYPE].notna()]
    return dict(zip(chosen["model"].map(str), chosen[quantization.FILE_TYPE].map(str)))


def headline(summary: pd.DataFrame) -> pd.DataFrame:
    """What report prints: the share of attention on the sink (sink_share, as the figures draw it) per
    setting, layer and query type, with the raw weight (sink_attn) beside it where the two differ."""
    chosen = summary[(summary["layer"] >= 0) & (summary["query_type"] != "all")]
    keys = [c for c in summary.columns if c not in ("metric", *STATISTICS)]
    share = chosen[chosen["metric"] == "sink_share"].drop(columns="metric")
    raw = chosen[chosen["metric"] == "sink_attn"][[*keys, "mean"]].rename(columns={"mean": "sink_attn (raw)"})
    table = share.rename(columns={"mean": "sink_share"}).merge(raw, on=keys, how="left")
    if ((table["sink_attn (raw)"] - table["sink_share"]).abs() <= 1e-6).all():  # rows that sum to 1: the same
        table = table.drop(columns="sink_attn (raw)")
    return table


def main(argv: list[str]) -> int:
    """`sinkexp report`, as COMMANDS declares it (sinkexp/commands/), its settings a ReportConfig."""
    try:
        given = read(COMMANDS["report"], argv)
    except ConfigError as err:
        return refuse(err)
    if given.help:
        print(help_text(COMMANDS["report"]))
        return 0
    args = given.flags
    if not args.dir.is_dir():
        return refuse(f"{args.dir} is not a directory")
    try:
        save = saver(args.format, args.dpi)
        head_maps = parse_heads(args.heads) if args.heads else None
    except (ConfigError, BadHeads) as err:
        return refuse(err)
    if args.list:
        lines = listing(args.dir)
        if len(lines) == 1:  # the header alone: as report says it
            return refuse(no_runs(args.dir))
        print("\n".join(lines))
        return 0
    out = args.out or args.dir / "report"
    try:
        report(args.dir, out, save, head_maps)
    except FileNotFoundError as err:
        return refuse(err)
    except BadHeads as err:  # --heads naming a head a measured run does not have
        return refuse(err)
    except NothingFinished as err:  # runs.csv is written: it says each run's status
        return refuse(err, 1)
    except OSError as err:  # a read-only or unwritable folder, a full disk, an unreadable run
        return refuse(report_fault(err, out), 1)
    return 0


def report_fault(err: OSError, out: Path) -> str:
    """One line for a file fault of `sinkexp report`: the file, the cause, where else to write."""
    cause = err.cause if isinstance(err, RunFileError) else err.strerror or f"{err.__class__.__name__}: {err}"
    path = Path(err.filename or out)
    if path.resolve().is_relative_to(out.resolve()):
        return f"cannot write {path}: {cause}; write the report elsewhere with --out DIR"
    return f"cannot read {path}: {cause}; give yourself read permission on it, or report another folder"
