"""Claims judged on the plumbing paper's runs (tests/plumbing.py) and on hand-built runs: what a
claim selects, pairs and ranks, the values it reads, the verdict with its why; and what reproduce
writes from them (--list; docs/results.md and the README headline: test_write.py)."""

import math
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from plumbing import claim, plumbing_paper

from sinkexp.analysis.interventions import run_interventions
from sinkexp.analysis.load import load_run
from sinkexp.reproduce import last_verdicts, reproduce
from sinkexp.reproduce.command import decided
from sinkexp.reproduce.declare import Condition, Measure, Paired, Paper, Trend, at_least, at_most, between
from sinkexp.reproduce.finished import FinishedRun
from sinkexp.reproduce.judge import judge, load_runs, selects, spearman
from sinkexp.reproduce.measures import final, intervention
from sinkexp.reproduce.papers import PAPERS
from sinkexp.reproduce.verdicts import check_claims
from sinkexp.reproduce.write import table_text
from sinkexp.rundir.reading import setting


def test_an_unfinished_runs_claims_are_not_run_with_the_reason(plumbed, tmp_path):
    shutil.copytree(plumbed[0], tmp_path, dirs_exist_ok=True)
    next((tmp_path / "plumbing" / "tiny" / "trigger" / "softmax").rglob("DONE")).unlink()  # one softmax run unfinished
    results = check_claims(plumbing_paper(), tmp_path)
    assert not any(r.passed for r in results) and {r.verdict for r in results} == {"not run"}
    assert all("did not finish" in r.problem for r in results)


def test_list_shows_the_cpu_sizes_verdicts_not_another_scales(plumbed, tmp_path):
    """reproduce writes another scale's claims.csv into <paper>/<scale>/; --list reads the CPU sizes'."""
    shutil.copytree(plumbed[0], tmp_path, dirs_exist_ok=True)
    reach = pd.read_csv(tmp_path / "plumbing" / "claims.csv").assign(verdict="holds")
    (tmp_path / "plumbing" / "reach").mkdir()
    reach.to_csv(tmp_path / "plumbing" / "reach" / "claims.csv", index=False)  # newer, one level down
    (tmp_path / "reach").mkdir()
    reach.to_csv(tmp_path / "reach" / "claims.csv", index=False)  # `reproduce all scale=reach`'s
    assert list(last_verdicts(["plumbing"], tmp_path)["verdict"]) == ["cannot fail", "contradicted", "cannot fail"]


def test_the_command_lists_papers_and_refuses_an_unknown_one():
    listed = subprocess.run(
        [sys.executable, "-m", "sinkexp.cli", "reproduce", "--list"], capture_output=True, text=True
    )
    assert listed.returncode == 0
    for paper in PAPERS.values():
        assert paper.name in listed.stdout
        assert all(claim.name in listed.stdout for claim in paper.claims)
    wrong = subprocess.run([sys.executable, "-m", "sinkexp.cli", "reproduce", "nope"], capture_output=True, text=True)
    assert wrong.returncode == 2 and "unknown paper 'nope'" in wrong.stderr and "ranmilo2026" in wrong.stderr


def test_a_claim_whose_runs_cannot_be_told_apart_is_refused(plumbed):
    runs, table = load_runs(plumbed[0] / "plumbing" / "tiny")
    vague = claim(name="vague", measure=final("sink_attn", 0, "non_trigger"), criterion=at_least(0))
    result = judge(vague, runs, table)  # softmax and relu runs of one seed: same label
    assert not result.passed and "narrow `where`" in result.problem


def test_an_intervention_measure_is_the_loss_ratio_of_the_runs_interventions(plumbed):
    runs, _ = load_runs(plumbed[0] / "plumbing" / "tiny")
    one = runs[0]
    table = run_interventions(load_run(one.path), 0).set_index(["intervention", "query_type"])["loss"]
    expected = table[("redirect", "trigger")] / table[("none", "trigger")]
    assert intervention("redirect", 0, "trigger").of(one) == pytest.approx(expected)


def test_runs_written_before_a_key_existed_are_selected_by_its_earlier_value():
    assert setting({"model.hide_bos": math.nan}, "model.hide_bos") is False
    assert setting({}, "model.hide_bos") is False and setting({"model.hide_bos": True}, "model.hide_bos") is True
    assert selects({"attn.name": "softmax"}, {"attn.name": "softmax", "model.hide_bos": False})
    assert not selects({"attn.name": "softmax"}, {"model.hide_bos": True})


