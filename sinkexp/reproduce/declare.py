"""The vocabulary a paper file declares itself in: experiments (experiment.py), claims, criteria.

    Value(name="softmax_sinks", kind="paper", statement="...", source="Thm. 1", paper_value="~1",
          experiment="one_layer", where={"attn.name": "softmax"},
          measure=final("sink_attn", 0, "non_trigger"), criterion=at_least(0.9))

Every field is named. A claim says what it is (`kind`: the paper's own claim, sinkexp's extension,
or a control; KINDS), and is one of three types, each with a criterion that means one thing:
- `Value`: the measure on each selected run;
- `Paired`: the measure on each selected run compared (difference or ratio) with the `against`
  run of the same seed and structure seed;
- `Trend`: per draw (seed, structure seed), Spearman's rho of the measure against `key`.
What decides its verdict (verdicts.py): `requires` (premises: earlier claims that must hold),
`forms` (the claim is that a phenomenon forms; failing, it is "not reached" unless the `reached`
claims show the size sufficed), `contrast` (claims on the same task that hold trained and fail
untrained: a claim that also holds untrained is evidence only beside them). Experiments and their
sizes per scale: experiment.py.

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
from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable

from sinkexp.evaluate.tables import METRICS
from sinkexp.reproduce.experiment import Checkpoint, Experiment, override_value
from sinkexp.reproduce.keys import key_problem


class DeclarationError(ValueError):
    """A paper declares something that does not exist; one line naming the claim and the key."""


@dataclass(frozen=True)
class Criterion:
    low: float = -math.inf
    high: float = math.inf

    def holds(self, value: float) -> bool:
        return self.low <= value <= self.high  # NaN fails

    def __str__(self) -> str:
        if math.isinf(self.high):
            return f">= {self.low:g}"
        if math.isinf(self.low):
            return f"<= {self.high:g}"
        return f"in [{self.low:g}, {self.high:g}]"


def at_least(x: float) -> Criterion:
    return Criterion(low=x)


def at_most(x: float) -> Criterion:
    return Criterion(high=x)


def between(low: float, high: float) -> Criterion:
    return Criterion(low, high)


@dataclass(frozen=True)
class Measure:
    """What a claim measures on one run: a description (printed with the claim), the function of a
    finished run (measures.py), and the metrics it reads (checked against the registry)."""

    describe: str
    of: Callable
    metrics: tuple[str, ...] = ()


@dataclass(frozen=True)
class Condition:
    """Which selected runs a claim counts: those whose measure meets the criterion (e.g. the task
    solved, as a theorem about solutions presupposes). The others are listed with the verdict, not
    counted either way."""

    measure: Measure
    criterion: Criterion

    def __str__(self) -> str:
        return f"{self.measure.describe} {self.criterion}"


KINDS = {
    "paper": "the source's statement, in its direction, with its figure",
    "extension": "a question sinkexp asks beyond the source (its own experiment, mitigation or trend)",
    "control": "a setting that cannot form the effect, run beside the ones that should",
}


@dataclass(frozen=True, kw_only=True)
class Claim:
    name: str  # short id, unique within the paper
    kind: str  # paper | extension | control (KINDS): counted apart in every report
    statement: str  # what the paper says (kind "paper") or what sinkexp asks, in one sentence
    source: str  # where: theorem, figure, table or notebook
    paper_value: str  # the source's figure, as the source states it
    experiment: str | tuple[str, ...]  # the experiment(s) whose runs `where` selects
    where: dict = field(default_factory=dict)  # settings the runs must have, e.g. {"attn.name": "softmax"}
    measure: Measure
    criterion: Criterion
    among: Condition | None = None  # count only the selected runs that meet it (the others are listed)
    # The three fields naming other claims take one name, several, or none; each reads as a tuple of names.
    requires: str | tuple[str, ...] = ()  # earlier claim(s) of the paper that must hold first (premises)
    forms: bool = False  # the claim is that a phenomenon forms (a sink, a spike, a solved task)
    reached: str | tuple[str, ...] = ()  # for `forms`: earlier claim(s) whose holding shows the size sufficed
    contrast: str | tuple[str, ...] = ()  # earlier claim(s) on the same task that hold, and fail untrained
    note: str = ""  # what the claim is, where it is not the paper's own

    def __post_init__(self) -> None:
        for name in ("requires", "reached", "contrast"):  # "x" -> ("x",), "" -> ()
            object.__setattr__(self, name, names(getattr(self, name)))

    @property
    def own_experiments(self) -> tuple[str, ...]:
        return (self.experiment,) if isinstance(self.experiment, str) else tuple(self.experiment)

    @property
    def experiments(self) -> tuple[str, ...]:
        """Every experiment the claim reads."""
        return self.own_experiments

    def describe(self) -> str:
        return self.measure.describe + self.counted()

    def counted(self) -> str:
        return (
            (f", among runs with {self.among}" if self.among else "")
            + (
                f", given that {' and '.join(self.requires)} hold{'s' * (len(self.requires) == 1)}"
                if self.requires
                else ""
            )
            + (f", beside {' and '.join(self.contrast)}" if self.contrast else "")
        )


@dataclass(frozen=True, kw_only=True)
class Value(Claim):
    """The criterion holds for the measure on every selected run."""


@dataclass(frozen=True, kw_only=True)
class Paired(Claim):
    """The criterion holds for measure(run) - measure(against run), or their ratio, on every
    selected run; the against run has the same seed and structure seed."""

    against: dict  # settings of the runs compared with
    against_in: str | None = None  # the experiment they come from (default: the claim's own)
    compare: str = "difference"  # "difference" or "ratio"

    @property
    def experiments(self) -> tuple[str, ...]:
        own = self.own_experiments
        return own + ((self.against_in,) if self.against_in and self.against_in not in own else ())

    def describe(self) -> str:
        return f"{self.measure.describe} (paired {self.compare} against {self.against}){self.counted()}"


@dataclass(frozen=True, kw_only=True)
class Trend(Claim):
    """The criterion holds for Spearman's rho of the measure against `key`, per draw."""

    key: str

    def describe(self) -> str:
        return f"Spearman rho of {self.measure.describe} against {self.key}{self.counted()}"


