"""`sinkexp reproduce`: the papers' declarations are complete and every job composes; a tiny
plumbing paper runs end to end (a claim holds only when every run meets it, an impossible criterion
is contradicted), a stopped command resumes, runs are copied not trained twice, and the time left
follows the plan."""

import json
import math
import os
import shutil
import subprocess
import sys
from types import SimpleNamespace

import pandas as pd
import pytest
from plumbing import QUICK_SIZES, claim, plumbing_paper

from sinkexp.commands.overrides import read_sweep
from sinkexp.jobs.plan import plan
from sinkexp.reproduce import reproduce
from sinkexp.reproduce.command import decided
from sinkexp.reproduce.declare import Checkpoint, Experiment, Paper, Value, at_least, at_most, between
from sinkexp.reproduce.execute import plan_experiments
from sinkexp.reproduce.judge import Result
from sinkexp.reproduce.measures import final
from sinkexp.reproduce.papers import PAPERS
from sinkexp.reproduce.sweeps import experiment_overrides
from sinkexp.rundir.claim import resumes


def test_criteria_hold_inclusively_and_nan_never_passes():
    assert at_least(0.9).holds(0.9) and not at_least(0.9).holds(0.89)
    assert at_most(0.1).holds(0.1) and not at_most(0.1).holds(0.11)
    assert between(0.5, 2).holds(1.0) and not between(0.5, 2).holds(2.5)
    assert not any(c.holds(math.nan) for c in (at_least(0), at_most(1), between(0, 1)))
    assert (str(at_least(0.9)), str(at_most(0.1, by="source")), str(between(0.5, 2, by="direction"))) == (
        ">= 0.9 (sinkexp's)",
        "<= 0.1 (the source's)",
        "in [0.5, 2] (the source's direction)",
    )


def test_a_claim_passes_only_when_every_run_meets_it():
    claim = Value(
        name="c",
        kind="paper",
        statement="s",
        source="src",
        paper_value="1",
        experiment="e",
        measure=final("sink_attn"),
        criterion=at_least(0.9),
    )
    assert Result(claim, {"s0": 0.95, "s1": 0.99}).passed
    assert not Result(claim, {"s0": 0.95, "s1": 0.5}).passed  # the mean (0.725) is not what counts
    assert not Result(claim, {}).passed
    assert not Result(claim, {"s0": 0.95}, problem="1 selected runs did not finish").passed


@pytest.mark.parametrize("paper", PAPERS.values(), ids=list(PAPERS))
def test_every_claim_has_its_experiment_three_seeds_and_two_structure_draws(paper):
    names = [e.name for e in paper.experiments]
    assert len(set(names)) == len(names) and len({c.name for c in paper.claims}) == len(paper.claims)
    for c in paper.claims:
        for name in c.experiments:
            exp = paper.experiment(name)
            if isinstance(exp, Checkpoint):  # one measured checkpoint, no seeds
                continue
            assert len(exp.grid["seed"]) >= 3 and len(exp.reach.get("seed", exp.grid["seed"])) >= 3, (c.name, name)
            if exp.task not in ("trigger", "lm"):  # the others draw structure (v; u, R; the bigram table);
                assert len(exp.grid["task.structure_seed"]) >= 2, (c.name, name)  # lm's corpus is fixed


def test_every_job_of_every_paper_composes_and_validates(tmp_path):
    plans = plan_experiments(
        decided([], list(PAPERS.values()), root=tmp_path, pack=False)
    )  # raises ConfigError on the first bad job
    assert all(plan.multirun for plan in plans.values())  # each experiment is one sweep


