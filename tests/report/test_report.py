"""`sinkexp report`: reads run directories only, aggregates over seeds, lists unfinished runs."""

import errno
import shutil
from pathlib import Path

import pandas as pd
import pytest
from conftest import QUICK

from sinkexp.jobs.runner import run
from sinkexp.report.runs import collect, main, report, varying
from sinkexp.rundir import files as rundir_files


@pytest.fixture(scope="module")
def sweep(tmp_path_factory, make_config):
    root = tmp_path_factory.mktemp("sweep")
    for attn in ("softmax", "relu"):
        for seed in (0, 1):
            run(make_config(*QUICK, f"attn={attn}", f"seed={seed}"), root / f"trigger/{attn}/L1/s{seed}")
    # an interrupted run (config written, no marker) and a failed one
    rundir_files.write_text(
        root / "trigger/softmax/L1/s2" / rundir_files.CONFIG,
        (root / "trigger/softmax/L1/s0" / rundir_files.CONFIG).read_text(),
    )
    rundir_files.write_text(
        root / "trigger/relu/L1/s2" / rundir_files.CONFIG,
        (root / "trigger/relu/L1/s0" / rundir_files.CONFIG).read_text(),
    )
    rundir_files.write_text(root / "trigger/relu/L1/s2" / rundir_files.FAILED, "RuntimeError: boom\n")
    return root


def test_collect_reads_settings_from_config_yaml_not_folder_names(sweep):
    runs, finals = collect(sweep)
    assert sorted(runs["status"]) == ["done"] * 4 + ["failed", "interrupted"]
    assert set(runs["attn.name"]) == {"softmax", "relu"}
    assert "seed" not in varying(runs) and "attn.name" in varying(runs)
    assert set(finals["run"]) == set(runs.loc[runs["status"] == "done", "run"])


def test_summary_is_mean_std_and_count_over_seeds(sweep, capsys):
    out = report(sweep)
    summary = pd.read_csv(out / "summary.csv")
    runs, finals = collect(sweep)
    row = summary[
        (summary["attn.name"] == "softmax")
        & (summary["layer"] == 0)
        & (summary["query_type"] == "non_trigger")
        & (summary["metric"] == "sink_attn")
    ].iloc[0]
    per_seed = finals[
        (finals["metric"] == "sink_attn")
        & (finals["layer"] == 0)
        & (finals["query_type"] == "non_trigger")
        & finals["run"].str.contains("softmax")
    ]["value"]
    assert row["n"] == 2
    assert row["mean"] == pytest.approx(per_seed.mean()) and row["std"] == pytest.approx(per_seed.std())
    for figure in ("sink_attn_by_layer.png", "dynamics.png"):
        assert (out / figure).stat().st_size > 1000
    assert sorted(p.name for p in out.glob("attention_*.png")) == [
        "attention_attn=relu.png",
        "attention_attn=softmax.png",
    ]
    assert not list(out.glob("heads_*.png"))  # one layer of one head: no layer x head grid
    finals_csv = pd.read_csv(out / "finals.csv")  # every finished run's final values, labelled by setting
    assert set(finals_csv["label"]) == {"attn=relu", "attn=softmax"} and finals_csv["run"].nunique() == 4
    printed = capsys.readouterr().out
    assert "failed: trigger/relu/L1/s2" in printed and "interrupted: trigger/softmax/L1/s2" in printed


def test_report_works_on_a_single_run_directory(sweep, tmp_path):
    out = report(sweep / "trigger/relu/L1/s0", tmp_path / "one")
    assert len(pd.read_csv(out / "runs.csv")) == 1
    assert (out / "summary.csv").exists()


def test_damaged_runs_are_listed_with_the_reason_and_the_rest_reported(sweep, tmp_path, capsys):
    root = tmp_path / "damaged"
    shutil.copytree(sweep, root)
    metrics = root / "trigger/softmax/L1/s0" / rundir_files.METRICS_CSV  # truncated: ends at step 10 of 30
    lines = metrics.read_text().splitlines()
    metrics.write_text("\n".join(line for line in lines if not line.startswith(("20,", "30,"))) + "\n")
    (root / "trigger/relu/L1/s0" / rundir_files.METRICS_CSV).unlink()  # DONE without metrics.csv
    (root / "trigger/relu/L1/s1" / rundir_files.CONFIG).write_text("[not: a mapping")
    report(root)
    runs = pd.read_csv(root / "report/runs.csv").set_index("run")
    assert runs.loc["trigger/softmax/L1/s0", "status"] == "damaged"
    assert runs.loc["trigger/softmax/L1/s0", "reason"] == "metrics.csv (size differs)"
    assert runs.loc["trigger/relu/L1/s0", "status"] == "damaged"
    damaged = runs.loc["trigger/relu/L1/s1"]
    assert damaged["status"] == "damaged" and "config.yaml" in damaged["reason"]
    assert runs.loc["trigger/softmax/L1/s1", "status"] == "done"  # the rest is reported
    summary = pd.read_csv(root / "report/summary.csv")
    assert set(summary["n"]) == {1}
    assert "damaged: trigger/softmax/L1/s0" in capsys.readouterr().out


