"""`sinkexp reproduce`: the papers' declarations are complete and every job composes; a tiny
plumbing paper runs end to end, a claim passes only when every run meets it, an impossible
criterion FAILs, and a paired claim pairs runs by seed."""
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
from types import SimpleNamespace

import pytest

from conftest import QUICK
from sinkexp.reproduce import reproduce
from sinkexp.reproduce.declare import Experiment, Measure, Paired, Paper, Trend, Value, at_least, at_most, between
from sinkexp.reproduce.execute import experiment_overrides, plan_experiments
from sinkexp.reproduce.measures import FinishedRun, final, intervention
from sinkexp.reproduce.papers import PAPERS
from sinkexp.reproduce.verdicts import Result, check_claims, judge, load_runs, selects, spearman
from sinkexp.reproduce.write import headline, results_page, write_docs
from sinkexp.runfiles import setting

QUICK_SIZES = {key: int(value) if value.isdigit() else value for key, value in (o.split("=", 1) for o in QUICK)}


def claim(kind=Value, name="c", experiment="tiny", where=None, **fields):
    """A claim for plumbing tests: only what the test is about named."""
    return kind(name=name, kind="paper", statement="-", source="-", paper_value="-", experiment=experiment,
                where=where or {}, **fields)


def test_criteria_hold_inclusively_and_nan_never_passes():
    assert at_least(0.9).holds(0.9) and not at_least(0.9).holds(0.89)
    assert at_most(0.1).holds(0.1) and not at_most(0.1).holds(0.11)
    assert between(0.5, 2).holds(1.0) and not between(0.5, 2).holds(2.5)
    assert not any(c.holds(math.nan) for c in (at_least(0), at_most(1), between(0, 1)))
    assert (str(at_least(0.9)), str(at_most(0.1)), str(between(0.5, 2))) == (">= 0.9", "<= 0.1", "in [0.5, 2]")


def test_a_claim_passes_only_when_every_run_meets_it():
    claim = Value(name="c", kind="paper", statement="s", source="src", paper_value="1", experiment="e",
                  measure=final("sink_attn"), criterion=at_least(0.9))
    assert Result(claim, {"s0": 0.95, "s1": 0.99}).passed
    assert not Result(claim, {"s0": 0.95, "s1": 0.5}).passed      # the mean (0.725) is not what counts
    assert not Result(claim, {}).passed
    assert not Result(claim, {"s0": 0.95}, problem="1 selected runs did not finish").passed


@pytest.mark.parametrize("paper", PAPERS.values(), ids=list(PAPERS))
def test_every_claim_has_its_experiment_three_seeds_and_two_structure_draws(paper):
    names = [e.name for e in paper.experiments]
    assert len(set(names)) == len(names) and len({c.name for c in paper.claims}) == len(paper.claims)
    for claim in paper.claims:
        for name in claim.experiments:
            exp = paper.experiment(name)
            assert len(exp.grid["seed"]) >= 3, (claim.name, name)
            if exp.task not in ("trigger", "lm"):   # the others draw structure (v; u, R; the bigram table);
                assert len(exp.grid["task.structure_seed"]) >= 2, (claim.name, name)   # lm's corpus is fixed


def test_every_job_of_every_paper_composes_and_validates(tmp_path):
    plans = plan_experiments(list(PAPERS.values()), [], tmp_path)   # raises ConfigError on the first bad job
    assert all(plan.multirun for plan in plans.values())           # each experiment is one sweep


