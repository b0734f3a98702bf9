"""Verdicts at several scales (reproduce/scales.py): claims.csv keeps a row per claim and scale, the
headline counts each claim at the largest scale run with the CPU counts beside, results.md shows the
scales side by side, --docs replaces only the same paper's rows at the same scale, and --list shows
the verdicts docs/claims.csv records."""

import pandas as pd
from plumbing import plumbing_paper

from sinkexp.reproduce.command import decided, list_papers, recorded_verdicts
from sinkexp.reproduce.scales import at_largest, declarations, judged_at, trained_at, with_scale
from sinkexp.reproduce.write import CLAIMS, headline, results_page, write_docs


def two_scales(plumbed) -> pd.DataFrame:
    """The plumbing paper's rows at cpu, and its first claim again at reach with another verdict."""
    cpu = plumbed[1].reset_index()
    assert (cpu["scale"] == "cpu").all()  # reproduce writes the column
    reach = cpu.iloc[:1].assign(scale="reach", verdict="holds" if cpu["verdict"].iloc[0] != "holds" else "not reached")
    return pd.concat([cpu, reach], ignore_index=True)


def test_the_largest_scale_run_counts_and_the_cpu_counts_stand_beside(plumbed):
    rows = two_scales(plumbed)
    largest = at_largest(rows)
    first = rows["claim"].iloc[0]
    assert len(largest) == len(plumbed[1]) and largest.set_index("claim").at[first, "scale"] == "reach"
    line = headline(rows)
    assert "each claim at the largest scale it was run at (at the CPU sizes alone:" in line
    assert headline(rows[rows["scale"] == "cpu"]) == headline(rows[rows["scale"] == "cpu"].drop(columns="scale"))
    page = results_page(rows)
    assert "| claim | kind | at cpu | at reach |" in page and "### scale=reach" in page
    reach_verdict = rows["verdict"].iloc[-1]
    assert f"| {first} | {rows['kind'].iloc[0]} | {rows['verdict'].iloc[0]} | {reach_verdict} |" in page


def test_results_name_each_declaration_with_the_scales_whose_rows_answer_it(plumbed):
    rows = two_scales(plumbed)
    paper, digest = rows["paper"].iloc[0], rows["declaration"].iloc[0]
    assert declarations(rows) == f"{paper} {digest}"
    later = rows.assign(declaration=rows["declaration"].where(rows["scale"] == "cpu", "0000beef"))
    other = later.iloc[:1].assign(paper="other", scale="pretrained")
    both = pd.concat([later, other], ignore_index=True)
    assert declarations(both) == f"{paper} {digest} (cpu), 0000beef (reach); other {digest}"
    assert f"Declarations: {paper} {digest} (cpu), 0000beef (reach); other {digest}. Runs read:" in results_page(both)


def test_docs_replace_only_the_same_papers_rows_at_the_same_scale(plumbed, tmp_path):
    rows = two_scales(plumbed)
    docs = tmp_path / "docs"
    docs.mkdir()
    old = rows[rows["scale"] == "cpu"].drop(columns="scale").assign(paper="other")  # a table without the column
    rows[rows["scale"] == "cpu"].drop(columns="scale").pipe(lambda r: pd.concat([r, old])).to_csv(
        docs / CLAIMS, index=False
    )
    write_docs(docs, rows[rows["scale"] == "reach"])
    written = with_scale(pd.read_csv(docs / CLAIMS))
    assert written.groupby(["paper", "scale"]).size().to_dict() == {
        ("other", "cpu"): len(old),
        ("plumbing", "cpu"): len(old),
        ("plumbing", "reach"): 1,
    }
    write_docs(docs, rows[rows["scale"] == "cpu"].assign(verdict="not run"))  # the cpu rows again: replaced
    written = with_scale(pd.read_csv(docs / CLAIMS))
    assert (written[(written["paper"] == "plumbing") & (written["scale"] == "cpu")]["verdict"] == "not run").all()
    assert len(written[written["scale"] == "reach"]) == 1 and len(written) == 2 * len(old) + 1


def test_a_reach_run_judges_only_the_claims_whose_experiments_have_a_reach_size():
    from dataclasses import replace

    from sinkexp.reproduce.declare import Paper

    paper = plumbing_paper()
    tiny = paper.experiments[0]
    assert judged_at(paper, "reach") == set() and judged_at(paper, "cpu") == {"possible", "impossible", "paired"}
    sized = replace(tiny, name="sized", reach={"train.steps": 40})
    both = Paper(
        name="p",
        title="t",
        experiments=(tiny, sized),
        claims=(
            *paper.claims,
            replace(paper.claims[1], name="at_reach", experiment="sized"),
        ),
    )
    assert judged_at(both, "reach") == {"at_reach"} and len(judged_at(both, "paper")) == 4
    assert trained_at(both, "reach") == {"sized"} and trained_at(both, "cpu") == {"tiny", "sized"}