def test_the_lms_reach_size_is_the_ladder_rung_that_sank_on_every_seed_on_other_seeds(tmp_path):
    """barbero2025's lm at scale=reach trains the ladder's sinking rung, on seeds 3-5, not the seeds
    0-2 that chose it (their rows stay the ladder's); lm_context_64 is lm's twin; gu2025's
    lm_attention takes the rung's sizes and recipe."""
    chosen = [
        ("ladder", "constant_lr_wd0.5_steps_8000_ctx64", []),
        ("ladder", "constant_lr_wd0.5_steps_8000_ctx64", ["seed=3,4,5"]),  # the rung, on the judging seeds
        ("barbero2025", "lm", ["scale=reach"]),
        ("barbero2025", "lm_context_64", ["scale=reach"]),
        ("gu2025", "lm_attention", ["scale=reach"]),
    ]
    plans = [
        plan(
            read_sweep(
                experiment_overrides(PAPERS[paper].experiment(name), tmp_path / paper / name, decided(extra), False),
                multirun=True,
            )
        )
        for paper, name, extra in chosen
    ]
    hashes = [sorted(digest for _, digest in planned.runs) for planned in plans[:4]]
    assert hashes[1] == hashes[2] == hashes[3] and not set(hashes[0]) & set(hashes[2])
    assert sorted(job.config.seed for job in plans[2].jobs) == [3, 4, 5]
    cfg = plans[4].jobs[0].config
    assert (cfg.task.seq_len, cfg.train.batch_size, cfg.train.steps, cfg.train.weight_decay) == (64, 64, 8000, 0.5)


def test_packed_plans_train_the_same_runs_in_fewer_jobs(tmp_path):
    """--pack (a GPU's default) moves each grid's packable keys into pack=: every planned run
    directory and config hash stays what the unpacked plan gives (grids of weight decays, gammas and
    attention operations, and one with a penalty)."""
    chosen = {
        "sun2026": ("weight_decay",),
        "fesser2026": ("dynamics_gamma",),
        "guo2024": ("one_layer",),
        "ranmilo2026": ("bos_penalty",),
    }
    papers = [
        SimpleNamespace(name=name, experiments=[PAPERS[name].experiment(e) for e in exps])
        for name, exps in chosen.items()
    ]
    plain, packed = (plan_experiments(decided([], papers, root=tmp_path, pack=pack)) for pack in (False, True))
    for key, planned in plain.items():
        assert sorted(packed[key].runs) == sorted(planned.runs), key
    wd = next(o for o in packed["sun2026", "weight_decay"].overrides if o.startswith("pack="))
    assert wd == "pack={train.weight_decay:[0.0,0.1],seed:[0,1,2],task.structure_seed:[0,1]}"
    penalty = packed["ranmilo2026", "bos_penalty"].overrides  # penalties are not per replica: swept
    assert not any(o.startswith("pack=") for o in penalty) and "seed=0,1,2" in penalty


def test_a_tiny_paper_runs_end_to_end_and_an_impossible_criterion_is_contradicted(plumbed):
    root, rows, console = plumbed
    # One pool for every job, one progress line (printed at the end when not on a terminal).
    assert "reproduce: 4 of 4 runs done" in console and "run directory" not in console
    # BOS attention in [0, 1] holds trained and untrained alike: it tests nothing
    assert rows.loc["possible", "verdict"] == "cannot fail" and rows.loc["impossible", "verdict"] == "contradicted"
    assert rows.loc["paired", "verdict"] == "cannot fail"
    assert (rows["n"] == 2).all()
    # the untrained values are the runs' own step-0 evaluation
    for metrics in (root / "plumbing" / "tiny" / "trigger" / "softmax").rglob("metrics.csv"):
        m = pd.read_csv(metrics)
        start = m[
            (m["step"] == 0)
            & (m["metric"] == "sink_attn")
            & (m["layer"] == 0)
            & (m["head"] >= 0)
            & (m["query_type"] == "non_trigger")
        ]["value"].mean()  # the mean over heads
        assert f"{metrics.parent.name.split('-')[0]}={start:.4g}" in rows.loc["possible", "untrained"]
    # per-run values are kept, and the paired values are the per-seed differences of the runs'
    finals = {}
    for summary in (root / "plumbing" / "tiny" / "trigger").glob("*/L1/*/summary.json"):
        attn, seed = summary.parts[-4], summary.parent.name.split("-")[0]
        finals[attn, seed] = pd.read_json(summary, typ="series")["sink_attn"]["0"]["non_trigger"]
    for seed in ("s0", "s1"):
        assert f"{seed}={finals['softmax', seed]:.4g}" in rows.loc["possible", "values"]
        assert f"{seed}={finals['softmax', seed] - finals['relu', seed]:.4g}" in rows.loc["paired", "values"]
    written = pd.read_csv(root / "plumbing" / "claims.csv").set_index("claim")
    assert list(written["verdict"]) == ["cannot fail", "contradicted", "cannot fail"]
    report = (root / "plumbing" / "REPORT.md").read_text()
    assert "| plumbing | impossible |" in report and "tiny/report/sink_attn_by_layer.png" in report
    assert (root / "plumbing" / "tiny" / "report" / "sink_attn_by_layer.png").exists()
    assert (
        console.rstrip()
        .splitlines()[-1]
        .startswith("paper claims: 0 hold, 1 contradicted, 0 not reached, 2 cannot fail")
    )