def test_packed_plans_train_the_same_runs_in_fewer_jobs(tmp_path):
    """--pack (a GPU's default) moves each grid's packable keys into pack=: every planned run
    directory and config hash stays what the unpacked plan gives (grids of weight decays, gammas and
    attention operations, and one with a penalty)."""
    chosen = {"sun2026": ("weight_decay",), "fesser2026": ("dynamics_gamma",), "guo2024": ("one_layer",),
              "ranmilo2026": ("bos_penalty",)}
    papers = [SimpleNamespace(name=name, experiments=[PAPERS[name].experiment(e) for e in exps])
              for name, exps in chosen.items()]
    plain, packed = (plan_experiments(papers, [], tmp_path, pack=pack) for pack in (False, True))
    for key, planned in plain.items():
        assert sorted(packed[key].runs) == sorted(planned.runs), key
    wd = next(o for o in packed["sun2026", "weight_decay"].overrides if o.startswith("pack="))
    assert wd == "pack={train.weight_decay:[0.0,0.1],seed:[0,1,2],task.structure_seed:[0,1]}"
    penalty = packed["ranmilo2026", "bos_penalty"].overrides     # penalties are not per replica: swept
    assert not any(o.startswith("pack=") for o in penalty) and "seed=0,1,2" in penalty


def plumbing_paper():
    tiny = Experiment(name="tiny", overrides={"task": "trigger", **QUICK_SIZES},
                      grid={"attn": ("softmax", "relu"), "seed": (0, 1)})
    bos = final("sink_attn", 0, "non_trigger")
    softmax = {"attn.name": "softmax"}
    return Paper(name="plumbing", title="a tiny case", experiments=(tiny,), claims=(
        claim(name="possible", where=softmax, measure=bos, criterion=between(0, 1)),
        claim(name="impossible", where=softmax, measure=bos, criterion=at_least(1.5)),
        claim(Paired, name="paired", where=softmax, measure=bos, criterion=between(-1, 1),
              against={"attn.name": "relu"}),
    ))


@pytest.fixture(scope="module")
def plumbed(tmp_path_factory):
    """The plumbing paper reproduced once: (root, claims table, console output)."""
    import contextlib
    import io

    root = tmp_path_factory.mktemp("reproduce")
    console = io.StringIO()
    with contextlib.redirect_stdout(console), contextlib.redirect_stderr(console):   # through the pool
        rows = reproduce([plumbing_paper()], ["hydra.launcher.n_jobs=2"], root=root, command="test")
    return root, rows.set_index("claim"), console.getvalue()


def test_a_tiny_paper_runs_end_to_end_and_an_impossible_criterion_fails(plumbed):
    root, rows, console = plumbed
    # One pool for every job, one progress line (printed at the end when not on a terminal).
    assert "reproduce: 4 of 4 runs done" in console and "run directory" not in console
    assert rows.loc["possible", "verdict"] == "PASS" and rows.loc["impossible", "verdict"] == "FAIL"
    assert rows.loc["paired", "verdict"] == "PASS"
    assert (rows["n"] == 2).all()
    # per-run values are kept, and the paired values are the per-seed differences of the runs'
    finals = {}
    for summary in (root / "plumbing" / "tiny" / "trigger").glob("*/L1/*/summary.json"):
        attn, seed = summary.parts[-4], summary.parent.name.split("-")[0]
        finals[attn, seed] = pd.read_json(summary, typ="series")["sink_attn"]["0"]["non_trigger"]
    for seed in ("s0", "s1"):
        assert f"{seed}={finals['softmax', seed]:.4g}" in rows.loc["possible", "values"]
        assert f"{seed}={finals['softmax', seed] - finals['relu', seed]:.4g}" in rows.loc["paired", "values"]
    written = pd.read_csv(root / "plumbing" / "claims.csv").set_index("claim")
    assert list(written["verdict"]) == ["PASS", "FAIL", "PASS"]
    report = (root / "plumbing" / "REPORT.md").read_text()
    assert "| plumbing | impossible |" in report and "tiny/report/sink_attn_by_layer.png" in report
    assert (root / "plumbing" / "tiny" / "report" / "sink_attn_by_layer.png").exists()
    assert console.rstrip().splitlines()[-1].startswith("paper claims: 2 of 3 hold")


LONG_PAPER = """
import sys
from pathlib import Path
from sinkexp.reproduce import reproduce
from sinkexp.reproduce.declare import Experiment, Paper
exp = Experiment(name="e", overrides={"task": "trigger", "train.steps": 100000}, grid={"seed": (0, 1, 2)})
reproduce([Paper(name="long", title="-", experiments=(exp,), claims=())], ["hydra.launcher.n_jobs=2"],
          root=Path(sys.argv[1]))
"""


