"""A run directory read back: its status (`run_status`, the one vocabulary: STATUSES), its
settings, its final values, whether a finished run is whole (`damage`), every run below a folder
(`collect`), and one run's files (`RunFiles`).

This is the one reader of a run directory (docs/rundir.md is its contract). Like rundir/files.py
(the names, the writers, the lock) and rundir/manifest.py (DONE's manifest) it imports no torch and
no model code, so `sinkexp report` and `--list`, `sinkexp reproduce`'s verdicts, load_run and the
plan read runs the same way, and a notebook can too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import NamedTuple

import pandas as pd
from omegaconf import OmegaConf

from sinkexp.config.schema import LATER_KEYS
from sinkexp.evaluate.tables import FINAL_COLUMNS, LOSS_COLUMNS, METRIC_COLUMNS, final_rows
from sinkexp.rundir.files import CONFIG, DONE, FAILED, KEPT, LOSSES, META, METRICS_CSV, SUMMARY, lock_holder, read_json
from sinkexp.rundir.manifest import differences, manifest

# A run's status: one word wherever a run is shown (report --list, report, runs.csv, intervene,
# export, the plan's refusal), with a reason beside it (docs/rundir.md, "Status").
STATUSES = {
    "running": "a live process holds its lock and writes it now; the reason names the holder",
    "interrupted": "stopped before it finished, and the same command resumes it: killed (no DONE or "
    "FAILED), stopped for a requeue, or stopped by Ctrl-C or SIGTERM (FAILED says at which step)",
    "failed": "ended by an error: FAILED, whose first line is the reason; the same command resumes or restarts it",
    "damaged": "finished, but a file differs from DONE's manifest (a run finished before manifests: "
    "does not read back whole); the reason names the file; never overwritten",
    "unverified": "finished before DONE carried a manifest, and reads back whole by the earlier checks "
    "(the tables end at the last step); counted as finished",
    "done": "finished, every file as DONE's manifest lists it",
}
FINISHED = ("done", "unverified")  # the statuses a report summarises and a rerun leaves untouched
SHOWN = 3  # problems a damaged run's reason names before "and N more"


class RunStatus(NamedTuple):
    status: str  # one of STATUSES
    reason: str = ""


def measured_run(path: Path, config) -> str | None:
    """Why `sinkexp export` has nothing to write for a `sinkexp measure` run (its model is the
    measured checkpoint, not weights trained here): None for a trained run (no `command: measure`)."""
    if config.get("command") != "measure":
        return None
    model = config.get("model")
    return (
        f"{path} is a `sinkexp measure` run of {model}: it trained no weights to export; its model is "
        f"{model} itself (sinkexp.load_run on this folder loads it as measure did, with its inputs)"
    )


def find_runs(root: Path) -> list[Path]:
    """Every folder below (or equal to) root that holds a run's config.yaml."""
    return sorted(p.parent for p in Path(root).rglob(CONFIG) if ".hydra" not in p.parts)


def read_settings(run: Path) -> dict:
    """The run's config as flat dotted keys (e.g. model.n_layers); lists become their text. First
    `command`: measure for a `sinkexp measure` run, train for a trained one (its config.yaml has no
    such key), so that a report over both labels each by the command that made it."""
    flat = pd.json_normalize(OmegaConf.to_container(OmegaConf.load(Path(run) / CONFIG)), sep=".")
    settings = {key: (str(value) if isinstance(value, list) else value) for key, value in flat.iloc[0].items()}
    return {"command": settings.pop("command", "train"), **settings}


def setting(settings: dict, key: str):
    """A run's value of `key`; a run written before the key existed has its earlier behaviour (LATER_KEYS)."""
    value = settings.get(key)
    missing = value is None or (isinstance(value, float) and math.isnan(value))
    return LATER_KEYS.get(key) if missing else value


