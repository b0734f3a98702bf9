"""`sinkexp reproduce PAPER|all|--list [KEY=VALUE ...] [--docs DIR]`: run a paper's experiments,
check its claims.

A paper is one file in papers/ holding a `Paper` in the vocabulary of declare.py (experiments,
claims of three kinds, criteria) and measures.py. The command works in four rooms, one module each:

    declare.py   what a paper may say; references are checked when the paper is imported
    execute.py   every job planned (checked) first, then each experiment's sweep run through launch
    estimate.py  --plan: the planned jobs, their FLOPs and a predicted wall time from a short calibration
    verdicts.py  each claim's value on every run it selects, and its verdict
    write.py     claims.csv, REPORT.md, figures, and with --docs the results page and README headline

docs/reproduce.md describes the files and the verdict.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import pandas as pd

from sinkexp.reproduce.declare import Paper

OUTPUT_ROOT = Path("outputs/reproduce")
USAGE = """usage: sinkexp reproduce PAPER|all [KEY=VALUE ...] [weights=DIR] [--docs DIR] [--pack|--no-pack]
           (overrides apply to every run)
       sinkexp reproduce PAPER|all [KEY=VALUE ...] --plan [--recalibrate]
           (the jobs, FLOPs and predicted wall time; nothing trains)
       sinkexp reproduce --list
       sinkexp reproduce --docs DIR       (DIR/results.md and the README headline again, from DIR/claims.csv)"""


def reproduce(papers: list[Paper], overrides: list[str], root: Path = OUTPUT_ROOT, command: str = "",
              pack: bool | None = None, weights: Path | None = None) -> pd.DataFrame:
    """Run (or resume) every experiment of `papers`, check their claims, write claims.csv, REPORT.md
    and figures into `root` (one paper: root/<paper>/), print the table; returns the claims table.
    Every job is checked before the first one trains (ConfigError on the first bad one). `pack`:
    train each job's seeds and hyper-parameter values together (None: on a GPU only, execute.packs_pay).
    Checkpoints are measured where their weights are here (checkpoints.py; `weights`: a folder of them)."""
    # Imported here, not at the top: execute reaches torch (through launch), and `--list`, `--docs`
    # and a declaration error should answer without it.
    from sinkexp.reproduce.checkpoints import measure_checkpoints, planned_runs
    from sinkexp.reproduce.execute import (
        chose_launcher,
        packs_pay,
        plan_experiments,
        planned_dirs,
        run_experiment,
        run_pool,
        scale_of,
    )
    from sinkexp.reproduce.verdicts import check_claims
    from sinkexp.reproduce.write import figures, passing, table_text, write_claims_report

    plans = plan_experiments(papers, overrides, root, packs_pay(overrides) if pack is None else pack)
    planned = {key: planned_dirs(plan) for key, plan in plans.items()}   # claims read only these runs
    started, seconds, reports, results = time.perf_counter(), {}, {}, []
    if not plans:                       # checkpoints only: nothing to train
        pass
    elif chose_launcher(overrides):     # the user's launcher (slurm, ...): one sweep per experiment
        for paper in papers:
            for exp in paper.experiments:
                if (paper.name, exp.name) in plans:        # a checkpoint is measured, not trained
                    seconds[paper.name, exp.name] = run_experiment(paper, exp, plans[paper.name, exp.name], root)
    else:                               # every job through one pool, one progress line
        from sinkexp.reproduce.estimate import estimate
        predicted = estimate(plans, overrides, root, cpu_plans=cpu_twins(papers, plans, overrides, root, pack))
        seconds = run_pool(plans, root, overrides, predicted[1]["job_seconds"])    # for the time left
    missing = measure_checkpoints(papers, root, weights)
    for paper in papers:
        for name, path in figures(paper, root).items():
            reports[paper.name, name] = path
        planned.update(planned_runs(paper, root))
        results += [result.row(paper) for result in check_claims(paper, root, planned, missing)]
    rows = pd.DataFrame(results)
    out = root / papers[0].name if len(papers) == 1 else root
    if scale_of(overrides) != "cpu":       # another scale's verdicts beside the CPU sizes', not over them
        out = out / scale_of(overrides)
    report = write_claims_report(papers, rows, out, root, command, seconds, reports)
    print(table_text(rows))
    print(f"{passing(rows)}; wall time {time.perf_counter() - started:.0f} s; report: {report}")
    return rows


def cpu_twins(papers: list[Paper], plans: dict, overrides: list[str], root: Path, pack: bool | None) -> dict:
    """The experiments planned at scale=cpu, whose jobs the estimate times for a larger scale's
    (estimate.py); the plans themselves at scale=cpu."""
    from sinkexp.config.compose import key_of
    from sinkexp.reproduce.execute import packs_pay, plan_experiments, scale_of

    if scale_of(overrides) == "cpu":
        return plans
    at_cpu = [o for o in overrides if key_of(o) != "scale"]
    return plan_experiments(papers, at_cpu, root, packs_pay(overrides) if pack is None else pack)


def estimate_papers(papers: list[Paper], overrides: list[str], pack: bool | None = None, recalibrate: bool = False,
                    root: Path = OUTPUT_ROOT) -> tuple[pd.DataFrame, dict]:
    """`--plan`: every experiment planned, and the jobs' predicted cost (estimate.py); nothing trains."""
    from sinkexp.reproduce.estimate import estimate
    from sinkexp.reproduce.execute import packs_pay, plan_experiments

    pack = packs_pay(overrides) if pack is None else pack
    plans = plan_experiments(papers, overrides, root, pack, check_memory=False)   # estimate says what does not fit
    return estimate(plans, overrides, root, recalibrate, cpu_twins(papers, plans, overrides, root, pack))


