"""The vocabulary a paper file declares itself in: experiments (experiment.py), claims and criteria
(claims.py), and the `Paper` that holds them; a paper file imports them all from here.

    Paper(name="fesser2026", title="...", experiments=(Experiment(...), ...), claims=(Value(...), ...))

`Paper(...)` checks its references when the paper file is imported, before anything trains: the
claims and experiments a claim names, the metrics its measure reads (the registry in
evaluate/tables.py), every config key it, a grid or a reach size names (keys.py: the schema, read
without torch), and that a claim's `where` values are values its experiments run. A mistake
raises DeclarationError: one line naming the paper, the claim or experiment, and the key.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Callable

from sinkexp.evaluate.tables import METRICS
from sinkexp.reproduce.claims import (
    COMPARISONS,
    KINDS,
    ROUTES,
    THRESHOLDS,
    UNTRAINED,
    Claim,
    Condition,
    Criterion,
    Measure,
    Paired,
    Trend,
    Value,
    at_least,
    at_most,
    between,
)
from sinkexp.reproduce.experiment import Checkpoint, Experiment, override_value
from sinkexp.reproduce.keys import key_problem

__all__ = [  # what a paper file imports
    "Checkpoint",
    "Claim",
    "Condition",
    "Criterion",
    "DeclarationError",
    "Experiment",
    "KINDS",
    "Measure",
    "Paired",
    "Paper",
    "ROUTES",
    "Trend",
    "UNTRAINED",
    "Value",
    "at_least",
    "at_most",
    "between",
    "override_value",
]


class DeclarationError(ValueError):
    """A paper declares something that does not exist; one line naming the claim and the key."""


@dataclass(frozen=True, kw_only=True)
class Paper:
    name: str
    title: str
    experiments: tuple[Experiment | Checkpoint, ...]
    claims: tuple[Claim, ...]
    # A table its findings page shows, made from its runs below the folder given (root/<name>): reproduce
    # writes it to <name>/findings.md, and with --docs DIR between the markers of DIR/findings/<name>.md
    findings: Callable[[Path], str] | None = None

    def __post_init__(self) -> None:
        check_paper(self)

    def experiment(self, name: str) -> Experiment:
        return next(e for e in self.experiments if e.name == name)

    def claim(self, name: str) -> Claim:
        return next(c for c in self.claims if c.name == name)

    @cached_property
    def digest(self) -> str:
        """Eight hex digits over everything the paper declares (each experiment's settings; each
        claim's kind, statement, selection, measure and criterion), so a claims table says which
        declaration its verdicts answer."""
        experiments = [(e.name, e.argv(), sorted(e.cpu.items()), e.argv("reach")) for e in self.experiments]
        claims = [
            (
                c.__class__.__name__,
                c.name,
                c.kind,
                c.statement,
                c.source,
                c.paper_value,
                c.experiments,
                sorted(c.where.items()),
                c.describe(),
                str(c.criterion),
                c.note,
                c.forms,
                c.reached,
                c.contrast,
                *((c.route,) if c.route else ()),  # a claim with no route reads as before routes existed
            )
            for c in self.claims
        ]
        text = json.dumps([self.name, experiments, claims], default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:8]


def check_paper(paper: Paper) -> None:
    """DeclarationError on the first reference that does not exist."""

    def fail(where: str, message: str):
        raise DeclarationError(f"{paper.name}/{where}: {message}")

    names = [e.name for e in paper.experiments]
    for name in {n for n in names if names.count(n) > 1}:
        fail(name, "two experiments share this name")
    for exp in (e for e in paper.experiments if not isinstance(e, Checkpoint)):  # a checkpoint has no keys
        swept = [(key, value) for key, values in exp.grid.items() for value in values]
        reach = [
            (key, value)
            for key, values in exp.reach.items()
            for value in (values if isinstance(values, tuple) else (values,))
        ]
        # the task first: it decides which task.* keys exist
        for key, value in [("task", exp.task), *exp.overrides.items(), *exp.cpu.items(), *swept, *reach]:
            problem = key_problem(key, value, exp.task)
            if problem:
                fail(exp.name, problem)
    claims = [c.name for c in paper.claims]
    for name in {n for n in claims if claims.count(n) > 1}:
        fail(name, "two claims share this name")
    for i, claim in enumerate(paper.claims):
        problem = reference_problem(paper, claim, claims[:i]) or selection_problem(paper, claim)
        if problem:
            fail(claim.name, problem)


def reference_problem(paper: Paper, claim: Claim, earlier: list[str]) -> str:
    """What is wrong with the claims, experiments and metrics a claim names ('' if nothing)."""
    names = [e.name for e in paper.experiments]
    if claim.kind not in KINDS:
        return f"kind={claim.kind!r}; choose one of: {', '.join(KINDS)}"
    for field_name, named in (
        ("requires", claim.requires),
        ("reached", claim.reached),
        ("contrast", claim.contrast),
    ):
        for other in named:
            if other not in earlier:
                return f"{field_name}={other!r} is not an earlier claim; earlier: {', '.join(earlier) or 'none'}"
    if claim.reached and not (claim.forms or isinstance(claim, Trend)):
        return "reached= is for a claim that a phenomenon forms (forms=True) or a Trend (its arms may not have formed)"
    problem = route_problem(paper, claim)
    if problem:
        return problem
    missing = [name for name in claim.experiments if name not in names]
    if missing:
        return f"experiment {missing[0]!r} is not declared; experiments: {', '.join(names)}"
    for other in claim.contrast:
        problem = contrast_problem(paper, claim, paper.claim(other))
        if problem:
            return f"contrast={other!r} {problem}"
    if claim.criterion.by not in THRESHOLDS:
        return f"criterion by={claim.criterion.by!r}; choose one of: {', '.join(THRESHOLDS)}"
    unknown = [
        m for m in (*claim.measure.metrics, *(claim.among.measure.metrics if claim.among else ())) if m not in METRICS
    ]
    if unknown:
        return f"metric {unknown[0]!r} is not in the registry (evaluate/tables.py); metrics: {', '.join(METRICS)}"
    if isinstance(claim, Paired) and claim.compare not in COMPARISONS:
        return f"compare={claim.compare!r}; choose one of: {', '.join(COMPARISONS)}"
    low, high = claim.criterion.low, claim.criterion.high
    one_sided = (low, math.isinf(high)) == (1, True) or (high, math.isinf(low)) == (1, True)  # a rise, a fall
    if isinstance(claim, Paired) and claim.compare == "ratio beyond spread" and not one_sided:
        return f"compare='ratio beyond spread' reads a direction: at_least(1) or at_most(1), not {claim.criterion}"
    return ""


def route_problem(paper: Paper, claim: Claim) -> str:
    """What is wrong with the route a claim declares ('' if nothing): one of ROUTES, given wherever
    the claim names `reached` evidence, and the same as each evidence claim's, so that a variant
    that must form its phenomenon another way does not borrow the evidence that the size sufficed."""
    if claim.route and claim.route not in ROUTES:
        return f"route={claim.route!r}; choose one of: {', '.join(ROUTES)}"
    if claim.reached and not claim.route:
        return f"reached={claim.reached[0]!r} needs route= (how it and its evidence form): one of {', '.join(ROUTES)}"
    for other in (paper.claim(name) for name in claim.reached):
        if other.route != claim.route:
            return (
                f"reached={other.name!r} forms by route {other.route or 'none'!r}, not this claim's {claim.route!r}: "
                "evidence counts only from the same route"
            )
    return ""


def contrast_problem(paper: Paper, claim: Claim, other: Claim) -> str:
    """What keeps `other` from standing in for `claim`'s check that it could fail ('' if nothing): a
    contrast reads the same quantity (a measure family they share) on runs like the claim's (an
    experiment of the same task at the same CPU sizes, and the same reach sizes where the claim is
    judged at reach: scales.judged_at), so that its failing untrained shows what this claim's
    measure reads there, not that something else formed."""
    if not claim.measure.families & other.measure.families:
        return (
            f"measures {', '.join(sorted(other.measure.families))}, not this claim's "
            f"{', '.join(sorted(claim.measure.families))}; a contrast reads the same quantity"
        )

    at_reach = all(paper.experiment(name).reach for name in claim.experiments)

    def sized(name: str) -> tuple:
        exp = paper.experiment(name)
        return exp.task, sorted(exp.cpu.items()), sorted(exp.reach.items()) if at_reach else None

    mine, theirs = {repr(sized(e)) for e in claim.experiments}, {repr(sized(e)) for e in other.experiments}
    if not mine & theirs:
        return (
            f"reads {', '.join(other.experiments)}, not runs like this claim's ({', '.join(claim.experiments)}: "
            "the same task at the same sizes)"
        )
    return ""


def selection_problem(paper: Paper, claim: Claim) -> str:
    """What is wrong with the settings a claim selects runs by, or its trend key ('' if nothing)."""
    own = [paper.experiment(n) for n in claim.own_experiments]
    if any(isinstance(e, Checkpoint) for e in own) and claim.where:
        return "a claim on a checkpoint reads all its runs (one, or one per draw): give no `where`"
    selections = [(claim.where, own)]
    if isinstance(claim, Paired) and claim.against == UNTRAINED and claim.against_in:
        return "against=UNTRAINED pairs each run with itself at step 0: give no against_in"
    if isinstance(claim, Paired) and claim.against != UNTRAINED:
        selections.append((claim.against, [paper.experiment(claim.against_in)] if claim.against_in else own))
    for selection, exps in selections:
        for key, value in selection.items():
            problem = next(filter(None, (key_problem(key, value, e.task) for e in exps)), "")
            if not problem and not any(runs_take(e, key, value) for e in exps):
                problem = (
                    f"{key}={override_value(value)} is not a value its experiments run ("
                    + "; ".join(f"{e.name}: {', '.join(map(override_value, e.values(key) or ()))}" for e in exps)
                    + ")"
                )
            if problem:
                return problem
    if isinstance(claim, Trend):
        problem = next(filter(None, (key_problem(claim.key, None, e.task) for e in own)), "")
        taken = {override_value(v) for e in own for v in (e.values(claim.key) or ("the default",))}
        if not problem and len(taken) < 3:
            problem = f"trend key {claim.key} takes fewer than 3 values in {', '.join(claim.own_experiments)}"
        return problem
    return ""


def runs_take(exp: Experiment, key: str, value) -> bool:
    """Whether some run of `exp` has key=value (a key the experiment does not set: its default, unknown here)."""
    values = exp.values(key)
    return values is None or override_value(value) in map(override_value, values)