def last_step(settings: dict) -> int:
    """The step a finished run's tables end at: train.steps, or a `sinkexp measure` run's `step`; -1: unknown."""
    value = settings.get("step" if settings.get("command") == "measure" else "train.steps")
    return -1 if value is None or (isinstance(value, float) and math.isnan(value)) else int(value)


def final_values(metrics: pd.DataFrame, losses: pd.DataFrame) -> pd.DataFrame:
    """evaluate/tables.py's final_rows of tables read back, as a DataFrame with FINAL_COLUMNS."""
    metric_rows = metrics[METRIC_COLUMNS].itertuples(index=False, name=None)
    rows = final_rows(metric_rows, losses[LOSS_COLUMNS].itertuples(index=False, name=None))
    return pd.DataFrame(rows, columns=FINAL_COLUMNS)


def read_final(run: Path, steps: int) -> pd.DataFrame:
    """A finished run's final values, after checking that its files agree: metrics.csv, losses.csv
    and summary.json all end at train.steps. Raises ValueError saying which file is wrong and how."""
    metrics, losses = (read_whole(run / name, pd.read_csv) for name in (METRICS_CSV, LOSSES))
    summary_step = read_whole(run / SUMMARY, read_json).get("step")
    ends = {
        METRICS_CSV: metrics["step"].max() if len(metrics) else None,
        LOSSES: losses["step"].max() if len(losses) else None,
        SUMMARY: summary_step,
    }
    if any(end != steps for end in ends.values()):
        raise ValueError(
            "tables end at "
            + ", ".join(f"{name} step {end}" for name, end in ends.items())
            + f", not train.steps={steps}"
        )
    return final_values(metrics, losses)


def unreadable(err: Exception) -> str:
    """The reason a run whose config.yaml does not read as a mapping is damaged."""
    return f"{CONFIG} cannot be read ({err.__class__.__name__})"


def read_whole(path: Path, read):
    """`read(path)`, or ValueError naming the file when it is missing, unreadable or cut short."""
    try:
        value = read(path)
        if isinstance(value, pd.DataFrame) and "step" not in value:
            raise ValueError("no step column")
        return value
    except (OSError, ValueError, KeyError, pd.errors.ParserError, pd.errors.EmptyDataError) as err:
        why = f"{err.__class__.__name__}: {str(err).splitlines()[0]}" if str(err) else err.__class__.__name__
        raise ValueError(f"{Path(path).name} cannot be read ({why})") from None


def read_whole_run(run: Path) -> pd.DataFrame:
    """A finished run's final values once it reads back whole: config.yaml, meta.json and
    summary.json parse, and the tables end where the run does (read_final). ValueError, a line
    naming the file, when they do not."""
    try:
        settings = read_settings(run)
    except Exception as err:  # OmegaConf raises several types for a file that is not a mapping
        raise ValueError(unreadable(err)) from None
    if ("step" if settings.get("command") == "measure" else "train.steps") not in settings:
        raise ValueError(f"{CONFIG} is cut short (it has no train.steps, or a measure run's step)")
    read_whole(Path(run) / META, read_json)
    return read_final(Path(run), last_step(settings))


def checked(run: Path) -> tuple[RunStatus, pd.DataFrame | None]:
    """A finished run (DONE) checked: done when every file is as DONE's manifest lists it, damaged
    naming the files that are not (rundir/manifest.py); a run finished before manifests is read
    back whole (read_whole_run: unverified, with its final values) or damaged with what is wrong."""
    try:
        files = manifest(run)
    except ValueError as err:  # DONE itself cut or changed
        return RunStatus("damaged", str(err)), None
    if files is None:
        try:
            finals = read_whole_run(run)
        except ValueError as err:
            return RunStatus("damaged", str(err)), None
        return RunStatus("unverified", "finished before manifests; its tables read back whole"), finals
    problems = differences(run, files)
    more = f" and {len(problems) - SHOWN} more" if len(problems) > SHOWN else ""
    return RunStatus("damaged", ", ".join(problems[:SHOWN]) + more) if problems else RunStatus("done"), None


