"""`sinkexp report DIR --list`: the runs below DIR, one line each, in the console's width.

    status       task     attn     depth  seed  step  hash      run
    done         trigger  softmax  L1     0     30    9fadbe90  trigger/softmax/L1/s0
    failed       trigger  relu     L1     2     20    a6dacc9e  trigger/relu/L1/s2
      Diverged: diverged at step 20 (train loss=nan); try a lower train.lr (now 1e+06)

The status is rundir/reading.py's `run_status` (the vocabulary of report, runs.csv and the plan:
STATUSES), its reason on an indented line below where it has one (a failed run's FAILED line, a
damaged run's files, a running run's holder); the rest is read from each run's own files
(config.yaml, meta.json, losses.csv: docs/rundir.md), nothing written and no table parsed whole:
the step is the last one losses.csv holds (a run that stopped: where it got to). A `sinkexp
measure` run lists `measure` as its task, the model's type as its attention and the checkpoint's
training step (`?` when unknown).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from omegaconf import OmegaConf

from sinkexp.rundir.files import CONFIG, LOSSES, META, read_json
from sinkexp.rundir.reading import find_runs, run_status, unreadable

COLUMNS = ("status", "task", "attn", "depth", "seed", "step", "hash", "run")
QUIET = ("done",)  # statuses whose reason the list leaves out (an interrupted run's says how it stopped)


def run_line(run: Path, root: Path) -> dict[str, str]:
    """One run's listing fields, as text ("-" for what its files do not say), and its `reason`."""
    fields = dict.fromkeys(COLUMNS, "-")
    state = run_status(run)
    fields.update(status=state.status, reason=state.reason, run=str(run.relative_to(root)) if run != root else ".")
    try:
        config = OmegaConf.to_container(OmegaConf.load(run / CONFIG))
        if not isinstance(config, dict):
            raise TypeError("not a mapping")
    except Exception as err:  # OmegaConf raises several types for a file that is not a mapping
        if state.status != "damaged":  # as report says it (reading.collect)
            fields.update(status="damaged", reason=unreadable(err))
        return fields
    try:
        if config.get("command") == "measure":
            measured = config.get("measured") or {}
            step = config.get("step")
            fields.update(
                task="measure", attn=str(measured.get("model_type", "-")), step="?" if step in (None, -1) else str(step)
            )
            fields["depth"] = f"L{measured['n_layers']}" if "n_layers" in measured else "-"
        else:
            fields.update(task=str(config["task"]["name"]), attn=str(config["attn"]["name"]), seed=str(config["seed"]))
            fields.update(depth=f"L{config['model']['n_layers']}", step=last_step(run / LOSSES))
        fields["hash"] = str(read_json(run / META).get("config_hash", "-"))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):  # keys or meta.json missing: what could be read
        pass
    return fields


def last_step(table: Path) -> str:
    """The step of a table's last row (its first field), read from the file's end."""
    try:
        with open(table, "rb") as file:
            file.seek(max(0, file.seek(0, 2) - 4096))
            last = file.read().decode(errors="replace").strip().splitlines()[-1]
    except (OSError, IndexError):
        return "-"
    step = last.split(",", 1)[0]
    return step if step.isdigit() else "-"


def listing(root: Path, width: int | None = None) -> list[str]:
    """The header and one line per run below `root`, columns aligned, each cut to `width` (the
    console's by default) by shortening the run's folder from its left; a run's reason (its
    status's: STATUSES) on an indented line below it, cut at the width."""
    width = width or shutil.get_terminal_size((120, 24)).columns
    rows = [dict(zip(COLUMNS, COLUMNS))] + [run_line(run, Path(root)) for run in find_runs(root)]
    widths = {column: max(len(row[column]) for row in rows) for column in COLUMNS[:-1]}
    lines = []
    for row in rows:
        line = "  ".join(row[column].ljust(widths[column]) for column in COLUMNS[:-1]) + "  "
        room = max(width - len(line), 8)
        folder = row["run"] if len(row["run"]) <= room else "..." + row["run"][-(room - 3) :]
        lines.append((line + folder).rstrip())
        if row.get("reason") and row["status"] not in QUIET:
            reason = "  " + row["reason"]
            lines.append(reason if len(reason) <= width else reason[: max(width, 12) - 3] + "...")
    return lines
