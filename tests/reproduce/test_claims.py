"""Slow scientific checks: a rerun of each paper at its default (CPU) size gives the verdicts
docs/claims.csv records at scale `cpu`, verdict for verdict, with every per-run value within the
cross-machine tolerance (docs/reproduce.md, "The verdict"); so the test fails exactly when a result
moves.

Run with `pytest -m slow -n 0` (about as long as `sinkexp reproduce all`; see README). Each paper's
runs go to a temporary directory, so nothing is reused from outputs/.
"""

import math
from pathlib import Path

import pandas as pd
import pytest

from sinkexp.reproduce import reproduce
from sinkexp.reproduce.command import decided
from sinkexp.reproduce.papers import PAPERS

COMMITTED = Path(__file__).parents[2] / "docs" / "claims.csv"
RTOL, ATOL = 0.05, 1e-3  # another machine or thread count moves chaotic runs in their 2nd-3rd digit


def per_run(values) -> dict[str, float]:
    """claims.csv's `values` cell ("s0/t1=0.98 s1/t0=0.97") as {run label: value}."""
    return (
        {label: float(value) for label, value in (item.split("=") for item in str(values).split())}
        if isinstance(values, str)
        else {}
    )


def moved(rerun: pd.Series, committed: pd.Series) -> str:
    """'' when a claim's rerun agrees with its committed row, else what moved."""
    if rerun["verdict"] != committed["verdict"]:
        return f"verdict {committed['verdict']} -> {rerun['verdict']} ({rerun['why']})"
    now, then = per_run(rerun["values"]), per_run(committed["values"])
    if now.keys() != then.keys():
        return f"runs {sorted(then)} -> {sorted(now)}"
    off = [
        label
        for label in now
        if not math.isclose(now[label], then[label], rel_tol=RTOL, abs_tol=ATOL)
        and not (math.isnan(now[label]) and math.isnan(then[label]))
    ]
    return "values " + ", ".join(f"{label} {then[label]:.4g} -> {now[label]:.4g}" for label in off) if off else ""


@pytest.mark.slow
@pytest.mark.parametrize("paper", PAPERS.values(), ids=list(PAPERS))
def test_a_rerun_gives_the_committed_verdicts(paper, tmp_path):
    rows = reproduce(decided([], [paper], root=tmp_path), command=f"pytest: reproduce {paper.name}").set_index("claim")
    committed = pd.read_csv(COMMITTED)
    committed = committed[(committed["paper"] == paper.name) & (committed["scale"] == "cpu")].set_index("claim")
    assert set(rows.index) == set(committed.index), "docs/claims.csv does not hold this declaration's claims"
    changes = {claim: moved(rows.loc[claim], committed.loc[claim]) for claim in rows.index}
    changes = {claim: change for claim, change in changes.items() if change}
    assert not changes, "\n" + "\n".join(f"{claim}: {change}" for claim, change in changes.items())


def test_the_comparison_sees_a_moved_verdict_and_a_moved_value():
    row = {"verdict": "holds", "why": "", "values": "s0=0.95 s1=0.97"}
    assert moved(pd.Series(row), pd.Series(row)) == ""
    contradicted = moved(pd.Series({**row, "verdict": "contradicted"}), pd.Series(row))
    assert contradicted.startswith("verdict holds -> contradicted")
    assert moved(pd.Series({**row, "values": "s0=0.95 s1=0.90"}), pd.Series(row)) == "values s1 0.97 -> 0.9"
    assert moved(pd.Series({**row, "values": "s0=0.951 s1=0.97"}), pd.Series(row)) == ""  # within the tolerance
    assert moved(pd.Series({**row, "values": "s0=0.95"}), pd.Series(row)) == "runs ['s0', 's1'] -> ['s0']"
