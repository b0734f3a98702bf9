"""Claims and their criteria, the words of a paper file's `claims` (declare.py re-exports them):

    Value(name="softmax_sinks", kind="paper", statement="...", source="Thm. 1", paper_value="~1",
          experiment="one_layer", where={"attn.name": "softmax"},
          measure=final("sink_attn", 0, "non_trigger"), criterion=at_least(0.9))

Every field is named. A claim says what it is (`kind`: the paper's own claim, sinkexp's extension,
or a control; KINDS), and is one of three types, each with a criterion that means one thing:
- `Value`: the measure on each selected run;
- `Paired`: the measure on each selected run compared (difference, ratio, or ratio over the
  against runs' spread; COMPARISONS) with the `against` run of the same seed and structure seed;
- `Trend`: per draw (seed, structure seed), Spearman's rho of the measure against `key`.
What decides its verdict (verdicts.py): `requires` (premises: earlier claims that must hold),
`forms` (the claim is that a phenomenon forms; failing on every run, it is "not reached" unless
the `reached` claims show the size sufficed), `reached` (for a `forms` claim or a trend over arms
that may not have formed yet: earlier claims, forming by the same `route` (ROUTES), that held on
every run and formed by half of training there; verdicts.py), `contrast` (claims of the same
measure family, on runs of the same task and sizes, that hold trained and fail untrained: a claim
that also holds untrained, or whose untrained value is unknown, is evidence only beside them).
Each of the three takes one claim's name or several, and reads as a tuple of names.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

# Whose threshold a criterion is (claims.csv and results.md print it beside the bound): sinkexp's
# choice, a figure the source itself gives, or no magnitude at all, only the source's direction
# (a difference <= 0, a ratio >= 1). A magnitude a source read at its own training length is not
# applied at another: such a claim is stated in the source's direction (docs/reproduce.md, "Thresholds").
THRESHOLDS = {"sinkexp": "sinkexp's", "source": "the source's", "direction": "the source's direction"}


@dataclass(frozen=True)
class Criterion:
    low: float = -math.inf
    high: float = math.inf
    by: str = "sinkexp"  # whose threshold (THRESHOLDS)

    def holds(self, value: float) -> bool:
        return self.low <= value <= self.high  # NaN fails

    def bound(self) -> str:
        if math.isinf(self.high):
            return f">= {self.low:g}"
        if math.isinf(self.low):
            return f"<= {self.high:g}"
        return f"in [{self.low:g}, {self.high:g}]"

    def __str__(self) -> str:
        return f"{self.bound()} ({THRESHOLDS.get(self.by, self.by)})"


def at_least(x: float, by: str = "sinkexp") -> Criterion:
    return Criterion(low=x, by=by)


def at_most(x: float, by: str = "sinkexp") -> Criterion:
    return Criterion(high=x, by=by)


def between(low: float, high: float, by: str = "sinkexp") -> Criterion:
    return Criterion(low, high, by)


@dataclass(frozen=True)
class Measure:
    """What a claim measures on one run: a description (printed with the claim), the function of a
    finished run (measures.py), the metrics it reads (checked against the registry), and its family:
    the quantity it reads, by which a contrast is matched to it (its metrics where it reads some; a
    name for a measure computed from the model or the attention maps: "intervention", ...).
    `detail`, where given, says in a phrase what one run's value is made of (claims.csv's detail:
    e.g. a pooled peak's two largest keys, where a sink split over them)."""

    describe: str
    of: Callable
    metrics: tuple[str, ...] = ()
    family: tuple[str, ...] = ()
    detail: Callable | None = None

    @property
    def families(self) -> set[str]:
        return set(self.family or self.metrics)


@dataclass(frozen=True)
class Condition:
    """Which selected runs a claim counts: those whose measure meets the criterion (e.g. the task
    solved, as a theorem about solutions presupposes). The others are listed with the verdict, not
    counted either way."""

    measure: Measure
    criterion: Criterion

    def __str__(self) -> str:
        return f"{self.measure.describe} {self.criterion.bound()}"