def test_a_paired_ratio_divides_run_for_run(plumbed):
    runs, table = load_runs(plumbed[0] / "plumbing" / "tiny")
    bos = final("sink_attn", 0, "non_trigger")
    ratio = claim(
        Paired,
        name="ratio",
        where={"attn.name": "softmax"},
        measure=bos,
        criterion=at_least(0),
        against={"attn.name": "relu"},
        compare="ratio",
    )
    values = judge(ratio, runs, table).values
    by = {(r.settings["attn.name"], r.settings["seed"]): bos.of(r) for r in runs}
    assert values == pytest.approx({f"s{seed}": by["softmax", seed] / by["relu", seed] for seed in (0, 1)})


def test_claims_read_only_the_runs_the_declaration_plans(plumbed, tmp_path):
    """Runs of an earlier declaration (here: 30 steps) stay in the folder but are not read."""
    shutil.copytree(plumbed[0], tmp_path, dirs_exist_ok=True)
    rows = reproduce(decided(["hydra/launcher=basic", "train.steps=20"], [plumbing_paper()], root=tmp_path)).set_index(
        "claim"
    )
    assert len(list((tmp_path / "plumbing" / "tiny").rglob("DONE"))) == 8
    assert (rows["n"] == 2).all() and rows.loc["possible", "verdict"] == "cannot fail"


def test_spearman_closed_forms():
    assert spearman([1, 2, 3, 4, 5], [0.1, 0.2, 0.5, 0.6, 0.9]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4, 5], [9, 7, 5, 3, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2, 3, 4, 5], [1, 3, 2, 5, 4]) == 0.8  # 1 - 6 * 4 / (5 * 24), exactly: it meets >= 0.8
    assert at_least(0.8).holds(spearman([16, 32, 64, 128, 256], [2, 1, 3, 5, 4]))
    assert spearman([1, 2, 3], [0.0, 1.0, 1.0]) == pytest.approx(math.sqrt(3) / 2)  # a tie shares rank 2.5
    assert spearman([1, 2, 3], [5, 5, 5]) == 0.0  # the same everywhere: no order either way


def test_final_over_layers_reads_the_block_layers_only():
    # Layers 0-2 and the model row (layer -1, which must not count) of one metric, at text queries.
    finals = pd.DataFrame(
        {
            "layer": [0, 1, 2, -1, 0],
            "query_type": ["text"] * 4 + ["all"],
            "metric": "sink_attn",
            "value": [0.1, 0.4, 0.25, 0.9, 0.7],
        }
    )
    run = FinishedRun(Path("s0"), {"seed": 0}, finals)
    assert final("sink_attn", "max", "text").of(run) == pytest.approx(0.4)
    assert final("sink_attn", "min", "text").of(run) == pytest.approx(0.1)
    assert final("sink_attn", "mean", "text").of(run) == pytest.approx(0.25)  # (0.1 + 0.4 + 0.25) / 3
    assert final("sink_attn", 1, "text").of(run) == pytest.approx(0.4)


def test_a_trend_claim_ranks_each_draws_runs_by_the_key():
    value = {(0, 16): 0.1, (0, 32): 0.3, (0, 64): 0.2, (1, 16): 0.1, (1, 32): 0.2, (1, 64): 0.3}
    runs = [
        FinishedRun(
            Path(f"s{seed}-L{length}"),
            {"seed": seed, "task.seq_len": length},
            pd.DataFrame(),
            experiment="a" if length < 64 else "b",
        )
        for seed, length in value
    ]
    measure = Measure("m", lambda run: value[run.settings["seed"], run.settings["task.seq_len"]])
    rises = claim(
        Trend, name="rises", experiment=("a", "b"), measure=measure, criterion=at_least(0.8), key="task.seq_len"
    )
    table = pd.DataFrame({"run": [str(r.path) for r in runs], "status": "done"})
    result = judge(rises, runs, table)
    assert result.values == pytest.approx({"s0": 0.5, "s1": 1.0}) and not result.passed  # s0 swaps 32 and 64
    assert (
        "Spearman rho of m against task.seq_len"
        in result.row(Paper(name="p", title="-", experiments=(), claims=()))["measure"]
    )
    assert rises.experiments == ("a", "b")
    short = judge(rises, runs[:5], table)
    assert not short.passed and "fewer than 3 runs to rank for s1" in short.problem