def test_a_model_of_several_heads_gets_its_layer_by_head_figure(tmp_path, make_config):
    run(make_config(*QUICK, "model.n_layers=2", "model.n_heads=2"), tmp_path / "run")
    out = report(tmp_path / "run")
    assert [p.name for p in out.glob("heads_*.png")] == ["heads_all_runs.png"]


def test_an_unwritable_report_folder_is_one_line_naming_another(sweep, tmp_path, monkeypatch, capsys):
    """A read-only run folder (root is exempt from permissions, so the denial is stood in for at the
    system call that makes each file), and a report folder that cannot exist (a file in its place)."""
    run_dir = tmp_path / "run"
    shutil.copytree(sweep / "trigger/relu/L1/s0", run_dir)
    making = rundir_files.tempfile.mkstemp

    def denied(*args, dir=None, **kwargs):
        if Path(dir).is_relative_to(run_dir):
            raise PermissionError(errno.EACCES, "Permission denied", dir)
        return making(*args, dir=dir, **kwargs)

    monkeypatch.setattr(rundir_files.tempfile, "mkstemp", denied)
    assert main([str(run_dir)]) == 1
    said = capsys.readouterr().err.strip()
    assert said.startswith(f"sinkexp: error: cannot write {run_dir / 'report'}/") and len(said.splitlines()) == 1
    assert said.endswith("no permission; write the report elsewhere with --out DIR")
    assert (
        main([str(run_dir), "--out", str(tmp_path / "elsewhere")]) == 0 and (tmp_path / "elsewhere/runs.csv").exists()
    )
    (tmp_path / "blocked").write_text("")
    assert main([str(run_dir), "--out", str(tmp_path / "blocked/report")]) == 1
    said = capsys.readouterr().err.strip().splitlines()
    assert len(said) == 1 and f"cannot write {tmp_path / 'blocked'}" in said[0] and "--out DIR" in said[0]


def test_a_folder_with_no_finished_run_is_one_line_and_exit_1(sweep, tmp_path, capsys):
    for name in ("trigger/softmax/L1/s2", "trigger/relu/L1/s2"):  # interrupted, failed
        shutil.copytree(sweep / name, tmp_path / name)
    assert main([str(tmp_path)]) == 1
    out, err = capsys.readouterr()
    assert "2 runs below" in out and "1 failed, 1 interrupted" in out and "Empty DataFrame" not in out
    assert err.strip() == f"sinkexp: error: no run below {tmp_path} has finished: nothing to summarise " + (
        f"({tmp_path / 'report' / 'runs.csv'})"
    )
    assert (tmp_path / "report" / "runs.csv").exists()


def test_a_setting_some_runs_lack_varies():
    """A key a run lacks (a measured run beside trained ones; a run written before the key) is a
    value of its own: pandas' astype(str) keeps NaN missing, so the report compares map(str)."""
    runs = pd.DataFrame({"run": ["a", "b"], "status": "done", "task.name": ["lm", None], "x": [1, 1]})
    assert varying(runs) == ["task.name"]


def test_report_prints_the_share_its_figures_draw_and_the_raw_weight_beside_it_where_they_differ():
    from sinkexp.report.runs import headline

    def summary(raw_sigmoid):
        rows = [("softmax", 0, "q", "sink_share", 0.9), ("softmax", 0, "q", "sink_attn", 0.9)]
        rows += [("sigmoid", 0, "q", "sink_share", 0.8), ("sigmoid", 0, "q", "sink_attn", raw_sigmoid)]
        rows += [("softmax", 0, "all", "sink_share", 0.5), ("softmax", -1, "q", "sink_share", 0.5)]
        table = pd.DataFrame(rows, columns=["attn.name", "layer", "query_type", "metric", "mean"])
        return table.assign(std=0.0, n=2)

    printed = headline(summary(0.01))
    assert list(printed.columns) == ["attn.name", "layer", "query_type", "sink_share", "std", "n", "sink_attn (raw)"]
    assert printed.set_index("attn.name")["sink_attn (raw)"].to_dict() == {"softmax": 0.9, "sigmoid": 0.01}
    assert "sink_attn (raw)" not in headline(summary(0.8)).columns  # rows that sum to 1: one column


