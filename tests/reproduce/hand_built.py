"""Hand-built runs for the verdict tests (test_verdicts.py, test_reach_evidence.py): each run's
measure is a setting (`value`), trained and untrained (step 0) set by hand, and a Curve run's value
at every evaluated step."""

from pathlib import Path

import pandas as pd

from sinkexp.reproduce.declare import Measure, Value
from sinkexp.reproduce.finished import FinishedRun
from sinkexp.reproduce.judge import judge
from sinkexp.reproduce.verdicts import decide

SEEDS = (0, 1, 2)
VALUE = Measure("value", lambda run: run.settings["value"])


def with_initial(run: FinishedRun, untrained: float) -> FinishedRun:
    """`run` whose step-0 view reads `untrained`."""
    run.__dict__["initial"] = FinishedRun(
        run.path, {**run.settings, "value": untrained}, pd.DataFrame(), experiment="e", untrained=True
    )
    return run


def runs(arm: str, trained, untrained, **settings) -> list[FinishedRun]:
    """Three runs of one arm whose measure is `trained` (one value, or one per seed), `untrained` at step 0."""
    trained = trained if isinstance(trained, (tuple, list)) else (trained,) * len(SEEDS)
    untrained = untrained if isinstance(untrained, (tuple, list)) else (untrained,) * len(SEEDS)
    return [
        with_initial(
            FinishedRun(
                Path(f"{arm}-{settings}-s{seed}"),
                {"seed": seed, "arm": arm, "value": value, **settings},
                pd.DataFrame(),
                experiment="e",
            ),
            start,
        )
        for seed, value, start in zip(SEEDS, trained, untrained)
    ]


def claim(name, arm, criterion, kind=Value, **fields):
    """A claim of `kind` on the runs of `arm`, reading VALUE."""
    chosen = dict(statement="-", source="-", paper_value="-", experiment="e", measure=VALUE, criterion=criterion)
    return kind(name=name, kind="paper", where={"arm": arm}, **{**chosen, **fields})


def verdicts(claims, arms, extra=()) -> dict[str, tuple[str, str]]:
    """Each claim's (verdict, why) on hand-built arms: {arm: (trained, untrained)}, and `extra` runs."""
    all_runs = [run for arm, values in arms.items() for run in runs(arm, *values)] + list(extra)
    table = pd.DataFrame(
        {"run": [str(r.path) for r in all_runs], "status": "done", "arm": [r.settings["arm"] for r in all_runs]}
    )
    done = {}
    for c in claims:
        result = judge(c, all_runs, table)
        result.verdict, result.why = decide(c, result, done)
        done[c.name] = result
    return {name: (r.verdict, r.why) for name, r in done.items()}


class Curve(FinishedRun):
    """A hand-built run whose value at each evaluated step is given (settings["curve"]: {step: value})."""

    def steps(self):
        return sorted(self.settings["curve"])

    def at(self, step):
        return FinishedRun(self.path, {**self.settings, "value": self.settings["curve"][step]}, pd.DataFrame())


def curve_run(seed: int, curve: dict, arm: str = "curve") -> Curve:
    """A run of `arm` whose value follows `curve` ({step: value}; step 0 is its untrained value)."""
    settings = {"seed": seed, "arm": arm, "value": curve[max(curve)], "curve": curve}
    run = Curve(Path(f"{arm}-s{seed}"), settings, pd.DataFrame(), experiment="e")
    return with_initial(run, curve[0])