def test_a_paired_claim_selects_its_arm_only_in_its_own_experiment():
    # The base experiment's runs also match `where` (same penalty): they must serve as the pair, not as the arm.
    inflow = {"arm": 0.1, "base": 0.9}
    runs = [
        FinishedRun(
            Path(f"{exp}-s{seed}"),
            {"seed": seed, "train.penalty": 0.0, "model.pathway": "learned" if exp == "arm" else "none"},
            pd.DataFrame(),
            experiment=exp,
        )
        for exp in inflow
        for seed in (0, 1)
    ]
    measure = Measure("inflow", lambda run: inflow[run.experiment] + run.settings["seed"])
    drops = claim(
        Paired,
        name="drops",
        experiment="arm",
        where={"train.penalty": 0.0},
        measure=measure,
        criterion=at_most(-0.5),
        against={"model.pathway": "none"},
        against_in="base",
    )
    table = pd.DataFrame({"run": [str(r.path) for r in runs], "status": "done"})
    result = judge(drops, runs, table)
    assert result.passed and result.values == pytest.approx({"s0": -0.8, "s1": -0.8})


def test_a_value_a_run_lacks_leaves_the_claim_not_run_with_the_problem_not_a_number(plumbed):
    runs, table = load_runs(plumbed[0] / "plumbing" / "tiny")
    typo = claim(
        name="typo", where={"attn.name": "softmax"}, measure=final("sink_attn", 0, "non_triger"), criterion=at_least(0)
    )
    result = judge(typo, runs, table)
    assert not result.passed and result.values == {}
    assert "has no final sink_attn[layer 0, non_triger]" in result.problem


def test_a_claim_whose_premise_does_not_hold_is_not_reached_with_its_values_shown(plumbed):
    base = plumbing_paper()
    bos, softmax = final("sink_attn", 0, "non_trigger"), {"attn.name": "softmax"}
    paper = Paper(
        name="plumbing",
        title="-",
        experiments=base.experiments,
        claims=(
            *base.claims,
            claim(name="after_possible", where=softmax, measure=bos, criterion=between(0, 1), requires="possible"),
            claim(name="after_impossible", where=softmax, measure=bos, criterion=between(0, 1), requires="impossible"),
            claim(
                name="after_both",
                where=softmax,
                measure=bos,
                criterion=between(0, 1),
                requires=("possible", "impossible"),
            ),
        ),
    )
    results = {r.claim.name: r for r in check_claims(paper, plumbed[0])}
    assert (results["after_both"].verdict, results["after_both"].why) == (
        "not reached",
        "its premise possible cannot fail",
    )
    assert "given that possible and impossible hold" in results["after_both"].claim.describe()
    after = results["after_impossible"]
    assert (after.verdict, after.why) == ("not reached", "its premise impossible was contradicted")
    assert after.values == results["after_possible"].values and len(after.values) == 2  # still shown
    assert "given that impossible holds" in after.claim.describe()


def test_a_claim_among_solved_runs_lists_the_others_and_does_not_count_them():
    solved = {0: 0.02, 1: 1.0, 2: 0.05}  # seed 1 collapsed to the zero predictor
    sink = {0: 0.99, 1: 1.0, 2: 0.95}
    runs = [FinishedRun(Path(f"s{seed}"), {"seed": seed}, pd.DataFrame(), experiment="tiny") for seed in solved]
    table = pd.DataFrame({"run": [str(r.path) for r in runs], "status": "done"})
    loss = Measure("loss ratio", lambda run: solved[run.settings["seed"]])
    among = Condition(loss, at_most(0.1))
    sinks = claim(
        name="sinks",
        measure=Measure("bos", lambda run: sink[run.settings["seed"]]),
        criterion=at_least(0.9),
        among=among,
    )
    result = judge(sinks, runs, table)
    assert result.passed and result.values == {"s0": 0.99, "s2": 0.95} and result.excluded == {"s1": 1.0}
    assert "among runs with loss ratio <= 0.1" in sinks.describe()
    assert result.row(Paper(name="p", title="-", experiments=(), claims=()))["excluded"] == "s1=1"
    nobody = claim(name="none", measure=loss, criterion=at_least(0), among=Condition(loss, at_most(0.0)))
    result = judge(nobody, runs, table)
    assert not result.passed and result.problem == "no selected run has loss ratio <= 0"


def test_the_results_table_shows_what_a_runs_value_is_made_of_where_the_measure_says(plumbed):
    rows = pd.read_csv(plumbed[0] / "plumbing" / "claims.csv")
    split = rows.iloc[:1].assign(detail="s0: key 15: 0.283, key 31: 0.244; per sequence (max_inflow) 0.316")
    assert "(detail: s0: key 15: 0.283, key 31: 0.244; per sequence (max_inflow) 0.316)" in table_text(split)
    assert "(detail:" not in table_text(rows.assign(detail=float("nan")))