def test_a_setting_that_co_varies_with_another_is_named_unless_that_ones_preset_brings_it():
    table = {
        "run": list("abcd"),
        "status": "done",
        "task.name": ["trigger", "trigger", "lm", "lm"],
        "model.mlp": ["none", "none", "swiglu", "swiglu"],  # configs/task/lm.yaml brings it (model=llama)
        "attn.name": ["softmax", "softmax", "relu", "relu"],
        "attn.normaliser": ["softmax", "softmax", "relu", "relu"],  # the preset's own axis
        "train.lr": [1e-3, 1e-3, 3e-3, 3e-3],  # neither trigger's file nor lm's sets it: a setting of its own
    }
    assert varying(pd.DataFrame(table)) == ["task.name", "attn.name", "train.lr"]  # no task's preset sets them
    table["task.name"] = ["trigger", "trigger", "broadcast", "broadcast"]  # configs/task/broadcast.yaml sets lr
    assert varying(pd.DataFrame(table)) == ["task.name", "attn.name"]
    table.update({"task.name": "trigger", "model.mlp": "none"})
    assert varying(pd.DataFrame(table)) == ["attn.name", "train.lr"]


def test_co_varying_settings_are_both_named_and_a_setting_a_run_lacks_is_a_dash(make_config, tmp_path, capsys):
    """model.n_heads 1 and 2 beside two attention variants, and a measured run that has neither:
    summary.csv, the labels and the console name both and print no NaN (issue 71)."""
    pytest.importorskip("transformers")
    from hf_models import tiny
    from test_cli import sinkexp

    from sinkexp.report.runs import write_report

    for attn, heads, seed in (("softmax", 1, 0), ("softmax", 1, 1), ("relu", 2, 0)):
        run(make_config(*QUICK, f"attn={attn}", f"model.n_heads={heads}", f"seed={seed}"), tmp_path / f"{attn}{seed}")
    model = tiny("gpt2", tmp_path / "gpt2")
    assert sinkexp("measure", f"model={model}", "n=8", "seq_len=16", "dir=runs/measured", cwd=tmp_path).returncode == 0
    for name in ("softmax0", "softmax1", "relu0"):
        shutil.move(tmp_path / name, tmp_path / "runs" / name)
    capsys.readouterr()
    assert main([str(tmp_path / "runs")]) == 0
    printed = capsys.readouterr().out
    summary = pd.read_csv(tmp_path / "runs/report/summary.csv", dtype=str, keep_default_na=False)
    assert list(summary.columns[:3]) == ["command", "attn.name", "model.n_heads"]
    assert set(map(tuple, summary[["command", "attn.name", "model.n_heads"]].values)) == {
        ("train", "softmax", "1"),
        ("train", "relu", "2"),
        ("measure", "-", "-"),
    }
    assert "nan" not in printed.lower() and "nan" not in (tmp_path / "runs/report/summary.csv").read_text().lower()
    labels = {
        "command=train, attn=softmax, model.n_heads=1",
        "command=train, attn=relu, model.n_heads=2",
        "command=measure",
    }
    assert set(pd.read_csv(tmp_path / "runs/report/finals.csv")["label"]) == labels
    figures = []
    write_report(tmp_path / "runs", tmp_path / "again", save=lambda fig, path: figures.append((path.name, fig)))
    legends = {name: {t.get_text() for legend in fig.legends for t in legend.get_texts()} for name, fig in figures}
    assert legends["sink_attn_by_layer.png"] == {
        "command=train, attn=softmax, model.n_heads=1 (n=2)",
        "command=train, attn=relu, model.n_heads=2 (n=1)",
        "command=measure (n=1)",
    }
    assert labels <= legends["dynamics.png"] | {"command=measure"}  # a measured run has no curve over training
    names = sorted(name for name, _ in figures)
    assert "attention_command=train_attn=relu_model.n_heads=2.png" in names
    # a measured run draws the real-model figures (model_figures.py), not the trained runs' heads_
    assert "first_token_command=measure.png" in names and "heads_command=measure.png" not in names


def test_a_long_label_makes_a_file_name_of_its_own_under_the_limit():
    from sinkexp.report.runs import file_name

    assert file_name("attn=relu, model.n_heads=2") == "attn=relu_model.n_heads=2"
    long = ", ".join(f"task.key{i}=value{i}" for i in range(20))
    assert len(file_name(long)) == 149 and file_name(long) != file_name(long + "x")