COMPARISONS = ("difference", "ratio")


def names(given: str | tuple[str, ...]) -> tuple[str, ...]:
    """A claim field naming other claims as a tuple: one name, several, or none ("" or ())."""
    return (given,) if isinstance(given, str) and given else tuple(given) if not isinstance(given, str) else ()


@dataclass(frozen=True, kw_only=True)
class Paper:
    name: str
    title: str
    experiments: tuple[Experiment | Checkpoint, ...]
    claims: tuple[Claim, ...]

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
    if claim.reached and not claim.forms:
        return "reached= is for a claim that a phenomenon forms (forms=True)"
    missing = [name for name in claim.experiments if name not in names]
    if missing:
        return f"experiment {missing[0]!r} is not declared; experiments: {', '.join(names)}"
    for other in claim.contrast:  # the same setting: a claim on runs of the same task
        theirs = {paper.experiment(e).task for e in paper.claim(other).own_experiments}
        mine = {paper.experiment(e).task for e in claim.own_experiments}
        if not theirs & mine:
            return (
                f"contrast={other!r} reads task {', '.join(sorted(theirs))}, not this claim's "
                f"({', '.join(sorted(mine))}); a contrast is a claim on the same task"
            )
    unknown = [
        m for m in (*claim.measure.metrics, *(claim.among.measure.metrics if claim.among else ())) if m not in METRICS
    ]
    if unknown:
        return f"metric {unknown[0]!r} is not in the registry (evaluate/tables.py); metrics: {', '.join(METRICS)}"
    if isinstance(claim, Paired) and claim.compare not in COMPARISONS:
        return f"compare={claim.compare!r}; choose one of: {', '.join(COMPARISONS)}"
    return ""


def selection_problem(paper: Paper, claim: Claim) -> str:
    """What is wrong with the settings a claim selects runs by, or its trend key ('' if nothing)."""
    own = [paper.experiment(n) for n in claim.own_experiments]
    if any(isinstance(e, Checkpoint) for e in own) and claim.where:
        return "a claim on a checkpoint selects its one run: give no `where`"
    selections = [(claim.where, own)]
    if isinstance(claim, Paired):
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