def last_verdicts(names, root: Path = OUTPUT_ROOT) -> pd.DataFrame:
    """The verdicts of the last `reproduce` at the CPU sizes below `root` (root/claims.csv and
    root/<paper>/claims.csv for the papers `names`, not another scale's root/<scale>/claims.csv;
    the newest row of a claim wins), for `--list`; empty before any."""
    from sinkexp.reproduce.write import CLAIMS

    tables = [path for path in (root / CLAIMS, *(root / name / CLAIMS for name in names)) if path.is_file()]
    tables = sorted(tables, key=lambda path: path.stat().st_mtime)
    rows = [pd.read_csv(path) for path in tables]
    if not rows:
        return pd.DataFrame(columns=["paper", "claim", "kind", "verdict"])
    return pd.concat(rows).drop_duplicates(["paper", "claim"], keep="last")


def list_papers(papers: dict[str, Paper], root: Path = OUTPUT_ROOT) -> str:
    """Every claim with its source and criterion, and its verdict in the last run below `root`,
    counted per kind for each paper."""
    from sinkexp.reproduce.verdicts import VERDICTS
    from sinkexp.reproduce.write import passing

    last = last_verdicts(papers, root).set_index(["paper", "claim"])
    lines = []
    width = max(len(c.name) for paper in papers.values() for c in paper.claims)
    for paper in papers.values():
        runs = sum(exp.runs for exp in paper.experiments)
        weights = {e.name: e.model for e in paper.experiments if hasattr(e, "model")}   # checkpoints
        verdicts = [last["verdict"].get((paper.name, c.name), "not run yet") for c in paper.claims]
        counts = pd.DataFrame({"kind": [c.kind for c in paper.claims], "verdict": verdicts})
        ran = f"last run: {passing(counts)}" if counts["verdict"].isin(VERDICTS).any() else "not run yet"
        lines.append(f"{paper.name}: {paper.title} ({len(paper.experiments)} experiments, {runs} runs; {ran})")
        for c, verdict in zip(paper.claims, verdicts):
            if verdict.startswith("not run") and c.experiments[0] in weights:      # a checkpoint not measured
                verdict += f", needs weights: {weights[c.experiments[0]]}"
            lines.append(f"  {c.name:<{width}} [{c.kind}] {verdict}: {c.source}: {c.describe()} {c.criterion} "
                         f"(paper: {c.paper_value})")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    from sinkexp.errors import ConfigError
    from sinkexp.reproduce.declare import DeclarationError

    docs, pack, planning, recalibrate = None, None, "--plan" in argv, "--recalibrate" in argv
    argv = [a for a in argv if a not in ("--plan", "--recalibrate")]
    for flag, value in (("--pack", True), ("--no-pack", False)):   # default: pack on a GPU only
        if flag in argv:
            pack, argv = value, [a for a in argv if a != flag]
    if "--docs" in argv:
        at = argv.index("--docs")
        if at + 1 >= len(argv):
            print("sinkexp: error: --docs needs a folder, e.g. --docs docs", file=sys.stderr)
            return 2
        docs, argv = Path(argv[at + 1]), argv[:at] + argv[at + 2:]
    try:   # a paper file's declaration mistake is found here, on import
        from sinkexp.reproduce.papers import PAPERS
    except DeclarationError as err:
        print(f"sinkexp: error: {err}", file=sys.stderr)
        return 2
    if not argv and docs is not None:
        from sinkexp.reproduce.write import write_docs
        print(f"written: {write_docs(docs)}")
        return 0
    if not argv or argv[0] in ("-h", "--help"):
        print(f"{USAGE}\npapers: {', '.join(PAPERS)}")
        return 0 if argv else 2
    if argv[0] == "--list":
        print(list_papers(PAPERS))
        return 0
    name, overrides = argv[0], [a for a in argv[1:] if not a.startswith("weights=")]
    weights = next((Path(a.split("=", 1)[1]) for a in reversed(argv) if a.startswith("weights=")), None)
    if name != "all" and name not in PAPERS:
        print(f"sinkexp: error: unknown paper {name!r}; choose one of: all, {', '.join(PAPERS)}", file=sys.stderr)
        return 2
    papers = list(PAPERS.values()) if name == "all" else [PAPERS[name]]
    if recalibrate and not planning:
        print("sinkexp: error: --recalibrate goes with --plan (it times the plan's jobs again)", file=sys.stderr)
        return 2
    if planning:
        from sinkexp.reproduce.estimate import format_estimate
        try:
            print(format_estimate(*estimate_papers(papers, overrides, pack, recalibrate)))
        except ConfigError as err:
            print(f"sinkexp: error: {err}", file=sys.stderr)
            return 2
        return 0
    try:
        rows = reproduce(papers, overrides, command="sinkexp reproduce " + " ".join(argv), pack=pack, weights=weights)
    except ConfigError as err:
        print(f"sinkexp: error: {err}", file=sys.stderr)
        return 2
    if docs is not None:
        from sinkexp.reproduce.write import write_docs
        print(f"written: {write_docs(docs, rows)}")
    return exit_code(rows)


def exit_code(rows: pd.DataFrame) -> int:
    """0 when every claim holds, was not reached at the size run, or was not run for want of a
    checkpoint's weights (the runs found nothing wrong); 1 when a claim was contradicted, could not
    fail (a criterion that tests nothing is a defect of its declaration) or was not run for another
    reason (docs/reproduce.md, "The verdict")."""
    weights = rows["why"].fillna("").str.startswith("needs ")     # a checkpoint whose weights are not here
    return 0 if (rows["verdict"].isin(("holds", "not reached")) | weights).all() else 1
