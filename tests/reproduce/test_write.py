"""What reproduce writes into the repository (reproduce/write.py): docs/results.md and the README
headline are what docs/claims.csv gives, every declared claim has its row there (else one sentence
names the command that writes it), and `--docs` replaces only the papers it ran."""

from pathlib import Path

import pandas as pd
import pytest
from plumbing import claim, plumbing_paper

from sinkexp.reproduce import main
from sinkexp.reproduce.declare import Paper, at_least
from sinkexp.reproduce.papers import PAPERS
from sinkexp.reproduce.scales import unrecorded
from sinkexp.reproduce.write import headline, read_claims, results_page, write_docs

REPO = Path(__file__).parents[2]


def test_the_committed_results_page_and_headline_are_what_claims_csv_gives():
    rows = read_claims(REPO / "docs" / "claims.csv")
    said = unrecorded(rows, list(PAPERS.values()))  # a claim declared since the last `reproduce --docs`
    if said:
        pytest.fail(said, pytrace=False)
    assert (REPO / "docs" / "results.md").read_text() == results_page(rows)
    assert headline(rows) in (REPO / "README.md").read_text()


def test_a_claim_without_its_row_is_named_with_the_command_that_writes_it(plumbed):
    rows = pd.read_csv(plumbed[0] / "plumbing" / "claims.csv")
    paper = plumbing_paper()
    assert unrecorded(rows, [paper]) == ""
    grown = Paper(
        name=paper.name,
        title=paper.title,
        experiments=paper.experiments,
        claims=(*paper.claims, claim(measure=paper.claims[0].measure, criterion=at_least(0))),
    )
    assert unrecorded(rows, [grown]) == (
        "docs/claims.csv has no row for plumbing/c: `sinkexp reproduce plumbing --docs docs` runs their "
        "experiments and writes their rows."
    )
    shrunk = Paper(name=paper.name, title=paper.title, experiments=paper.experiments, claims=paper.claims[1:])
    assert unrecorded(rows, [shrunk]) == (
        "docs/claims.csv has rows for the undeclared plumbing/possible: `sinkexp reproduce plumbing --docs docs` "
        "rewrites their papers' rows."
    )
    assert unrecorded(rows.assign(scale="reach"), [paper]).startswith("docs/claims.csv has no row for plumbing/")


def test_docs_are_regenerated_from_claims_csv_and_only_the_headline_changes(plumbed, tmp_path, capsys):
    readme = tmp_path / "README.md"
    readme.write_text("intro\n<!-- results-headline: generated -->\nold\n<!-- /results-headline -->\nrest\n")
    rows = pd.read_csv(plumbed[0] / "plumbing" / "claims.csv")
    write_docs(tmp_path / "docs", rows)
    text = readme.read_text()
    assert text.startswith(
        "intro\n<!-- results-headline: generated -->\n"
        "**paper claims: 0 hold, 1 contradicted, 0 not reached, 2 cannot fail** (paper claims by "
        "paper: plumbing 0 hold, 1 contradicted, 0 not reached, 2 cannot fail)."
    )
    assert text.endswith("\n<!-- /results-headline -->\nrest\n") and "\nold\n" not in text
    page = (tmp_path / "docs" / "results.md").read_text()
    assert "| plumbing | impossible |" in page and page == results_page(read_claims(tmp_path / "docs" / "claims.csv"))
    (tmp_path / "docs" / "results.md").unlink()
    assert main(["--docs", str(tmp_path / "docs")]) == 0 and (tmp_path / "docs" / "results.md").read_text() == page


def test_docs_for_one_paper_replace_only_that_papers_rows(plumbed, tmp_path):
    rows = pd.read_csv(plumbed[0] / "plumbing" / "claims.csv")
    other = rows.assign(paper="other", verdict="stale")
    write_docs(tmp_path, pd.concat([other, rows.assign(verdict="stale")], ignore_index=True))
    write_docs(tmp_path, rows)  # plumbing again: its rows replaced, other's kept
    merged = pd.read_csv(tmp_path / "claims.csv")
    assert list(merged["paper"]) == ["other"] * 3 + ["plumbing"] * 3
    assert list(merged["verdict"]) == ["stale"] * 3 + list(rows["verdict"])