# How a phenomenon forms, sinkexp's words: a claim naming `reached` evidence declares its route, and
# the evidence counts only from claims that form by the same one (declare.py refuses another), so a
# variant that must form its sink another way borrows nothing (docs/reproduce.md, "The verdict").
ROUTES = {
    "bos_softmax": "softmax heads find position 0 by its token, BOS, the same in every sequence: layer 0's "
    "attention input (the normalised embedding, before a pre-norm or a sandwich norm alike) already marks it",
    "bos_sigmoid_norm": "normalised-sigmoid heads on BOS: sigmoid weights over their sum put most weight on "
    "BOS only where every other key's sigmoid is near 0 (their logits far below 0), not, as softmax, where "
    "they are below BOS's",
    "first_position": "no token marks position 0 (no BOS): RoPE gives a layer-0 head relative positions only, "
    "so no layer-0 head can find position 0; a sink there needs an earlier layer's output to mark it",
    "noop_sink_token": "the one head's no-op on the dedicated sink token: queries that must not move attend "
    "to it (the causal damping form, at any gamma that needs a no-op)",
    "noop_position_0": "the one head's no-op on position 0, an ordinary token (the dynamics form, at any "
    "gamma that needs a no-op)",
    "hub": "layer 2 routes every query to the hub j*, whose value it broadcasts (with or without a global "
    "pathway beside attention)",
}

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
    reached: str | tuple[str, ...] = ()  # earlier claim(s) whose holding early shows the size sufficed
    contrast: str | tuple[str, ...] = ()  # earlier claim(s), same measure family and runs, that fail untrained
    route: str = ""  # how its phenomenon forms (ROUTES): needed with `reached`, and by the claims it names
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


UNTRAINED = "untrained"  # a Paired claim's `against`: each run against itself at step 0


@dataclass(frozen=True, kw_only=True)
class Paired(Claim):
    """The criterion holds for measure(run) compared with measure(against run) (COMPARISONS: their
    difference, their ratio, or the ratio over or beyond the against runs' spread) on every selected
    run; the against run has the same seed and structure seed, or is the run itself untrained
    (against=UNTRAINED: what training moved the measure by)."""

    against: dict | str  # settings of the runs compared with, or UNTRAINED
    against_in: str | None = None  # the experiment they come from (default: the claim's own)
    compare: str = "difference"  # COMPARISONS

    @property
    def experiments(self) -> tuple[str, ...]:
        own = self.own_experiments
        return own + ((self.against_in,) if self.against_in and self.against_in not in own else ())

    def describe(self) -> str:
        against = "the same run untrained (step 0)" if self.against == UNTRAINED else self.against
        return f"{self.measure.describe} (paired {self.compare} against {against}){self.counted()}"


@dataclass(frozen=True, kw_only=True)
class Trend(Claim):
    """The criterion holds for Spearman's rho of the measure against `key`, per draw."""

    key: str

    def describe(self) -> str:
        return f"Spearman rho of {self.measure.describe} against {self.key}{self.counted()}"


COMPARISONS = {
    "difference": "measure(run) - measure(its draw's against run)",
    "ratio": "measure(run) / measure(its draw's against run)",
    # the ratio over the against arm's own spread, max / min over its draws: <= 1 when a run is no
    # further from its draw's against run than the against runs are from one another
    "ratio over spread": "(measure(run) / measure(its draw's against run)) / (max / min of the against runs)",
    # a direction beyond that spread, for a claim whose source gives no magnitude: a rise (criterion
    # >= 1) is discounted by the spread, a fall (<= 1) by its inverse, so either passes 1 only where the
    # run moved further in the source's direction than the against runs are from one another
    "ratio beyond spread": "(measure(run) / measure(its draw's against run)) / (max / min of the against runs) "
    "for a rise, x (max / min) for a fall",
}


def names(given: str | tuple[str, ...]) -> tuple[str, ...]:
    """A claim field naming other claims as a tuple: one name, several, or none ("" or ())."""
    return (given,) if isinstance(given, str) and given else tuple(given) if not isinstance(given, str) else ()
