"""A claim's verdict from its values (judge.py: on every run it selects, at the end of training and
untrained, step 0 of the same runs), and which of the verdicts that makes it (docs/reproduce.md,
"The verdict").

    holds         every selected run meets the criterion, and the criterion could have failed: it
                  does not also hold untrained, or a named contrast claim holds and fails untrained
    contradicted  the effect the claim is about formed, and the claim's direction did not hold on
                  some run: one run that misses the criterion decides, whatever the mean says, for
                  a claim that a phenomenon forms too once it formed on another run, or on that run
                  at an earlier step, or once its `reached` evidence shows the size sufficed
    not reached   what the claim needs did not form at the size run (a premise failed; a claim
                  that a phenomenon forms failed on every run with nothing showing the size
                  sufficed; no run solved the task it is counted on): the claim was not tested
    cannot fail   the criterion also holds on the untrained model: the runs test nothing
    not run       the claim could not be measured (a run did not finish, a value is missing), or
                  it passed while its untrained value is unknown (NaN, not measured) and no contrast
                  shows that it could have failed

The size sufficed for a claim (a `forms` claim failing on every run, or a trend that misses, over
arms that may not have formed yet) only where each of its `reached` claims, forming by the same
route (declare.py checks it), held on every run and formed on each by FORMED_BY of its training:
its criterion held at every evaluated step from a step at most FORMED_BY x the last one. The arm
that missed then had at least as many steps again as the evidence needed; a later or an unread
formation leaves the claim not reached (nothing tells later from never).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from sinkexp.reproduce.claims import Claim
from sinkexp.reproduce.declare import Paper
from sinkexp.reproduce.finished import MissingValue
from sinkexp.reproduce.judge import Result, formed_at, judge, load_runs

VERDICTS = ("holds", "contradicted", "not reached", "cannot fail", "not run")
FORMED_BY = 0.5  # sinkexp's: the share of its training by which evidence that a size suffices formed


def decide(claim: Claim, result: Result, done: dict[str, Result]) -> tuple[str, str]:
    """(verdict, why) of a measured claim, given the verdicts of the earlier claims it names."""
    unmet = [p for p in claim.requires if done[p].verdict != "holds"]
    if unmet:
        verdict = done[unmet[0]].verdict
        if verdict == "not run":  # an unmeasured premise leaves this claim unmeasured, for the same reason
            return "not run", f"{done[unmet[0]].why} (for its premise {unmet[0]})"
        return "not reached", f"its premise {unmet[0]} {'' if verdict == 'cannot fail' else 'was '}{verdict}"
    if result.problem:
        return ("not reached" if result.unsolved else "not run"), result.problem
    if result.passed:
        beside = [c for c in claim.contrast if done[c].verdict == "holds" and done[c].passed_initially is False]
        if result.passed_initially is None:  # nothing shows the criterion could have failed, but a contrast may
            unknown = result.initial_problem or "its untrained value is NaN"
            if beside:
                return "holds", f"{unknown}, but beside {beside[0]}, which holds only trained"
            return "not run", f"{unknown}, and no contrast stands in for the check that it could fail"
        if result.passed_initially:
            if beside:
                return "holds", f"untrained too, but beside {beside[0]}, which holds only trained"
            return "cannot fail", "its criterion holds on the untrained model too (step 0)"
        return "holds", ""
    return missed(claim, result, done)


def missed(claim: Claim, result: Result, done: dict[str, Result]) -> tuple[str, str]:
    """(verdict, why) of a claim that some selected run misses: contradicted, the same for every
    kind, except a claim that a phenomenon forms which failed on every run, at every evaluated step,
    or a trend naming `reached` evidence, where the size did not show it sufficed (sufficed): not
    reached (too small, too soon and absent look alike)."""
    misses = result.failing
    runs = "misses it on " + ", ".join(f"{label} ({value:.4g}{lost(result, label)})" for label, value in misses.items())
    if not claim.forms and not claim.reached:
        return "contradicted", runs
    if claim.forms and len(misses) < len(result.values):
        return "contradicted", f"formed on {len(result.values) - len(misses)} of {len(result.values)}; {runs}"
    if claim.forms and result.earlier:
        return "contradicted", f"formed, then was lost; {runs}"
    enough, evidence = sufficed(claim, done)
    if enough:
        return "contradicted", f"{'did not form' if claim.forms else 'missed'} although {evidence}; {runs}"
    return "not reached", f"{evidence}; {runs}"


def sufficed(claim: Claim, done: dict[str, Result]) -> tuple[bool, str]:
    """Whether the claim's `reached` evidence shows the size sufficed (the module's rule), and why."""
    if not claim.reached:
        route = f", and no earlier claim of its route ({claim.route}) shows the size sufficed" if claim.route else ""
        return False, f"it did not form at the size run{route}; nothing here tells too small from absent"
    spans = []  # (step it formed from, last step) of every evidence run
    for name in claim.reached:
        evidence = done[name]
        if evidence.verdict != "holds":
            return False, f"its evidence {name} {evidence.verdict}; nothing here tells too small from absent"
        try:
            formed = {run.label: (formed_at(evidence.claim, run), run.steps()[-1]) for run in evidence.runs}
        except MissingValue as err:
            return False, f"when {name} formed cannot be read ({err}); nothing here tells later from never"
        late = {label: span for label, span in formed.items() if span[0] is None or span[0] > FORMED_BY * span[1]}
        if late:
            label, (step, last) = next(iter(late.items()))
            return False, (
                f"{name} formed later than {FORMED_BY:g} of training on {', '.join(late)} ({label}: from step "
                f"{step} of {last}); nothing here tells later from never"
            )
        spans += formed.values()
    steps = sorted(step for step, _ in spans)
    return True, (
        f"{' and '.join(claim.reached)} formed by the same route ({claim.route}) by {FORMED_BY:g} of training "
        f"on every run (from steps {steps[0]}-{steps[-1]} of {max(last for _, last in spans)})"
    )


def lost(result: Result, label: str) -> str:
    """', met at step S (value)' for a run that met the criterion earlier and lost it by the end."""
    if label not in result.earlier:
        return ""
    step, value = result.earlier[label]
    return f", met at step {step}: {value:.4g}"


def check_claims(paper: Paper, root: Path, planned: dict | None = None, missing: dict | None = None) -> list[Result]:
    """Every claim of `paper` on the runs below root/<paper>/ (those `planned`, when given), each
    with its verdict (claims name only earlier claims, so one pass in order decides them all).
    `missing`: (paper, experiment) -> why its runs are not here (a checkpoint's absent weights)."""
    loaded = {
        exp.name: load_runs(root / paper.name / exp.name, planned and planned.get((paper.name, exp.name)))
        for exp in paper.experiments
    }
    absent = {exp: why for (name, exp), why in (missing or {}).items() if name == paper.name}
    results: dict[str, Result] = {}
    for claim in paper.claims:
        runs = [run for name in claim.experiments for run in loaded[name][0]]
        table = pd.concat([loaded[name][1] for name in claim.experiments], ignore_index=True)
        why = next((absent[name] for name in claim.experiments if name in absent), "")
        result = Result(claim, problem=why) if why else judge(claim, runs, table)
        result.verdict, result.why = decide(claim, result, results)
        results[claim.name] = result
    return list(results.values())