LONG_PAPER = """
import sys
from pathlib import Path
from sinkexp.reproduce import reproduce
from sinkexp.reproduce.command import decided
from sinkexp.reproduce.declare import Experiment, Paper
exp = Experiment(name="e", overrides={"task": "trigger", "train.steps": 100000}, grid={"seed": (0, 1, 2)})
reproduce(decided(["hydra.launcher.n_jobs=2"], [Paper(name="long", title="-", experiments=(exp,), claims=())],
                  root=Path(sys.argv[1])))
"""


def test_sigterm_to_reproduce_stops_its_pool_workers_runs(tmp_path):
    """`kill PID` reaches reproduce's process only: it passes SIGTERM on to the pool's workers, whose
    runs stop as SIGTERM stops a run (FAILED written), rather than train on as orphans; the job the
    pool had queued (three jobs, two workers) does not start."""
    import signal
    import time

    process = subprocess.Popen(
        [sys.executable, "-c", LONG_PAPER, str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TQDM_DISABLE": "1"},
    )
    deadline = time.monotonic() + 180
    while len(list(tmp_path.rglob("metrics.csv"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)  # both workers are training
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    failed = sorted(tmp_path.rglob("FAILED"))
    assert process.returncode == 128 + signal.SIGTERM and len(failed) == 2
    assert "Traceback" not in stderr
    said = f"2 running runs stopped, 2 of them marked FAILED; {resumes([path.parent for path in failed])}"
    assert f"sinkexp: reproduce stopped by SIGTERM; {said}\n" in stderr  # the queued job's run not counted
    assert all(path.read_text().startswith("Interrupted: stopped by SIGTERM at step ") for path in failed)


def test_runs_another_experiment_finished_are_copied_not_trained(plumbed, tmp_path, capsys):
    """An experiment that repeats another's configs reads copies of those runs, byte for byte."""
    shutil.copytree(plumbed[0], tmp_path, dirs_exist_ok=True)
    again = Experiment(
        name="again", overrides={"task": "trigger", **QUICK_SIZES}, grid={"attn": ("softmax",), "seed": (0, 1)}
    )
    bos = final("sink_attn", 0, "non_trigger")
    paper = Paper(
        name="repeat",
        title="the same runs",
        experiments=(again,),
        claims=(claim(experiment="again", measure=bos, criterion=between(0, 1)),),
    )
    rows = reproduce(decided(["hydra/launcher=basic"], [paper], root=tmp_path))
    copies = sorted((tmp_path / "repeat" / "again").rglob("DONE"))
    assert len(copies) == 2 and rows["verdict"].tolist() == ["cannot fail"]
    for copy in copies:
        original = next((tmp_path / "plumbing" / "tiny").rglob(f"{copy.parent.name}/DONE")).parent
        for name in ("meta.json", "metrics.csv", "summary.json", "checkpoint.pt"):  # same start time: not retrained
            assert (copy.parent / name).read_bytes() == (original / name).read_bytes(), name
    assert capsys.readouterr().out.count("copied, not trained again") == 2


def test_the_time_left_is_the_plans_prediction_at_the_pace_of_the_finished_jobs():
    from sinkexp.reproduce.pool import Progress

    progress = Progress(total_runs=10, done_runs=2, predicted=6000.0, workers=2)
    assert progress.line().endswith("2 of 10 runs done, 0 min elapsed, about 50 min left")  # 6000 s / 2 workers
    progress.finished(predicted=1200.0, took=1800.0)  # the jobs take 1.5x their prediction
    assert progress.line().endswith("about 60 min left")  # (6000 - 1200) x 1.5 / 2 = 3600 s
    assert "min left" not in Progress(total_runs=1, done_runs=0, predicted=0.0, workers=2).line()


def test_the_plan_predicts_a_time_for_every_run_reproduce_trained(plumbed):
    from sinkexp.reproduce import estimate_papers

    trained = {done.parent.name for done in plumbed[0].rglob("DONE")}
    predicted = estimate_papers(decided(["hydra.launcher.n_jobs=2"], [plumbing_paper()], pack=False))[1]["job_seconds"]
    assert len(trained) == 4 and trained == set(predicted) and all(seconds > 0 for seconds in predicted.values())


def test_runs_two_experiments_plan_train_once_in_the_pool(tmp_path, capsys):
    """Within one command, a run that two experiments plan is trained by one and copied to the other."""
    tiny = Experiment(
        name="tiny", overrides={"task": "trigger", **QUICK_SIZES}, grid={"attn": ("softmax",), "seed": (0, 1)}
    )
    again = Experiment(name="again", overrides=tiny.overrides, grid=tiny.grid)
    bos = final("sink_attn", 0, "non_trigger")
    paper = Paper(
        name="twins",
        title="the same runs twice",
        experiments=(tiny, again),
        claims=(claim(experiment="again", measure=bos, criterion=between(0, 1)),),
    )
    rows = reproduce(decided(["hydra.launcher.n_jobs=2"], [paper], root=tmp_path))
    assert rows["verdict"].tolist() == ["cannot fail"]
    copies = sorted((tmp_path / "twins" / "again").rglob("DONE"))
    assert len(copies) == 2
    for copy in copies:
        original = next((tmp_path / "twins" / "tiny").rglob(f"{copy.parent.name}/DONE")).parent
        assert (copy.parent / "meta.json").read_bytes() == (original / "meta.json").read_bytes()  # one start time
    captured = capsys.readouterr()
    assert "reproduce: 4 of 4 runs done" in captured.err and captured.out.count("copied, not trained again") == 2
    # Interrupted in both experiments (DONE gone): each resumes its own, none is left waiting for a copy.
    for folder in ("tiny", "again"):
        next((tmp_path / "twins" / folder).rglob("DONE")).unlink()
    reproduce(decided(["hydra.launcher.n_jobs=2"], [paper], root=tmp_path))
    assert len(list((tmp_path / "twins").rglob("DONE"))) == 4


def test_a_pool_worker_resolves_the_presets_that_follow_another_key(tmp_path):
    """task=lm's warm-up follows train.steps (config/follow.py): a pool worker, a fresh interpreter, resolves
    it as `sinkexp train` does (it raised UnsupportedInterpolationType there) and records what followed."""
    lm = Experiment(name="lm", overrides={"task": "lm", **QUICK_SIZES, "task.seq_len": 32}, grid={"seed": (0, 1)})
    paper = Paper(
        name="lm",
        title="a tiny LM",
        experiments=(lm,),
        claims=(claim(experiment="lm", measure=final("sink_attn", 0, "text"), criterion=between(0, 1)),),
    )
    rows = reproduce(decided(["hydra.launcher.n_jobs=2"], [paper], root=tmp_path))
    assert rows["verdict"].tolist() == ["cannot fail"]
    metas = [json.loads(path.read_text()) for path in sorted((tmp_path / "lm").rglob("meta.json"))]
    assert [meta["followed"] for meta in metas] == [["train.warmup=30 (the preset's 100, at most train.steps)"]] * 2
