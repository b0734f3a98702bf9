"""Smoke runs of the `sinkexp` command into temporary directories.

Most run the command in this process (`cli.invoke`, the function the console script calls, with its
output captured), which spares each a Python, torch and Hydra start-up; those that need a process
of their own (the installed entry point, the umask, shell completion) start one. Runs interrupted
through the command line: tests/jobs/test_interruptions.py.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import QUICK
from helpers import sinkexp

from sinkexp.config.schema import group_options
from sinkexp.evaluate.tables import LOSS_COLUMNS, METRIC_COLUMNS


def test_single_run_writes_the_run_directory(tmp_path):
    result = sinkexp("train", "attn=relu", "model.n_heads=2", *QUICK, cwd=tmp_path, process=True)
    assert result.returncode == 0, result.stderr
    run_dir = Path(result.stdout.strip().splitlines()[-1].removeprefix("run directory: "))
    assert run_dir.parent == tmp_path / "outputs/runs/trigger/relu/L1"
    for name in (
        "config.yaml",
        "meta.json",
        "metrics.csv",
        "losses.csv",
        "summary.json",
        "checkpoint.pt",
        "DONE",
        "train.log",
        ".hydra/config.yaml",
    ):
        assert (run_dir / name).exists(), name
    assert not (run_dir / "FAILED").exists()

    metrics = pd.read_csv(run_dir / "metrics.csv")
    assert list(metrics.columns) == METRIC_COLUMNS
    assert sorted(metrics["step"].unique()) == [0, 10, 20, 30]
    assert set(metrics["query_type"]) == {"trigger", "non_trigger", "all"}
    assert {"sink_attn", "sink_share", "max_inflow", "sink_rate@0.3", "sink_rate@0.8"} <= set(metrics["metric"])
    assert set(metrics.loc[metrics["metric"] == "sink_attn", "head"]) == {0, 1}
    losses = pd.read_csv(run_dir / "losses.csv")
    assert list(losses.columns) == LOSS_COLUMNS
    assert {"train", "eval/trigger", "eval/non_trigger", "baseline/trigger"} <= set(losses["split"])

    summary = json.loads((run_dir / "summary.json").read_text())
    assert set(summary["loss"]) >= {"trigger", "non_trigger"} and set(summary["baseline_loss"]) >= {"trigger"}
    assert set(summary["sink_attn"]["0"]) >= {"trigger", "non_trigger"}
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["device"]["resolved"] == "cpu" and meta["steps_per_s"] > 0
    assert meta["config_hash"] == run_dir.name.split("-")[-1]
    assert meta["threads"].startswith(str(meta["device"]["torch_threads"]))  # the count and why
    assert meta["denormals"].startswith(("flushed to zero", "kept (the CPU cannot"))  # machine/denormals.py
    assert "threads: " in (run_dir / "train.log").read_text().splitlines()[0]
    assert "sink_attn, non_trigger queries" in result.stdout and "layer 0: " in result.stdout


def test_a_language_model_run_prints_the_sink_rate_over_heads_and_massive_activations(tmp_path):
    """task=lm with the llama preset, shrunk: the table has every layer's massive-activation rows and
    the model's sink rate over all heads, and the run evaluates on the held-out split. The task's
    100-step warm-up follows the 30 steps given (sinkexp/config/follow.py), and the run records that."""
    small = ("task=lm", "model.n_layers=2", "model.n_heads=2", "model.d_model=32", "task.seq_len=32", *QUICK)
    result = sinkexp("train", *small, "hydra.run.dir=lm", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    for row in (
        "massive_ratio",
        "massive_at_sink",
        "sink_rate@0.3 (heads x seqs)",
        "model: sink rate over all heads",
        "next to the bigram model of the training split",
    ):
        assert row in result.stdout, row
    metrics = pd.read_csv(tmp_path / "lm/metrics.csv")
    final = metrics[metrics["step"] == 30]
    assert set(final.loc[final["metric"] == "massive_channel", "layer"]) == {0, 1}
    assert final.loc[final["metric"] == "massive_position", "value"].between(0, 31).all()
    config = (tmp_path / "lm/config.yaml").read_text()
    assert "norm_type: rmsnorm" in config and "mlp: swiglu" in config and "pos: rope" in config
    assert "warmup: 30" in config
    followed = ["train.warmup=30 (the preset's 100, at most train.steps)"]
    assert json.loads((tmp_path / "lm/meta.json").read_text())["followed"] == followed
    assert f"followed: {followed}" in (tmp_path / "lm/train.log").read_text()


def test_sweep_writes_one_readable_folder_per_run(tmp_path):
    result = sinkexp("train", "-m", "attn=softmax,relu", "seed=0,1", "name=smoke", *QUICK, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    done = sorted(p.parent.relative_to(tmp_path / "outputs/sweeps/smoke") for p in tmp_path.rglob("DONE"))
    assert [str(p.parent) for p in done] == ["trigger/relu/L1"] * 2 + ["trigger/softmax/L1"] * 2
    assert sorted(p.name.split("-")[0] for p in done) == ["s0", "s0", "s1", "s1"]
    headers = [line for line in result.stdout.splitlines() if line.startswith("== job")]
    assert headers[0].startswith("== job 0: attn=softmax seed=0") and len(headers) == 4
    assert result.stdout.strip().splitlines()[-1] == f"sweep: 4 of 4 runs finished, in {tmp_path}/outputs/sweeps/smoke"


@pytest.mark.parametrize(
    "args,key",
    [(["task=nope"], "task"), (["model.n_heads=3"], "model.n_heads"), (["model.n_layer=2"], "model.n_layer")],
)
def test_bad_input_exits_nonzero_with_one_line_and_no_directory(tmp_path, args, key):
    result = sinkexp("train", *args, cwd=tmp_path)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and key in result.stderr
    assert not (tmp_path / "outputs").exists()


def test_help_lists_groups_and_cfg_prints_the_composed_config(tmp_path):
    helped = sinkexp("train", "--help", cwd=tmp_path)
    assert helped.returncode == 0
    for group in ("task", "attn"):  # configs/<group>/*.yaml: a new option is listed without an edit here
        assert f"{group}: {', '.join(group_options()[group])}" in helped.stdout
    for group in ("model: default, llama", "scale: cpu, reach, paper"):  # smallest to largest (config/schema.py SCALES)
        assert group in helped.stdout
    shown = sinkexp("train", "--cfg", "job", "attn=relu", "model.n_layers=3", cwd=tmp_path)
    assert shown.returncode == 0 and "n_layers: 3" in shown.stdout and "name: relu" in shown.stdout
    assert not (tmp_path / "outputs").exists()


def test_rerunning_a_sweep_leaves_finished_runs_untouched(tmp_path):
    args = ("train", "-m", "attn=softmax,relu", "name=again", *QUICK)
    assert sinkexp(*args, cwd=tmp_path).returncode == 0
    runs = tmp_path / "outputs/sweeps/again/trigger"  # Hydra rewrites its own multirun.yaml above
    stamps = {p: p.stat().st_mtime_ns for p in runs.rglob("*") if p.is_file()}
    assert len(stamps) > 10 and any(".hydra" in p.parts for p in stamps)
    again = sinkexp(*args, cwd=tmp_path)
    assert again.returncode == 0
    assert {p: p.stat().st_mtime_ns for p in runs.rglob("*") if p.is_file()} == stamps  # .hydra, train.log too
    lines = [line for line in again.stdout.splitlines() if not line.startswith("[")]  # not Hydra's launcher lines
    ours = [line for line in lines if not line.startswith(("== job", "sweep: "))]  # each job's header, the summary
    assert len(ours) == 2 and all("finished already" in line for line in ours)
    assert lines[-1].startswith("sweep: 2 of 2 runs finished")


def test_an_experiment_grid_is_checked_and_composes(tmp_path):
    bad = sinkexp("train", "-m", "+experiment=trigger_grid", "model.n_heads=3", cwd=tmp_path)
    assert bad.returncode == 2 and "model.n_heads=3" in bad.stderr
    shown = sinkexp("train", "+experiment=trigger_grid", "--cfg", "hydra", "-p", "hydra.sweeper.params", cwd=tmp_path)
    assert shown.returncode == 0 and "model.n_layers: 1,2,3" in shown.stdout
    both = sinkexp("train", "-m", "--cfg", "job", cwd=tmp_path)
    assert both.returncode == 2 and "-m cannot be combined" in both.stderr


def test_slurm_launcher_preset_composes(tmp_path):
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    shown = sinkexp(
        "train",
        "hydra/launcher=slurm",
        "hydra.launcher.partition=gpu",
        "--cfg",
        "hydra",
        "-p",
        "hydra.launcher",
        cwd=tmp_path,
    )
    assert shown.returncode == 0, shown.stderr
    assert "SlurmLauncher" in shown.stdout and "partition: gpu" in shown.stdout and "gpus_per_node: 1" in shown.stdout
    assert "max_num_timeout: 5" in shown.stdout and "signal_delay_s: 120" in shown.stdout  # requeue on timeout


@pytest.mark.parametrize(
    "launcher,plugin", [("parallel", "hydra_joblib_launcher"), ("submitit_local", "hydra_submitit_launcher")]
)
def test_launchers_run_the_same_path_for_real(tmp_path, launcher, plugin):
    pytest.importorskip(f"hydra_plugins.{plugin}")
    result = sinkexp("train", "-m", f"hydra/launcher={launcher}", "seed=0,1", "name=l", *QUICK, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    metas = sorted((tmp_path / "outputs/sweeps/l").rglob("meta.json"))
    assert len(list((tmp_path / "outputs/sweeps/l").rglob("DONE"))) == 2 and len(metas) == 2
    if launcher == "parallel":
        assert all(json.loads(m.read_text())["device"]["torch_threads"] == 1 for m in metas)


def test_each_sweep_job_records_its_own_command(tmp_path, monkeypatch):
    """The parallel launcher reuses its worker processes across sweeps in one process (as
    `sinkexp reproduce` runs them): a job's meta.json must not carry an earlier sweep's sys.argv."""
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher")
    from sinkexp.cli import train

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TQDM_DISABLE", "1")
    for name, seeds in (("first", "0,1"), ("second", "2,3")):
        assert train(["-m", "hydra/launcher=parallel", f"seed={seeds}", f"name={name}", *QUICK]) == 0
    for name, seeds in (("first", {"0", "1"}), ("second", {"2", "3"})):
        argvs = [json.loads(m.read_text())["argv"] for m in (tmp_path / "outputs/sweeps" / name).rglob("meta.json")]
        assert {a[0] for a in argvs} == {"sinkexp train"}
        assert {a.removeprefix("seed=") for argv in argvs for a in argv if a.startswith("seed=")} == seeds
        assert all(f"name={name}" in argv for argv in argvs)


@pytest.mark.parametrize(
    "args,says",
    [
        (["model.n_layers=é"], "cannot parse the overrides"),
        (["hydra.run.dir="], "hydra.run.dir is empty"),
        (["-m", "name=../../x", "seed=0"], "name="),
        (["model.n_layers=1000000000"], "GiB"),
    ],
)
def test_values_that_would_fail_later_are_refused_first(tmp_path, args, says):
    flags = [a for a in args if a == "-m"]
    result = sinkexp("train", *flags, *QUICK, *[a for a in args if a not in flags], cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and says in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_another_configs_directory_is_refused_without_touching_it(tmp_path):
    assert sinkexp("train", "hydra.run.dir=taken", *QUICK, cwd=tmp_path).returncode == 0
    stamps = {p: p.stat().st_mtime_ns for p in (tmp_path / "taken").rglob("*")}
    refused = sinkexp("train", "hydra.run.dir=taken", "seed=1", *QUICK, cwd=tmp_path)
    assert refused.returncode == 2 and "another config" in refused.stderr
    again = sinkexp("train", "hydra.run.dir=taken", *QUICK, cwd=tmp_path)  # the same config: skipped
    assert again.returncode == 0 and again.stdout.strip().splitlines() == [
        f"{tmp_path / 'taken'} is finished already "
        f"(hash {json.loads((tmp_path / 'taken/meta.json').read_text())['config_hash']}); left untouched"
    ]
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "taken").rglob("*")} == stamps  # .hydra and train.log too


def test_a_sweep_with_a_failed_job_exits_nonzero_and_says_how_many(tmp_path):
    result = sinkexp("train", "-m", "train.lr=1e-3,1e6", "name=mixed", *QUICK, cwd=tmp_path)
    assert result.returncode == 1
    assert "diverged" in result.stderr and "1 of 2 runs did not finish: 1 failed" in result.stderr
    statuses = sorted(p.name for p in (tmp_path / "outputs/sweeps/mixed").rglob("*") if p.name in ("DONE", "FAILED"))
    assert statuses == ["DONE", "FAILED"]


def test_a_diverging_single_run_ends_with_one_line_and_failed(tmp_path):
    result = sinkexp("train", "train.lr=1e6", "train.steps=1", "hydra.run.dir=div", cwd=tmp_path)
    assert result.returncode == 1 and "sinkexp: error: diverged" in result.stderr
    assert "Traceback" not in result.stderr
    assert (tmp_path / "div/FAILED").exists() and not (tmp_path / "div/DONE").exists()


def test_version_help_and_shell_completion(tmp_path):
    import sinkexp as package

    assert sinkexp("--version", cwd=tmp_path).stdout.strip() == f"sinkexp {package.__version__}"
    helped = sinkexp("train", "--help", cwd=tmp_path).stdout
    assert "task_scale" not in helped and "model.norm: pre, post, sandwich, none" in helped
    assert "attn.gate: none, headwise, elementwise" in helped
    script = sinkexp("-sc", "install=bash", cwd=tmp_path).stdout
    assert script.rstrip().endswith("hydra_bash_completion sinkexp")  # registered for the command
    env = {**os.environ, "COMP_LINE": "sinkexp train attn=rel", "COMP_POINT": "22"}
    query = subprocess.run(
        [sys.executable, "-m", "sinkexp.cli", "-sc", "query=bash"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert query.stdout.split() == [f"attn={o}" for o in group_options()["attn"] if o.startswith("rel")]  # relu, ...


def test_experiment_without_plus_and_files_readable_as_the_umask_allows(tmp_path):
    shown = sinkexp("train", "experiment=trigger_grid", "--cfg", "hydra", "-p", "hydra.sweeper.params", cwd=tmp_path)
    assert shown.returncode == 0 and "model.n_layers: 1,2,3" in shown.stdout
    result = subprocess.run(
        ["bash", "-c", f"umask 022 && {sys.executable} -m sinkexp.cli train hydra.run.dir=r " + " ".join(QUICK)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    modes = {p.name: oct(p.stat().st_mode & 0o777) for p in (tmp_path / "r").iterdir() if p.is_file()}
    assert set(modes.values()) == {"0o644"}, modes