def test_a_reach_run_trains_the_experiments_its_judged_claims_name_through_premises_and_contrasts(tmp_path):
    from dataclasses import replace

    from plumbing import claim

    from sinkexp.reproduce.declare import Paper
    from sinkexp.reproduce.execute import plan_experiments
    from sinkexp.reproduce.papers import PAPERS

    paper = plumbing_paper()
    tiny, possible = paper.experiments[0], paper.claims[0]
    sized, other, unused = (replace(tiny, name=name, reach={"train.steps": 4}) for name in ("sized", "other", "unused"))
    premise = replace(possible, name="premise", experiment="tiny")  # tiny has no reach size: trained at the CPU size
    contrast = replace(possible, name="contrast", experiment="other")
    judged = claim(
        name="judged",
        experiment="sized",
        measure=possible.measure,
        criterion=possible.criterion,
        requires="premise",
        contrast="contrast",
    )
    both = Paper(
        name="p",
        title="t",
        experiments=(tiny, sized, other, unused),
        claims=(premise, contrast, replace(possible, name="alone", experiment="unused"), judged),
    )
    assert judged_at(both, "reach") == {"contrast", "judged", "alone"}
    assert trained_at(both, "reach") == {"tiny", "sized", "other", "unused"}
    unsized = replace(unused, reach={})
    lone = replace(both, experiments=(tiny, sized, other, unsized), claims=(premise, contrast, judged))
    assert trained_at(lone, "reach") == {"tiny", "sized", "other"}  # unused: no reach size, read by no judged claim
    assert set(plan_experiments(decided(["scale=reach"], [lone], root=tmp_path, pack=False))) == {
        ("p", "tiny"),
        ("p", "sized"),
        ("p", "other"),
    }
    assert (
        len(plan_experiments(decided([], [lone], root=tmp_path, pack=False))) == 4
    )  # at the CPU sizes every experiment trains
    assert trained_at(PAPERS["sun2026"], "reach") == {"lm_norms", "lm_gated"}  # docs/reproduce.md, Scales


def test_list_shows_the_recorded_verdicts_per_scale(plumbed, tmp_path):
    rows = two_scales(plumbed)
    rows.to_csv(tmp_path / CLAIMS, index=False)
    first = rows["claim"].iloc[0]
    recorded = recorded_verdicts(tmp_path / CLAIMS)
    assert recorded["plumbing", first] == f"cpu {rows['verdict'].iloc[0]}, reach {rows['verdict'].iloc[-1]}"
    listed = list_papers({"plumbing": plumbing_paper()}, tmp_path / "none", tmp_path / CLAIMS)
    assert f"not run yet (recorded: cpu {rows['verdict'].iloc[0]}, reach" in listed
    assert recorded_verdicts(tmp_path / "missing.csv") == {}


def test_results_md_names_what_the_runs_recorded_after_the_csv_round_trip(plumbed, tmp_path):
    rows = two_scales(plumbed)
    recorded = sorted({part for cell in rows["threads"] for part in str(cell).split("; ")})
    assert recorded and "None" not in recorded  # meta.json's device.torch_threads, "1" on the CPU
    write_docs(tmp_path, rows)  # read back from claims.csv, where a column of "1" is a column of 1.0
    assert f"- torch threads: {', '.join(recorded)}\n" in (tmp_path / "results.md").read_text()


def test_the_pretrained_scale_judges_the_checkpoints_claims_and_trains_nothing():
    """scale=pretrained judges the claims on checkpoints alone (the named ones too, not run without
    their weights) and trains nothing; a checkpoint sinkexp ships is judged there only."""
    from dataclasses import replace

    from sinkexp.reproduce.declare import Checkpoint, Paper
    from sinkexp.reproduce.papers import PAPERS
    from sinkexp.reproduce.scales import measured_at

    paper = plumbing_paper()
    named, shipped = Checkpoint(name="named", model="org/named"), Checkpoint(name="shipped", model="smollm2-135m")
    both = Paper(
        name="p",
        title="t",
        experiments=(*paper.experiments, named, shipped),
        claims=(
            *paper.claims,
            replace(paper.claims[0], name="on_named", experiment="named", where={}),
            replace(paper.claims[0], name="on_shipped", experiment="shipped", where={}),
        ),
    )
    assert judged_at(both, "pretrained") == {"on_named", "on_shipped"} and trained_at(both, "pretrained") == set()
    assert judged_at(both, "cpu") == {"possible", "impossible", "paired", "on_named"}  # shipped: pretrained only
    assert [exp.name for exp in measured_at(both, "pretrained")] == ["named", "shipped"]
    assert [exp.name for exp in measured_at(both, "cpu")] == ["named"]
    for name in ("gu2025", "sun2026", "barbero2025", "guo2024"):  # the shipped models' claims, at pretrained only
        real = PAPERS[name]
        on_shipped = {c.name for c in real.claims if c.name.startswith(("smollm2_", "gemma3_"))}
        assert on_shipped and on_shipped <= judged_at(real, "pretrained")
        assert not on_shipped & (judged_at(real, "cpu") | judged_at(real, "reach"))


def test_the_headline_counts_the_pretrained_rows_and_names_their_models(plumbed):
    rows = two_scales(plumbed)
    pretrained = rows.iloc[:2].assign(scale="pretrained", claim=["on_smol", "on_named"], verdict=["holds", "not run"])
    pretrained = pretrained.assign(model=["smollm2-135m", "org/named"], why=["", "needs the weights of org/named"])
    line = headline(pd.concat([rows.assign(model=""), pretrained], ignore_index=True))
    assert line.endswith(
        f" On pre-trained checkpoints (scale=pretrained; smollm2-135m): {pretrained['kind'].iloc[0]} claims: 1 hold, "
        "0 contradicted, 0 not reached, 0 cannot fail; "
        "1 more on named checkpoints whose weights are not here (not run)."
    )
    assert "pre-trained" not in headline(rows)
