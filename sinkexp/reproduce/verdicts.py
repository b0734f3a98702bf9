"""A claim's verdict: its value on every run it selects, and whether each meets the criterion.

A claim PASSes only when every selected run meets its criterion and no selected run failed or is
missing: one draw that misses is a FAIL, whatever the mean says. `problem` says why a claim could
not be measured (a run did not finish, no paired run, a value the run lacks); such a claim FAILs
with the problem shown, never with a number.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from sinkexp.reproduce.declare import Claim, Paired, Paper, Trend
from sinkexp.reproduce.measures import FinishedRun, MissingValue
from sinkexp.runfiles import collect, setting


def load_runs(folder: Path, planned: set[Path] | None = None) -> tuple[list[FinishedRun], pd.DataFrame]:
    """(finished runs, every run's settings and status) below an experiment's folder; only the
    `planned` run directories when given (a folder may also hold runs of an earlier declaration)."""
    if not folder.is_dir():
        return [], pd.DataFrame(columns=["run", "status"])
    table, finals = collect(folder)
    if planned is not None:
        table = table[[(folder / run).resolve() in planned for run in table["run"]]]
    done = [FinishedRun(folder / row["run"], row.to_dict(), finals[finals["run"] == row["run"]], experiment=folder.name)
            for _, row in table.iterrows() if row["status"] == "done"]
    return done, table


def selects(settings: dict, where: dict) -> bool:
    return all(str(setting(settings, key)) == str(value) for key, value in where.items())


@dataclass
class Result:
    claim: Claim
    values: dict[str, float] = field(default_factory=dict)   # run label (s<seed>/t<structure seed>) -> value
    problem: str = ""                                          # why the claim could not be measured
    runs: list = field(default_factory=list)                   # every run the values were computed from
    excluded: dict[str, float] = field(default_factory=dict)  # selected runs `among` left out -> their value

    @property
    def passed(self) -> bool:
        return not self.problem and bool(self.values) and all(map(self.claim.criterion.holds, self.values.values()))

    def row(self, paper: Paper) -> dict:
        """The claim's line of claims.csv (docs/reproduce.md lists the columns). With 3-6 runs a
        standard deviation says little: min and max are the interval a reader can check by eye."""
        values = pd.Series(self.values, dtype=float)
        return {"paper": paper.name, "declaration": paper.digest, "claim": self.claim.name, "kind": self.claim.kind,
                "statement": self.claim.statement, "source": self.claim.source, "paper_value": self.claim.paper_value,
                "measure": self.claim.describe(),
                "mean": values.mean(), "std": values.std(), "min": values.min(), "max": values.max(), "n": len(values),
                "values": " ".join(f"{k}={v:.4g}" for k, v in self.values.items()),
                "criterion": str(self.claim.criterion), "verdict": "PASS" if self.passed else "FAIL",
                "problem": self.problem, "note": self.claim.note,
                "excluded": " ".join(f"{k}={v:.4g}" for k, v in self.excluded.items()), **provenance(self.runs)}


def provenance(runs: list[FinishedRun]) -> dict[str, str]:
    """The distinct commits, versions, devices and thread counts of the runs a claim read ("; "
    between several: a claim whose runs come from different code says so)."""
    keys = ("commits", "versions", "devices", "threads")
    return {key: "; ".join(sorted({run.provenance[key] for run in runs})) for key in keys}


PAIRINGS = {"difference": lambda a, b: a - b, "ratio": lambda a, b: a / b if b else math.nan}


def spearman(x: list[float], y: list[float]) -> float:
    """Spearman's rank correlation: Pearson's on the ranks (ties share their mean rank)."""
    return float(pd.Series(x, dtype=float).rank().corr(pd.Series(y, dtype=float).rank()))


def per_run(claim: Claim, chosen: list[FinishedRun], others: dict[str, FinishedRun]) -> Result:
    """A Value claim: the measure on each run."""
    return Result(claim, {run.label: claim.measure.of(run) for run in chosen})


def paired(claim: Paired, chosen: list[FinishedRun], others: dict[str, FinishedRun]) -> Result:
    """A Paired claim: each run's measure against its draw's `against` run (difference or ratio)."""
    missing = [run.label for run in chosen if run.label not in others]
    if missing:
        return Result(claim, problem="no paired run for " + ", ".join(missing))
    pair = PAIRINGS[claim.compare]
    return Result(claim, {run.label: pair(claim.measure.of(run), claim.measure.of(others[run.label]))
                          for run in chosen})


def trend(claim: Trend, chosen: list[FinishedRun], others: dict[str, FinishedRun]) -> Result:
    """A Trend claim: per draw (seed, structure seed), rho of the measure against `key` over its runs."""
    draws: dict[str, list[FinishedRun]] = {}
    for run in chosen:
        draws.setdefault(run.label, []).append(run)
    short = [name for name, runs in draws.items() if len(runs) < 3]
    if short:
        return Result(claim, problem="fewer than 3 runs to rank for " + ", ".join(short))
    return Result(claim, {name: spearman([float(run.setting(claim.key)) for run in runs],
                                         [claim.measure.of(run) for run in runs]) for name, runs in draws.items()})


def judge(claim: Claim, runs: list[FinishedRun], table: pd.DataFrame) -> Result:
    """The claim's value on every run it selects, or the problem that prevents it. `where` selects
    among the runs of the claim's own experiments, `against` among those of `against_in`."""
    arms = [claim.where] + ([claim.against] if isinstance(claim, Paired) else [])
    unfinished = sum(row["status"] != "done" and any(selects(row, arm) for arm in arms)
                     for row in table.to_dict("records"))
    home = claim.own_experiments
    chosen = sorted((r for r in runs if r.experiment in home and selects(r.settings, claim.where)),
                    key=lambda run: run.label)
    others = {}
    if isinstance(claim, Paired):
        away = (claim.against_in,) if claim.against_in else home
        others = {r.label: r for r in runs if r.experiment in away and selects(r.settings, claim.against)}
    if unfinished:
        return Result(claim, problem=f"{unfinished} selected runs did not finish")
    if not chosen:
        return Result(claim, problem="no run selected")
    excluded = {}
    if claim.among:              # e.g. only the runs that solve the task: the others are listed, not counted
        try:
            condition = {run.label: claim.among.measure.of(run) for run in chosen}
        except MissingValue as err:
            return Result(claim, problem=str(err))
        excluded = {label: value for label, value in condition.items() if not claim.among.criterion.holds(value)}
        chosen = [run for run in chosen if run.label not in excluded]
        if not chosen:
            return Result(claim, problem=f"no selected run has {claim.among}", excluded=excluded)
    labels = [run.label for run in chosen]
    if not isinstance(claim, Trend) and len(set(labels)) < len(labels):
        return Result(claim, problem="several selected runs share a seed and structure seed; narrow `where`")
    verdict = paired if isinstance(claim, Paired) else trend if isinstance(claim, Trend) else per_run
    try:
        result = verdict(claim, chosen, others)
    except MissingValue as err:
        result = Result(claim, problem=str(err))
    result.runs = chosen + [others[run.label] for run in chosen if run.label in others]
    result.excluded = excluded
    return result


def check_claims(paper: Paper, root: Path, planned: dict | None = None) -> list[Result]:
    """Every claim of `paper` on the runs below root/<paper>/ (those `planned`, when given)."""
    loaded = {exp.name: load_runs(root / paper.name / exp.name, planned and planned[paper.name, exp.name])
              for exp in paper.experiments}
    results: dict[str, Result] = {}
    for claim in paper.claims:
        runs = [run for name in claim.experiments for run in loaded[name][0]]
        table = pd.concat([loaded[name][1] for name in claim.experiments], ignore_index=True)
        result = judge(claim, runs, table)
        failed = [premise for premise in claim.premises if not results[premise].passed]
        if failed and not result.problem:
            # the values are still shown; the claim cannot hold without its premise
            result.problem = f"its premise {failed[0]} does not hold"
        results[claim.name] = result
    return list(results.values())