def test_sigterm_to_reproduce_stops_its_pool_workers_runs(tmp_path):
    """`kill PID` reaches reproduce's process only: it passes SIGTERM on to the pool's workers, whose
    runs stop as SIGTERM stops a run (FAILED written), rather than train on as orphans; the job the
    pool had queued (three jobs, two workers) does not start."""
    import signal
    import time

    process = subprocess.Popen([sys.executable, "-c", LONG_PAPER, str(tmp_path)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env={**os.environ, "TQDM_DISABLE": "1"})
    deadline = time.monotonic() + 180
    while len(list(tmp_path.rglob("metrics.csv"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)                                   # both workers are training
    process.send_signal(signal.SIGTERM)
    process.communicate(timeout=120)
    failed = sorted(tmp_path.rglob("FAILED"))
    assert process.returncode != 0 and len(failed) == 2
    assert all(path.read_text().startswith("Interrupted: stopped by SIGTERM at step ") for path in failed)


def test_an_unfinished_run_fails_its_claims_with_the_reason(plumbed, tmp_path):
    shutil.copytree(plumbed[0], tmp_path, dirs_exist_ok=True)
    next((tmp_path / "plumbing" / "tiny" / "trigger" / "softmax").rglob("DONE")).unlink()   # one softmax run unfinished
    results = check_claims(plumbing_paper(), tmp_path)
    assert not any(r.passed for r in results)
    assert all("did not finish" in r.problem for r in results)


def test_the_command_lists_papers_and_refuses_an_unknown_one():
    listed = subprocess.run([sys.executable, "-m", "sinkexp.cli", "reproduce", "--list"], capture_output=True, text=True)
    assert listed.returncode == 0
    for paper in PAPERS.values():
        assert paper.name in listed.stdout
        assert all(claim.name in listed.stdout for claim in paper.claims)
    wrong = subprocess.run([sys.executable, "-m", "sinkexp.cli", "reproduce", "nope"], capture_output=True, text=True)
    assert wrong.returncode == 2 and "unknown paper 'nope'" in wrong.stderr and "ranmilo2026" in wrong.stderr




def test_a_claim_whose_runs_cannot_be_told_apart_is_refused(plumbed):
    runs, table = load_runs(plumbed[0] / "plumbing" / "tiny")
    vague = claim(name="vague", measure=final("sink_attn", 0, "non_trigger"), criterion=at_least(0))
    result = judge(vague, runs, table)        # softmax and relu runs of one seed: same label
    assert not result.passed and "narrow `where`" in result.problem


def test_an_intervention_measure_is_the_loss_ratio_of_the_runs_interventions(plumbed):
    from sinkexp.interventions import run_interventions
    from sinkexp.load import load_run

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
    ratio = claim(Paired, name="ratio", where={"attn.name": "softmax"}, measure=bos, criterion=at_least(0),
                  against={"attn.name": "relu"}, compare="ratio")
    values = judge(ratio, runs, table).values
    by = {(r.settings["attn.name"], r.settings["seed"]): bos.of(r) for r in runs}
    assert values == pytest.approx({f"s{seed}": by["softmax", seed] / by["relu", seed] for seed in (0, 1)})


def test_claims_read_only_the_runs_the_declaration_plans(plumbed, tmp_path):
    """Runs of an earlier declaration (here: 30 steps) stay in the folder but are not read."""
    shutil.copytree(plumbed[0], tmp_path, dirs_exist_ok=True)
    rows = reproduce([plumbing_paper()], ["hydra/launcher=basic", "train.steps=20"], root=tmp_path).set_index("claim")
    assert len(list((tmp_path / "plumbing" / "tiny").rglob("DONE"))) == 8
    assert (rows["n"] == 2).all() and rows.loc["possible", "verdict"] == "PASS"


def test_runs_another_experiment_finished_are_copied_not_trained(plumbed, tmp_path, capsys):
    """An experiment that repeats another's configs reads copies of those runs, byte for byte."""
    shutil.copytree(plumbed[0], tmp_path, dirs_exist_ok=True)
    again = Experiment(name="again", overrides={"task": "trigger", **QUICK_SIZES}, grid={"attn": ("softmax",), "seed": (0, 1)})
    bos = final("sink_attn", 0, "non_trigger")
    paper = Paper(name="repeat", title="the same runs", experiments=(again,),
                  claims=(claim(experiment="again", measure=bos, criterion=between(0, 1)),))
    rows = reproduce([paper], ["hydra/launcher=basic"], root=tmp_path)
    copies = sorted((tmp_path / "repeat" / "again").rglob("DONE"))
    assert len(copies) == 2 and rows["verdict"].tolist() == ["PASS"]
    for copy in copies:
        original = next((tmp_path / "plumbing" / "tiny").rglob(f"{copy.parent.name}/DONE")).parent
        for name in ("meta.json", "metrics.csv", "summary.json", "checkpoint.pt"):   # same start time: not retrained
            assert (copy.parent / name).read_bytes() == (original / name).read_bytes(), name
    assert capsys.readouterr().out.count("copied, not trained again") == 2


def test_the_time_left_is_the_plans_prediction_at_the_pace_of_the_finished_jobs():
    from sinkexp.reproduce.execute import Progress

    progress = Progress(total_runs=10, done_runs=2, predicted=6000.0, workers=2)
    assert progress.line().endswith("2 of 10 runs done, 0 min elapsed, about 50 min left")   # 6000 s / 2 workers
    progress.finished(predicted=1200.0, took=1800.0)       # the jobs take 1.5x their prediction
    assert progress.line().endswith("about 60 min left")   # (6000 - 1200) x 1.5 / 2 = 3600 s
    assert "min left" not in Progress(total_runs=1, done_runs=0, predicted=0.0, workers=2).line()


def test_the_plan_predicts_a_time_for_every_run_reproduce_trained(plumbed):
    from sinkexp.reproduce import estimate_papers

    trained = {done.parent.name for done in plumbed[0].rglob("DONE")}
    predicted = estimate_papers([plumbing_paper()], ["hydra.launcher.n_jobs=2"], pack=False)[1]["job_seconds"]
    assert len(trained) == 4 and trained == set(predicted) and all(seconds > 0 for seconds in predicted.values())


def test_runs_two_experiments_plan_train_once_in_the_pool(tmp_path, capsys):
    """Within one command, a run that two experiments plan is trained by one and copied to the other."""
    tiny = Experiment(name="tiny", overrides={"task": "trigger", **QUICK_SIZES}, grid={"attn": ("softmax",), "seed": (0, 1)})
    again = Experiment(name="again", overrides=tiny.overrides, grid=tiny.grid)
    bos = final("sink_attn", 0, "non_trigger")
    paper = Paper(name="twins", title="the same runs twice", experiments=(tiny, again),
                  claims=(claim(experiment="again", measure=bos, criterion=between(0, 1)),))
    rows = reproduce([paper], ["hydra.launcher.n_jobs=2"], root=tmp_path)
    assert rows["verdict"].tolist() == ["PASS"]
    copies = sorted((tmp_path / "twins" / "again").rglob("DONE"))
    assert len(copies) == 2
    for copy in copies:
        original = next((tmp_path / "twins" / "tiny").rglob(f"{copy.parent.name}/DONE")).parent
        assert (copy.parent / "meta.json").read_bytes() == (original / "meta.json").read_bytes()   # one start time
    captured = capsys.readouterr()
    assert "reproduce: 4 of 4 runs done" in captured.err and captured.out.count("copied, not trained again") == 2
    # Interrupted in both experiments (DONE gone): each resumes its own, none is left waiting for a copy.
    for folder in ("tiny", "again"):
        next((tmp_path / "twins" / folder).rglob("DONE")).unlink()
    reproduce([paper], ["hydra.launcher.n_jobs=2"], root=tmp_path)
    assert len(list((tmp_path / "twins").rglob("DONE"))) == 4


def test_a_pool_worker_resolves_the_presets_that_follow_another_key(tmp_path):
    """task=lm's warm-up follows train.steps (follow.py): a pool worker, a fresh interpreter, resolves
    it as `sinkexp train` does (it raised UnsupportedInterpolationType there) and records what followed."""
    lm = Experiment(name="lm", overrides={"task": "lm", **QUICK_SIZES, "task.seq_len": 32}, grid={"seed": (0, 1)})
    paper = Paper(name="lm", title="a tiny LM", experiments=(lm,), claims=(
        claim(experiment="lm", measure=final("sink_attn", 0, "text"), criterion=between(0, 1)),))
    rows = reproduce([paper], ["hydra.launcher.n_jobs=2"], root=tmp_path)
    assert len(rows) == 1 and len(list((tmp_path / "lm").rglob("DONE"))) == 2
    metas = [json.loads(path.read_text()) for path in sorted((tmp_path / "lm").rglob("meta.json"))]
    assert [meta["followed"] for meta in metas] == [["train.warmup=30 (the preset's 100, at most train.steps)"]] * 2


def test_scale_paper_drops_the_cpu_sizes_and_user_overrides_win():
    exp = Experiment(name="e", overrides={"task": "damping"}, grid={"seed": (0, 1, 2)}, cpu={"train.steps": 500})
    cpu = experiment_overrides(exp, Path("out"), ["hydra/launcher=basic"])
    paper = experiment_overrides(exp, Path("out"), ["hydra/launcher=basic", "scale=paper"])
    mine = experiment_overrides(exp, Path("out"), ["hydra/launcher=basic", "seed=7"])
    assert "train.steps=500" in cpu and "train.steps=500" not in paper and "scale=paper" in paper
    assert "seed=0,1,2" in cpu and "seed=0,1,2" not in mine and "seed=7" in mine
    assert "hydra.sweep.dir=out" in cpu


def test_spearman_closed_forms():
    assert spearman([1, 2, 3, 4, 5], [0.1, 0.2, 0.5, 0.6, 0.9]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4, 5], [9, 7, 5, 3, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2, 3, 4, 5], [1, 3, 2, 5, 4]) == pytest.approx(0.8)      # 1 - 6 * 4 / (5 * 24)
    assert spearman([1, 2, 3], [0.0, 1.0, 1.0]) == pytest.approx(math.sqrt(3) / 2)   # a tie shares rank 2.5


def test_final_over_layers_reads_the_block_layers_only():
    # Layers 0-2 and the model row (layer -1, which must not count) of one metric, at text queries.
    finals = pd.DataFrame({"layer": [0, 1, 2, -1, 0], "query_type": ["text"] * 4 + ["all"],
                           "metric": "sink_attn", "value": [0.1, 0.4, 0.25, 0.9, 0.7]})
    run = FinishedRun(Path("s0"), {"seed": 0}, finals)
    assert final("sink_attn", "max", "text").of(run) == pytest.approx(0.4)
    assert final("sink_attn", "min", "text").of(run) == pytest.approx(0.1)
    assert final("sink_attn", "mean", "text").of(run) == pytest.approx(0.25)     # (0.1 + 0.4 + 0.25) / 3
    assert final("sink_attn", 1, "text").of(run) == pytest.approx(0.4)


def test_a_trend_claim_ranks_each_draws_runs_by_the_key():
    value = {(0, 16): 0.1, (0, 32): 0.3, (0, 64): 0.2, (1, 16): 0.1, (1, 32): 0.2, (1, 64): 0.3}
    runs = [FinishedRun(Path(f"s{seed}-L{length}"), {"seed": seed, "task.seq_len": length}, pd.DataFrame(),
                        experiment="a" if length < 64 else "b") for seed, length in value]
    measure = Measure("m", lambda run: value[run.settings["seed"], run.settings["task.seq_len"]])
    rises = claim(Trend, name="rises", experiment=("a", "b"), measure=measure, criterion=at_least(0.8),
                  key="task.seq_len")
    table = pd.DataFrame({"run": [str(r.path) for r in runs], "status": "done"})
    result = judge(rises, runs, table)
    assert result.values == pytest.approx({"s0": 0.5, "s1": 1.0}) and not result.passed   # s0 swaps 32 and 64
    assert "Spearman rho of m against task.seq_len" in result.row(Paper(name="p", title="-", experiments=(),
                                                                        claims=()))["measure"]
    assert rises.experiments == ("a", "b")
    short = judge(rises, runs[:5], table)
    assert not short.passed and "fewer than 3 runs to rank for s1" in short.problem


def test_a_paired_claim_selects_its_arm_only_in_its_own_experiment():
    # The base experiment's runs also match `where` (same penalty): they must serve as the pair, not as the arm.
    inflow = {"arm": 0.1, "base": 0.9}
    runs = [FinishedRun(Path(f"{exp}-s{seed}"), {"seed": seed, "train.penalty": 0.0,
                                                 "model.pathway": "learned" if exp == "arm" else "none"},
                        pd.DataFrame(), experiment=exp) for exp in inflow for seed in (0, 1)]
    measure = Measure("inflow", lambda run: inflow[run.experiment] + run.settings["seed"])
    drops = claim(Paired, name="drops", experiment="arm", where={"train.penalty": 0.0}, measure=measure,
                  criterion=at_most(-0.5), against={"model.pathway": "none"}, against_in="base")
    table = pd.DataFrame({"run": [str(r.path) for r in runs], "status": "done"})
    result = judge(drops, runs, table)
    assert result.passed and result.values == pytest.approx({"s0": -0.8, "s1": -0.8})


def test_a_value_a_run_lacks_fails_the_claim_with_the_problem_not_a_number(plumbed):
    runs, table = load_runs(plumbed[0] / "plumbing" / "tiny")
    typo = claim(name="typo", where={"attn.name": "softmax"}, measure=final("sink_attn", 0, "non_triger"),
                 criterion=at_least(0))
    result = judge(typo, runs, table)
    assert not result.passed and result.values == {}
    assert "has no final sink_attn[layer 0, non_triger]" in result.problem


def test_the_committed_results_page_and_headline_are_what_claims_csv_gives():
    repo = Path(__file__).parents[1]
    rows = pd.read_csv(repo / "docs" / "claims.csv")
    assert (repo / "docs" / "results.md").read_text() == results_page(rows)
    assert headline(rows) in (repo / "README.md").read_text()
    # every declared paper with all its claims; the ladder's rows come with its first run by reproduce
    pending = {"ladder"}
    assert set(rows["paper"]) == set(PAPERS) - pending
    assert len(rows) == sum(len(paper.claims) for name, paper in PAPERS.items() if name not in pending)


def test_docs_are_regenerated_from_claims_csv_and_only_the_headline_changes(plumbed, tmp_path, capsys):
    from sinkexp.reproduce import main

    readme = tmp_path / "README.md"
    readme.write_text("intro\n<!-- results-headline: generated -->\nold\n<!-- /results-headline -->\nrest\n")
    rows = pd.read_csv(plumbed[0] / "plumbing" / "claims.csv")
    write_docs(tmp_path / "docs", rows)
    text = readme.read_text()
    assert text.startswith("intro\n<!-- results-headline: generated -->\n"
                           "**paper claims: 2 of 3 hold** (paper claims by paper: plumbing 2/3).")
    assert text.endswith("\n<!-- /results-headline -->\nrest\n") and "\nold\n" not in text
    page = (tmp_path / "docs" / "results.md").read_text()
    assert "| plumbing | impossible |" in page and page == results_page(pd.read_csv(tmp_path / "docs" / "claims.csv"))
    (tmp_path / "docs" / "results.md").unlink()
    assert main(["--docs", str(tmp_path / "docs")]) == 0 and (tmp_path / "docs" / "results.md").read_text() == page


def test_docs_for_one_paper_replace_only_that_papers_rows(plumbed, tmp_path):
    rows = pd.read_csv(plumbed[0] / "plumbing" / "claims.csv")
    other = rows.assign(paper="other", verdict="FAIL")
    write_docs(tmp_path, pd.concat([other, rows.assign(verdict="FAIL")], ignore_index=True))
    write_docs(tmp_path, rows)                                   # plumbing again: its rows replaced, other's kept
    merged = pd.read_csv(tmp_path / "claims.csv")
    assert list(merged["paper"]) == ["other"] * 3 + ["plumbing"] * 3
    assert list(merged["verdict"]) == ["FAIL"] * 3 + list(rows["verdict"])


def test_the_pooled_peak_is_the_dynamics_notebooks_sink_score(tmp_path):
    """max over keys of the attention pooled over queries and sequences, mean over heads: a head
    with all attention on key 2 scores 1, a uniform one 1/4; a layer the run lacks is missing."""
    import numpy as np

    from sinkexp.reproduce.measures import MissingValue, pooled_peak

    on_key_2 = np.zeros((4, 4))
    on_key_2[:, 2] = 1.0
    np.savez(tmp_path / "attention.npz", layer0=np.stack([on_key_2, np.full((4, 4), 0.25)]), sink=np.array(0))
    run = FinishedRun(tmp_path, {"seed": 0}, pd.DataFrame())
    assert pooled_peak(0).of(run) == pytest.approx((1.0 + 0.25) / 2)
    with pytest.raises(MissingValue, match="no layer 1"):
        pooled_peak(1).of(run)


def test_a_claim_whose_premise_fails_fails_with_its_values_shown(plumbed):
    from sinkexp.reproduce.verdicts import check_claims

    base = plumbing_paper()
    bos, softmax = final("sink_attn", 0, "non_trigger"), {"attn.name": "softmax"}
    paper = Paper(name="plumbing", title="-", experiments=base.experiments, claims=(*base.claims,
                  claim(name="after_possible", where=softmax, measure=bos, criterion=between(0, 1), requires="possible"),
                  claim(name="after_impossible", where=softmax, measure=bos, criterion=between(0, 1),
                        requires="impossible"),
                  claim(name="after_both", where=softmax, measure=bos, criterion=between(0, 1),
                        requires=("possible", "impossible"))))
    results = {r.claim.name: r for r in check_claims(paper, plumbed[0])}
    assert results["after_both"].problem == "its premise impossible does not hold"
    assert "given that possible and impossible hold" in results["after_both"].claim.describe()
    assert results["after_possible"].passed and not results["after_possible"].problem
    after = results["after_impossible"]
    assert not after.passed and after.problem == "its premise impossible does not hold"
    assert after.values == results["after_possible"].values and len(after.values) == 2   # still shown
    assert "given that impossible holds" in after.claim.describe()


def test_a_claim_among_solved_runs_lists_the_others_and_does_not_count_them():
    from sinkexp.reproduce.declare import Condition

    solved = {0: 0.02, 1: 1.0, 2: 0.05}              # seed 1 collapsed to the zero predictor
    sink = {0: 0.99, 1: 1.0, 2: 0.95}
    runs = [FinishedRun(Path(f"s{seed}"), {"seed": seed}, pd.DataFrame(), experiment="tiny") for seed in solved]
    table = pd.DataFrame({"run": [str(r.path) for r in runs], "status": "done"})
    loss = Measure("loss ratio", lambda run: solved[run.settings["seed"]])
    among = Condition(loss, at_most(0.1))
    sinks = claim(name="sinks", measure=Measure("bos", lambda run: sink[run.settings["seed"]]),
                  criterion=at_least(0.9), among=among)
    result = judge(sinks, runs, table)
    assert result.passed and result.values == {"s0": 0.99, "s2": 0.95} and result.excluded == {"s1": 1.0}
    assert "among runs with loss ratio <= 0.1" in sinks.describe()
    assert result.row(Paper(name="p", title="-", experiments=(), claims=()))["excluded"] == "s1=1"
    nobody = claim(name="none", measure=loss, criterion=at_least(0), among=Condition(loss, at_most(0.0)))
    result = judge(nobody, runs, table)
    assert not result.passed and result.problem == "no selected run has loss ratio <= 0"
