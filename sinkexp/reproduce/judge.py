"""A claim's values: the measure on every run it selects, at the end of training, untrained (step 0
of the same runs) and, for a run that misses the criterion at the end, the earlier evaluated steps
at which it met it; what each value is made of where the measure says (its detail). verdicts.py
decides what they make.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from sinkexp.reproduce.claims import UNTRAINED, Claim, Paired, Trend, Value
from sinkexp.reproduce.declare import Paper
from sinkexp.reproduce.finished import FinishedRun, MissingValue
from sinkexp.rundir.reading import FINISHED, collect, setting


def load_runs(folder: Path, planned: set[Path] | None = None) -> tuple[list[FinishedRun], pd.DataFrame]:
    """(finished runs, every run's settings and status) below an experiment's folder; only the
    `planned` run directories when given (a folder may also hold runs of an earlier declaration)."""
    if not folder.is_dir():
        return [], pd.DataFrame(columns=["run", "status"])
    table, finals = collect(folder)
    if planned is not None:
        table = table[[(folder / run).resolve() in planned for run in table["run"]]]
    done = [
        FinishedRun(folder / row["run"], row.to_dict(), finals[finals["run"] == row["run"]], experiment=folder.name)
        for _, row in table.iterrows()
        if row["status"] in FINISHED
    ]
    return done, table


def selects(settings: dict, where: dict) -> bool:
    return all(str(setting(settings, key)) == str(value) for key, value in where.items())


@dataclass
class Result:
    claim: Claim
    values: dict[str, float] = field(default_factory=dict)  # run label (s<seed>/t<structure seed>) -> value
    problem: str = ""  # why the claim could not be measured
    runs: list = field(default_factory=list)  # every run the values were computed from
    excluded: dict[str, float] = field(default_factory=dict)  # selected runs `among` left out -> their value
    unsolved: bool = False  # no selected run met `among`: not reached
    initial: dict[str, float] = field(default_factory=dict)  # the same measure on the untrained runs (step 0)
    initial_problem: str = ""  # why step 0 could not be measured
    details: dict[str, str] = field(default_factory=dict)  # run label -> what its value is made of (Measure.detail)
    earlier: dict[str, tuple[int, float]] = field(default_factory=dict)  # a run that misses the criterion at
    # the end -> the first evaluated step at which it met it, and its value there (Value claims)
    verdict: str = ""  # one of VERDICTS (check_claims)
    why: str = ""  # what decided it, in a phrase

    @property
    def passed(self) -> bool:
        """The criterion holds on every selected run at the end of training."""
        return not self.problem and bool(self.values) and all(map(self.claim.criterion.holds, self.values.values()))

    @property
    def failing(self) -> dict[str, float]:
        """The selected runs that miss the criterion at the end of training, with their values."""
        return {label: value for label, value in self.values.items() if not self.claim.criterion.holds(value)}

    @property
    def passed_initially(self) -> bool | None:
        """The criterion holds on every selected run untrained; None where step 0 was not measured or
        a run's untrained value is NaN (unknown, not a failure: e.g. no sink to read at step 0)."""
        if self.initial_problem or not self.initial or any(math.isnan(v) for v in self.initial.values()):
            return None
        return all(map(self.claim.criterion.holds, self.initial.values()))

    def row(self, paper: Paper) -> dict:
        """The claim's line of claims.csv (docs/reproduce.md lists the columns). With 3-6 runs a
        standard deviation says little: min and max are the interval a reader can check by eye."""
        values = pd.Series(self.values, dtype=float)
        return {
            "paper": paper.name,
            "declaration": paper.digest,
            "claim": self.claim.name,
            "model": models(paper, self.claim),
            "kind": self.claim.kind,
            "statement": self.claim.statement,
            "source": self.claim.source,
            "paper_value": self.claim.paper_value,
            "measure": self.claim.describe(),
            "mean": values.mean(),
            "std": values.std(),
            "min": values.min(),
            "max": values.max(),
            "n": len(values),
            "values": labelled(self.values),
            "detail": "; ".join(f"{label}: {detail}" for label, detail in self.details.items()),
            "criterion": str(self.claim.criterion),
            "verdict": self.verdict,
            "why": self.why,
            "untrained": labelled(self.initial) or self.initial_problem,
            "problem": self.problem,
            "note": self.claim.note,
            "excluded": labelled(self.excluded),
            **provenance(self.runs),
        }


def models(paper: Paper, claim: Claim) -> str:
    """The checkpoints a claim reads ("; " between several), empty for a claim on trained runs."""
    read = map(paper.experiment, claim.experiments)
    return "; ".join(dict.fromkeys(exp.model for exp in read if hasattr(exp, "model")))


def labelled(values: dict[str, float]) -> str:
    return " ".join(f"{k}={v:.4g}" for k, v in values.items())


def provenance(runs: list[FinishedRun]) -> dict[str, str]:
    """The distinct commits, versions, devices and thread counts of the runs a claim read ("; "
    between several: a claim whose runs come from different code says so)."""
    keys = ("commits", "versions", "devices", "threads")
    return {key: "; ".join(sorted({run.provenance[key] for run in runs})) for key in keys}


def ratio(a: float, b: float) -> float:
    if b == 0:  # no ratio: the claim is not run, never judged on a NaN
        raise MissingValue(f"{a:.4g} over an against run's 0: no ratio")
    return a / b


PAIRINGS = {"difference": lambda a, b: a - b, "ratio": ratio}  # "ratio over spread": paired() below


def spearman(x: list[float], y: list[float]) -> float:
    """Spearman's rank correlation: Pearson's on the ranks (ties share their mean rank); 0 when the
    measure is the same on every run (no order either way, where Pearson's is undefined)."""
    if len(set(y)) == 1:
        return 0.0
    rho = pd.Series(x, dtype=float).rank().corr(pd.Series(y, dtype=float).rank())
    # Pearson's on ranks in floats: an exact 0.8 (five ranks, 1 - 6 * 4 / 120) comes out 0.7999999999999999
    # and would miss a criterion of 0.8 it meets; rho of a few ranks is exact far above 12 digits
    return round(float(rho), 12)


def per_run(claim: Claim, chosen: list[FinishedRun], others: dict[str, FinishedRun]) -> dict[str, float]:
    """A Value claim: the measure on each run."""
    return {run.label: claim.measure.of(run) for run in chosen}


def paired(claim: Paired, chosen: list[FinishedRun], others: dict[str, FinishedRun]) -> dict[str, float]:
    """A Paired claim: each run's measure against its draw's `against` run (COMPARISONS: difference,
    ratio, or the ratio over the against runs' own spread, max / min over their draws; beyond it, the
    spread's inverse for a fall, whose criterion is <= 1)."""
    against = {label: claim.measure.of(run) for label, run in others.items()}
    if claim.compare in ("ratio over spread", "ratio beyond spread"):
        spread = ratio(max(against.values()), min(against.values()))
        if claim.compare == "ratio beyond spread" and math.isinf(claim.criterion.low):  # a fall
            spread = 1 / spread
        return {run.label: ratio(claim.measure.of(run), against[run.label]) / spread for run in chosen}
    pair = PAIRINGS[claim.compare]
    return {run.label: pair(claim.measure.of(run), against[run.label]) for run in chosen}


def trend(claim: Trend, chosen: list[FinishedRun], others: dict[str, FinishedRun]) -> dict[str, float]:
    """A Trend claim: per draw (seed, structure seed), rho of the measure against `key` over its runs."""
    draws: dict[str, list[FinishedRun]] = {}
    for run in chosen:
        draws.setdefault(run.label, []).append(run)
    short = [name for name, runs in draws.items() if len(runs) < 3]
    if short:
        raise MissingValue("fewer than 3 runs to rank for " + ", ".join(short))
    return {
        name: spearman([float(run.setting(claim.key)) for run in runs], [claim.measure.of(run) for run in runs])
        for name, runs in draws.items()
    }


def selection(claim: Claim, runs: list[FinishedRun], table: pd.DataFrame) -> tuple[list, dict, str]:
    """(the runs `where` selects, the `against` runs by label, the problem that prevents a verdict)."""
    arms = [claim.where] + ([claim.against] if isinstance(claim, Paired) and claim.against != UNTRAINED else [])
    unfinished = sum(
        row["status"] not in FINISHED and any(selects(row, arm) for arm in arms) for row in table.to_dict("records")
    )
    home = claim.own_experiments
    chosen = sorted(
        (r for r in runs if r.experiment in home and selects(r.settings, claim.where)), key=lambda run: run.label
    )
    others, untrained = {}, ""
    if isinstance(claim, Paired) and claim.against == UNTRAINED:  # each run against itself at step 0
        try:
            others = {run.label: run.initial for run in chosen}
        except MissingValue as err:
            untrained = str(err)
    elif isinstance(claim, Paired):
        away = (claim.against_in,) if claim.against_in else home
        others = {r.label: r for r in runs if r.experiment in away and selects(r.settings, claim.against)}
    labels = [run.label for run in chosen]
    missing = [label for label in labels if isinstance(claim, Paired) and label not in others]
    problem = (
        f"{unfinished} selected runs did not finish"
        if unfinished
        else "no run selected"
        if not chosen
        else untrained
        if untrained
        else "no paired run for " + ", ".join(missing)
        if missing
        else "several selected runs share a seed and structure seed; narrow `where`"
        if not isinstance(claim, Trend) and len(set(labels)) < len(labels)
        else ""
    )
    return chosen, others, problem


def judge(claim: Claim, runs: list[FinishedRun], table: pd.DataFrame) -> Result:
    """The claim's value on every run it selects, trained and untrained, or the problem that
    prevents it. `where` selects among the runs of the claim's own experiments, `against` among
    those of `against_in`; `among` keeps the runs that meet it (the others are listed)."""
    chosen, others, problem = selection(claim, runs, table)
    if problem:
        return Result(claim, problem=problem)
    excluded = {}
    if claim.among:  # e.g. only the runs that solve the task: the others are listed, not counted
        try:
            condition = {run.label: claim.among.measure.of(run) for run in chosen}
        except MissingValue as err:
            return Result(claim, problem=str(err))
        excluded = {label: value for label, value in condition.items() if not claim.among.criterion.holds(value)}
        chosen = [run for run in chosen if run.label not in excluded]
        if not chosen:
            return Result(claim, problem=f"no selected run has {claim.among}", excluded=excluded, unsolved=True)
    measure = paired if isinstance(claim, Paired) else trend if isinstance(claim, Trend) else per_run
    paired_runs = [others[run.label] for run in chosen if run.label in others]
    result = Result(claim, excluded=excluded, runs=chosen + paired_runs)
    try:
        result.values = measure(claim, chosen, others)
    except MissingValue as err:
        result.problem = str(err)
        return result
    try:  # the same runs untrained: could the criterion have failed? (against=UNTRAINED: themselves)
        itself = isinstance(claim, Paired) and claim.against == UNTRAINED  # `others` are untrained already
        against = others if itself else {label: run.initial for label, run in others.items()}
        result.initial = measure(claim, [run.initial for run in chosen], against)
    except MissingValue as err:
        result.initial_problem = f"step 0 not measured: {err}"
    result.details = details(claim, chosen)
    result.earlier = earlier(claim, [run for run in chosen if run.label in result.failing])
    return result


def details(claim: Claim, chosen: list[FinishedRun]) -> dict[str, str]:
    """Per run, what its value is made of, where the measure says (e.g. a pooled peak's two keys)."""
    if claim.measure.detail is None:
        return {}
    try:
        return {run.label: claim.measure.detail(run) for run in chosen}
    except MissingValue:
        return {}


def earlier(claim: Claim, failing: list[FinishedRun]) -> dict[str, tuple[int, float]]:
    """For a Value claim, each failing run's first evaluated step (after 0, before the last) at which
    it met the criterion, with its value there: a run that solved and then collapsed says so. A
    measure an earlier step cannot give (attention maps, the model) is left out."""
    if not isinstance(claim, Value):
        return {}
    met = {}
    for run in failing:
        for step in run.steps()[1:-1]:
            try:
                value = claim.measure.of(run.at(step))
            except MissingValue:
                break
            if claim.criterion.holds(value):
                met[run.label] = (step, value)
                break
    return met


def formed_at(claim: Claim, run: FinishedRun) -> int | None:
    """The first evaluated step (after 0) from which the claim's criterion holds at every evaluated
    step to the last: when its phenomenon formed on this run and stayed; None where it does not hold
    at the last step. MissingValue where a step's value cannot be read (attention maps, the model)."""
    if len(run.steps()) < 2:
        raise MissingValue(f"{run.label} has no evaluated step after 0")
    since = None
    for step in run.steps()[1:]:
        holds = claim.criterion.holds(claim.measure.of(run.at(step)))
        since = (step if since is None else since) if holds else None
    return since
