"""Slow scientific checks: every paper's claims hold at the CPU sizes, checked by `sinkexp reproduce`
itself (the criteria live once, in sinkexp/reproduce/papers/).

Run with `pytest -m slow` (about as long as `sinkexp reproduce all`; see README). Each paper's runs
go to a temporary directory, so nothing is reused from outputs/.
"""
import pytest

from sinkexp.reproduce import reproduce
from sinkexp.reproduce.papers import PAPERS

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("paper", PAPERS.values(), ids=list(PAPERS))
def test_every_claim_of_the_paper_holds(paper, tmp_path):
    rows = reproduce([paper], [], root=tmp_path, command=f"pytest: reproduce {paper.name}")
    failed = rows[rows["verdict"] != "PASS"]
    assert failed.empty, "\n" + failed[["claim", "values", "criterion", "problem"]].to_string()
