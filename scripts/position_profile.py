"""Sink attention per query position and layer for finished runs (Ran-Milo 2026's Theorem 2 and
experiments quantify over positions): a CSV and a figure.

    .venv/bin/python scripts/position_profile.py RUN_DIR [RUN_DIR ...] --out docs/ranmilo_positions.png \
        [--query-type non_trigger] [--before trigger]

Each run's table is sinkexp.analysis.positions.position_profile on its held-out batch; the figure is
sinkexp.report.positions.position_figure; the CSV (beside the figure) has one row per run, layer and
position.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pandas as pd

from sinkexp import load_run
from sinkexp.analysis.positions import position_profile
from sinkexp.report.positions import position_figure
from sinkexp.rundir.files import write_csv


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, required=True, help="the figure (PNG); the CSV goes beside it")
    parser.add_argument("--query-type", default="non_trigger")
    parser.add_argument("--before", default=None, help="only queries before the first of this type")
    args = parser.parse_args()
    tables = {}
    common = Path(os.path.commonpath([path.resolve() for path in args.runs]))
    for path in args.runs:
        run = load_run(path)
        # what tells the runs apart
        label = str(path.resolve().relative_to(common)) if len(args.runs) > 1 else path.name
        tables[label] = position_profile(run, args.query_type, args.before).assign(run=label)
    write_csv(args.out.with_suffix(".csv"), pd.concat(tables.values(), ignore_index=True))
    where = f"{args.query_type} queries" + (f" before the {args.before}" if args.before else "")
    position_figure(tables, args.out, f"attention on BOS per position and layer ({where})")
    print(f"written: {args.out}, {args.out.with_suffix('.csv')}")


if __name__ == "__main__":
    main()
