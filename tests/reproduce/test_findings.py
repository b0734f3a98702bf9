"""A paper's generated findings table (Paper.findings): the ladder's rows read from its runs, and
reproduce --docs writing the table between its page's markers, nothing else on the page changed."""

from types import SimpleNamespace

import pandas as pd
from conftest import QUICK

from sinkexp.jobs.runner import run
from sinkexp.reproduce.papers.ladder import RUNGS, rung_table
from sinkexp.reproduce.write import FINDINGS, write_findings


def test_the_ladders_table_reads_each_rungs_runs(tmp_path, make_config):
    path = tmp_path / "ladder" / "defaults" / "lm" / "s0"
    run(make_config("task=lm", *QUICK, "train.steps=4", "eval.every=2", "seed=0"), path)
    lines = rung_table(tmp_path / "ladder").splitlines()
    assert len(lines) == 2 + len(RUNGS) and all(line.count("|") == 8 for line in lines)
    row = lines[2].split(" | ")
    summary = pd.read_json(path / "summary.json", typ="series")
    assert row[0] == "| `defaults`" and row[2] == f"{summary['loss']['all']:.3f}" and row[-1] == "0 of 1 |"
    assert all(line.endswith("| not run yet | | | | | |") for line in lines[3:])


def test_docs_get_the_table_between_their_markers_only(tmp_path):
    page = tmp_path / "docs" / "findings" / "p.md"
    page.parent.mkdir(parents=True)
    marked = "<!-- generated: sinkexp reproduce {} -->\n{}\n<!-- /generated -->\n"
    page.write_text("intro\n" + marked.format("p", "old table") + "middle\n" + marked.format("other", "kept"))
    paper = SimpleNamespace(name="p", findings=lambda folder: f"| table of {folder.name} |")
    write_findings([paper], tmp_path / "outputs", tmp_path / "docs")
    assert page.read_text() == "intro\n" + marked.format("p", "| table of p |") + "middle\n" + marked.format(
        "other", "kept"
    )
    assert (tmp_path / "outputs" / "p" / FINDINGS).read_text() == "| table of p |\n"