def run_status(run: Path) -> RunStatus:
    """The run's status (STATUSES) and its reason, from its files alone: DONE checked (`checked`);
    else a live holder of its lock; else FAILED's first line (a stop by a signal is interrupted);
    else interrupted (killed, or stopped for a requeue)."""
    run = Path(run)
    if (run / DONE).exists():
        return checked(run)[0]
    holder = lock_holder(run)
    if holder is not None:
        return RunStatus("running", holder)
    try:
        first = (run / FAILED).read_text(errors="replace").partition("\n")[0].strip()
    except OSError:  # no FAILED (or cleared by a rerun since)
        return RunStatus("interrupted", "no DONE or FAILED: killed, or stopped for a requeue")
    if first.startswith("Interrupted:"):  # preemption.Interrupted: a signal, at a step
        return RunStatus("interrupted", first.removeprefix("Interrupted:").strip())
    if first.startswith("KeyboardInterrupt"):  # a stop outside a run's loop (measure's)
        return RunStatus("interrupted", "stopped by Ctrl-C")
    return RunStatus("failed", first)


def damage(run: Path) -> str | None:
    """What is wrong with a finished run (DONE), or None when it is whole: the one check that the
    plan (before it skips a finished run), `sinkexp report` and `--list`, load_run, intervene,
    export and reproduce's verdicts share (`checked`; docs/rundir.md, "The manifest")."""
    state = checked(Path(run))[0]
    return state.reason if state.status == "damaged" else None


def collect(root: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(runs: one row per run below root with its status, reason and settings; finals: long rows of
    the final values of finished runs: done or unverified). A run whose settings or tables cannot be
    read back is `damaged`."""
    runs, finals = [], []
    for run in find_runs(root):
        row = {"run": str(run.relative_to(root)) if run != Path(root) else "."}
        state, final = checked(run) if (run / DONE).exists() else (run_status(run), None)
        row.update(status=state.status, reason=state.reason)
        try:
            row.update(read_settings(run))
        except Exception as err:  # OmegaConf raises several types for a file that is not a mapping
            if row["status"] != "damaged":
                row.update(status="damaged", reason=unreadable(err))
        runs.append(row)
        if row["status"] not in FINISHED:
            continue
        try:
            finals.append((read_whole_run(run) if final is None else final).assign(run=row["run"]))
        except ValueError as err:  # tables that a manifest lists, yet written wrong
            row.update(status="damaged", reason=str(err))
    runs = pd.DataFrame(runs)
    finals = pd.concat(finals, ignore_index=True) if finals else pd.DataFrame(columns=["run", *FINAL_COLUMNS])
    return runs, finals


@dataclass
class RunFiles:
    """One run directory's files, each read when first asked for."""

    path: Path

    @cached_property
    def config(self):  # config.yaml as OmegaConf reads it
        return OmegaConf.load(self.path / CONFIG)

    @cached_property
    def metrics(self) -> pd.DataFrame | None:  # every evaluated step, per head
        return self.table(METRICS_CSV)

    @cached_property
    def losses(self) -> pd.DataFrame | None:
        return self.table(LOSSES)

    @cached_property
    def meta(self) -> dict | None:  # meta.json: provenance, timings (docs/rundir.md)
        return read_json(self.path / META) if (self.path / META).exists() else None

    @cached_property
    def summary(self) -> dict | None:  # None before the run finished
        return read_json(self.path / SUMMARY) if (self.path / SUMMARY).exists() else None

    def table(self, name: str) -> pd.DataFrame | None:
        return pd.read_csv(self.path / name) if (self.path / name).exists() else None

    def kept_steps(self) -> list[int]:
        """Steps with a kept checkpoint (train.keep_checkpoints)."""
        return sorted(int(p.stem.removeprefix("step_")) for p in (self.path / KEPT).glob("step_*.pt"))
