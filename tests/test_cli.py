"""Smoke runs of the `sinkexp` command into temporary directories.

Most run the command in this process (`cli.invoke`, the function the console script calls, with its
output captured), which spares each a Python, torch and Hydra start-up; those that need a process
of their own (the installed entry point, signals, two processes at once, the umask, shell
completion) start one.
"""
import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
from conftest import QUICK

from sinkexp import cli
from sinkexp.evaluate.tables import LOSS_COLUMNS, METRIC_COLUMNS


def sinkexp(*args, cwd, process=False):
    """`sinkexp ARGS` run in `cwd`: in this process, or as a process of its own with process=True."""
    if process:
        env = {**os.environ, "TQDM_DISABLE": "1"}
        return subprocess.run([sys.executable, "-m", "sinkexp.cli", *args], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=300)
    out, err = io.StringIO(), io.StringIO()
    here, argv = os.getcwd(), sys.argv[:]
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = cli.invoke(list(args))
            except SystemExit as exit:          # Hydra exits for --help, --cfg and a run's uncaught error
                code = exit.code if isinstance(exit.code, int) else 1
    finally:
        os.chdir(here)
        sys.argv = argv
        if "hydra/launcher=parallel" in args:   # its reused workers keep this cwd: the next test's must be fresh
            from joblib.externals.loky import get_reusable_executor
            get_reusable_executor().shutdown(wait=True)
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def test_single_run_writes_the_run_directory(tmp_path):
    result = sinkexp("train", "attn=relu", "model.n_heads=2", *QUICK, cwd=tmp_path, process=True)
    assert result.returncode == 0, result.stderr
    run_dir = Path(result.stdout.strip().splitlines()[-1].removeprefix("run directory: "))
    assert run_dir.parent == tmp_path / "outputs/runs/trigger/relu/L1"
    for name in ("config.yaml", "meta.json", "metrics.csv", "losses.csv", "summary.json", "checkpoint.pt",
                 "DONE", "train.log", ".hydra/config.yaml"):
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
    assert meta["threads"].startswith(str(meta["device"]["torch_threads"]))     # the count and why
    assert "threads: " in (run_dir / "train.log").read_text().splitlines()[0]
    assert "sink_attn, non_trigger queries" in result.stdout and "layer 0: " in result.stdout



def test_a_language_model_run_prints_the_sink_rate_over_heads_and_massive_activations(tmp_path):
    """task=lm with the llama preset, shrunk: the table has every layer's massive-activation rows and
    the model's sink rate over all heads, and the run evaluates on the held-out split. The task's
    100-step warm-up follows the 30 steps given (sinkexp/config/follow.py), and the run records that."""
    small = ("task=lm", "model.n_layers=2", "model.n_heads=2", "model.d_model=32", "task.seq_len=32", *QUICK)
    result = sinkexp("train", *small, "hydra.run.dir=lm", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    for row in ("massive_ratio", "massive_at_sink", "sink_rate@0.3 (share of heads)", "model: sink rate over all heads",
                "next to the bigram model of the training split"):
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


@pytest.mark.parametrize("args,key", [(["task=nope"], "task"), (["model.n_heads=3"], "model.n_heads"),
                                      (["model.n_layer=2"], "model.n_layer")])
def test_bad_input_exits_nonzero_with_one_line_and_no_directory(tmp_path, args, key):
    result = sinkexp("train", *args, cwd=tmp_path)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and key in result.stderr
    assert not (tmp_path / "outputs").exists()


def test_help_lists_groups_and_cfg_prints_the_composed_config(tmp_path):
    helped = sinkexp("train", "--help", cwd=tmp_path)
    assert helped.returncode == 0
    for group in ("task: backcopy, broadcast, damping, damping_dynamics, lm, trigger", "model: default, llama",
                  "attn: gated, relu, relu_len, relu_raw, sigmoid, sigmoid_nobias, sigmoid_norm, sink_kv, softmax, "
                  "softmax1, softpick",
                  "scale: cpu, paper"):
        assert group in helped.stdout
    shown = sinkexp("train", "--cfg", "job", "attn=relu", "model.n_layers=3", cwd=tmp_path)
    assert shown.returncode == 0 and "n_layers: 3" in shown.stdout and "name: relu" in shown.stdout
    assert not (tmp_path / "outputs").exists()


def test_rerunning_a_sweep_leaves_finished_runs_untouched(tmp_path):
    args = ("train", "-m", "attn=softmax,relu", "name=again", *QUICK)
    assert sinkexp(*args, cwd=tmp_path).returncode == 0
    runs = tmp_path / "outputs/sweeps/again/trigger"          # Hydra rewrites its own multirun.yaml above
    stamps = {p: p.stat().st_mtime_ns for p in runs.rglob("*") if p.is_file()}
    assert len(stamps) > 10 and any(".hydra" in p.parts for p in stamps)
    again = sinkexp(*args, cwd=tmp_path)
    assert again.returncode == 0
    assert {p: p.stat().st_mtime_ns for p in runs.rglob("*") if p.is_file()} == stamps   # .hydra, train.log too
    ours = [line for line in again.stdout.splitlines() if not line.startswith("[")]   # not Hydra's launcher lines
    assert len(ours) == 2 and all("finished already" in line for line in ours)


def test_an_experiment_grid_is_checked_and_composes(tmp_path):
    bad = sinkexp("train", "-m", "+experiment=trigger_grid", "model.n_heads=3", cwd=tmp_path)
    assert bad.returncode == 2 and "model.n_heads=3" in bad.stderr
    shown = sinkexp("train", "+experiment=trigger_grid", "--cfg", "hydra", "-p", "hydra.sweeper.params", cwd=tmp_path)
    assert shown.returncode == 0 and "model.n_layers: 1,2,3" in shown.stdout
    both = sinkexp("train", "-m", "--cfg", "job", cwd=tmp_path)
    assert both.returncode == 2 and "-m cannot be combined" in both.stderr


def test_slurm_launcher_preset_composes(tmp_path):
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    shown = sinkexp("train", "hydra/launcher=slurm", "hydra.launcher.partition=gpu", "--cfg", "hydra",
                    "-p", "hydra.launcher", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "SlurmLauncher" in shown.stdout and "partition: gpu" in shown.stdout and "gpus_per_node: 1" in shown.stdout
    assert "max_num_timeout: 5" in shown.stdout and "signal_delay_s: 120" in shown.stdout   # requeue on timeout


@pytest.mark.parametrize("launcher,plugin", [("parallel", "hydra_joblib_launcher"),
                                             ("submitit_local", "hydra_submitit_launcher")])
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


def test_replicas_write_the_directories_lone_runs_would(tmp_path, make_config):
    from sinkexp.config.identity import config_hash

    sweep = sinkexp("train", "-m", "seed=0", "train.replicas=2", "name=rep", *QUICK, cwd=tmp_path)
    assert sweep.returncode == 0, sweep.stderr
    hashes = [config_hash(make_config(*QUICK, f"seed={seed}")) for seed in (0, 1)]
    runs = tmp_path / "outputs/sweeps/rep/trigger/softmax/L1"
    assert sorted(p.name for p in runs.iterdir()) == [f"s0-{hashes[0]}", f"s1-{hashes[1]}"]
    assert all((p / "DONE").exists() for p in runs.iterdir())
    # Seed 1 alone, in the same sweep folder, finds its finished run and leaves it untouched.
    stamps = {p: p.stat().st_mtime_ns for p in (runs / f"s1-{hashes[1]}").iterdir() if p.is_file()}
    alone = sinkexp("train", "-m", "seed=1", "name=rep", *QUICK, cwd=tmp_path)
    assert alone.returncode == 0, alone.stderr
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps

    single = sinkexp("train", "train.replicas=2", "seed=3", *QUICK, cwd=tmp_path)
    assert single.returncode == 0, single.stderr
    printed = [Path(line.removeprefix("run directory: ")) for line in single.stdout.splitlines()
               if line.startswith("run directory: ")]
    assert [p.name.split("-")[-1] for p in printed] == [config_hash(make_config(*QUICK, f"seed={s}")) for s in (3, 4)]
    assert all((p / "DONE").exists() for p in printed)


def test_a_pack_trains_in_one_job_into_the_lone_runs_directories(make_config, tmp_path):
    """A weight-decay grid as one process: each run lands where `sinkexp train -m train.weight_decay=...`
    would put it; the job's own folder (its log) is the pack's first run's, and no other is made."""
    from sinkexp.config.identity import config_hash

    packed = sinkexp("train", "-m", "name=p", "pack={train.weight_decay:[0.01,0.1]}", "seed=0,1", *QUICK, cwd=tmp_path)
    assert packed.returncode == 0, packed.stderr
    runs = tmp_path / "outputs/sweeps/p/trigger/softmax/L1"
    assert sorted(p.name for p in runs.iterdir()) == sorted(
        f"s{seed}-{config_hash(make_config(*QUICK, f'train.weight_decay={wd}', f'seed={seed}'))}"
        for wd in (0.01, 0.1) for seed in (0, 1))
    assert all((p / "DONE").exists() for p in runs.iterdir())
    assert packed.stdout.count("run directory: ") == 4
    both = sinkexp("train", "-m", "pack={train.weight_decay:[0.01,0.1]}", "train.weight_decay=0,1", *QUICK,
                   cwd=tmp_path)
    assert both.returncode == 2 and "train.weight_decay is both swept and packed" in both.stderr


@pytest.mark.parametrize("args,says", [
    (["-m", "seed=0,1", "train.replicas=2"], "seed=0,2,4"),
    (["hydra.run.dir=fixed", "train.replicas=2"], "${seed}"),
    (["train.replicas=0"], "train.replicas=0"),
])
def test_replicas_that_would_collide_are_refused(tmp_path, args, says):
    result = sinkexp("train", *args, *QUICK, cwd=tmp_path)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert says in result.stderr and "train.replicas" in result.stderr
    assert not (tmp_path / "outputs").exists() and not (tmp_path / "fixed").exists()


@pytest.mark.parametrize("args,says", [
    (["model.n_layers=é"], "cannot parse the overrides"),
    (["hydra.run.dir="], "hydra.run.dir is empty"),
    (["-m", "name=../../x", "seed=0"], "name="),
    (["model.n_layers=1000000000"], "GiB"),
])
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
    again = sinkexp("train", "hydra.run.dir=taken", *QUICK, cwd=tmp_path)   # the same config: skipped
    assert again.returncode == 0 and again.stdout.strip().splitlines() == [
        f"{tmp_path / 'taken'} is finished already "
        f"(hash {json.loads((tmp_path / 'taken/meta.json').read_text())['config_hash']}); left untouched"]
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "taken").rglob("*")} == stamps   # .hydra and train.log too


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


def test_a_full_disk_ends_with_one_line_and_the_run_resumes_once_there_is_room(tmp_path, monkeypatch):
    """ENOSPC while the step-20 checkpoint is written: one line naming the file and what to do, exit 1,
    the step-10 checkpoint untouched; run again with room, the run resumes to an uninterrupted run's tables."""
    import errno

    real, written = Path.write_bytes, []

    def full_at_the_second_checkpoint(self, data):
        if self.name.startswith(".checkpoint.pt."):
            written.append(self.name)
            if len(written) == 2:
                raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, data)

    monkeypatch.setattr(Path, "write_bytes", full_at_the_second_checkpoint)
    args = (*QUICK, "threads=1")   # bit-equality needs one thread count; the default follows the machine's load
    result = sinkexp("train", *args, "hydra.run.dir=full", cwd=tmp_path)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1, result.stderr
    assert lines[0].startswith(f"sinkexp: error: cannot write {tmp_path / 'full/checkpoint.pt'}: no space left on the "
                               "device (ENOSPC); free space on it, then run the same command again")
    assert torch.load(tmp_path / "full/checkpoint.pt", weights_only=False)["trainer"]["step"] == 10
    assert not list((tmp_path / "full").glob(".checkpoint.pt.*"))             # no temporary file left
    monkeypatch.undo()
    assert sinkexp("train", *args, "hydra.run.dir=full", cwd=tmp_path).returncode == 0
    assert sinkexp("train", *args, "hydra.run.dir=whole", cwd=tmp_path).returncode == 0
    for name in ("metrics.csv", "losses.csv", "summary.json"):
        assert (tmp_path / "full" / name).read_bytes() == (tmp_path / "whole" / name).read_bytes(), name


def test_two_concurrent_sweeps_train_each_run_once(tmp_path):
    env = {**os.environ, "TQDM_DISABLE": "1"}
    args = [sys.executable, "-m", "sinkexp.cli", "train", "-m", "seed=0,1,2,3", "name=both", *QUICK,
            "train.steps=60", "train.checkpoint_every=20"]
    first = subprocess.Popen(args, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    second = subprocess.Popen(args, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    outcomes = [process.communicate(timeout=300) for process in (first, second)]
    runs = sorted((tmp_path / "outputs/sweeps/both/trigger/softmax/L1").iterdir())
    assert len(runs) == 4
    for run_dir in runs:
        assert (run_dir / "DONE").exists() and not (run_dir / "FAILED").exists(), run_dir
        log = (run_dir / "train.log").read_text()
        assert log.count("step 0 eval") == 1, log        # trained by one process, from the start once
        metrics = pd.read_csv(run_dir / "metrics.csv")
        assert sorted(metrics["step"].unique()) == list(range(0, 61, 10))
    for process, (_, err) in zip((first, second), outcomes):
        # a run skipped because the other sweep trains it is waited for and counted by how it ended
        assert process.returncode == 0, err


def test_sigterm_stops_a_run_like_ctrl_c(tmp_path):
    import signal
    import time

    env = {**os.environ, "TQDM_DISABLE": "1"}
    process = subprocess.Popen([sys.executable, "-m", "sinkexp.cli", "train", "hydra.run.dir=term", "device=cpu",
                                "train.steps=100000"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (tmp_path / "term/metrics.csv").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 143 and err.strip().endswith("resumes it from its last checkpoint)"), err
    assert len(err.strip().splitlines()) == 1, err
    assert "stopped by SIGTERM at step " in err and "(FAILED written;" in err, err
    assert (tmp_path / "term/FAILED").read_text().startswith("Interrupted: stopped by SIGTERM at step ")


def test_sigusr2_outside_submitit_stops_at_a_checkpoint_and_the_rerun_resumes_to_the_same_tables(tmp_path):
    """SLURM's `--signal=USR2@N` around a plain `sinkexp train`: the run trains on to the next step
    with no data drawn ahead, checkpoints there and stops with FAILED saying so, and one line after
    the progress bar (closed first: the line is the last on stderr); the same command resumes it."""
    import signal
    import time

    args = ("device=cpu", "train.steps=400", "eval.every=50", "train.checkpoint_every=100", "train.data_chunk=4",
            "train.batch_size=16", "eval.batch_size=32", "threads=1")
    assert sinkexp("train", "hydra.run.dir=whole", *args, cwd=tmp_path).returncode == 0
    env = {key: value for key, value in os.environ.items() if key != "TQDM_DISABLE"}   # the bar on stderr
    process = subprocess.Popen([sys.executable, "-m", "sinkexp.cli", "train", "hydra.run.dir=usr2", *args],
                               cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    log, deadline = tmp_path / "usr2/train.log", time.monotonic() + 120
    while not (log.exists() and "step 0 eval" in log.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGUSR2)
    _, err = process.communicate(timeout=120)
    step = torch.load(tmp_path / "usr2/checkpoint.pt", weights_only=True)["trainer"]["step"]
    assert process.returncode == 128 + signal.SIGUSR2 and 0 < step < 400 and step % 4 == 0, err
    assert err.rstrip("\n").split("\n")[-1] == (f"sinkexp: {tmp_path / 'usr2'} stopped by SIGUSR2 at step {step}, a "
                                                 "checkpoint written there (FAILED written; the same command resumes "
                                                 "it from its last checkpoint)")
    assert (tmp_path / "usr2/FAILED").read_text().startswith(f"Interrupted: stopped by SIGUSR2 at step {step},")
    assert sinkexp("train", "hydra.run.dir=usr2", *args, cwd=tmp_path).returncode == 0
    for name in ("metrics.csv", "losses.csv", "summary.json"):
        assert (tmp_path / "usr2" / name).read_bytes() == (tmp_path / "whole" / name).read_bytes(), name



def test_a_submitit_job_signalled_before_its_timeout_requeues_and_resumes_to_the_same_tables(tmp_path):
    """submitit's pre-timeout signal (USR2), sent by hand once the job has evaluated step 0: the job
    checkpoints, submitit_local requeues it, and the resumed run ends with a lone run's tables."""
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    import signal
    import time

    args = ("device=cpu", "train.steps=400", "eval.every=50", "train.checkpoint_every=100", "train.data_chunk=4",
            "train.batch_size=16", "eval.batch_size=32", "threads=1")
    assert sinkexp("train", "hydra.run.dir=whole", *args, cwd=tmp_path).returncode == 0
    env = {**os.environ, "TQDM_DISABLE": "1"}
    process = subprocess.Popen([sys.executable, "-m", "sinkexp.cli", "train", "-m", "hydra/launcher=submitit_local",
                                "name=rq", *args], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    deadline, signalled = time.monotonic() + 120, False
    while process.poll() is None and not signalled and time.monotonic() < deadline:
        for log in (tmp_path / "outputs/sweeps/rq").rglob("train.log"):
            holder = (log.parent / ".lock").read_text().split()     # "pid N on HOST": the job's process
            if "step 0 eval" in log.read_text() and holder:
                os.kill(int(holder[1]), signal.SIGUSR2)
                signalled = True
        time.sleep(0.05)
    _, err = process.communicate(timeout=240)
    assert signalled and process.returncode == 0, err
    (run_dir,) = (tmp_path / "outputs/sweeps/rq").rglob("DONE")
    run_dir = run_dir.parent
    resumed = json.loads((run_dir / "meta.json").read_text())["resumed_from_step"]
    assert resumed is not None and 0 < resumed < 400 and resumed % 4 == 0      # at a data-chunk boundary
    assert not (run_dir / "FAILED").exists()
    for name in ("metrics.csv", "losses.csv", "summary.json"):
        assert (run_dir / name).read_bytes() == (tmp_path / "whole" / name).read_bytes(), name

def test_version_help_and_shell_completion(tmp_path):
    import sinkexp as package

    assert sinkexp("--version", cwd=tmp_path).stdout.strip() == f"sinkexp {package.__version__}"
    helped = sinkexp("train", "--help", cwd=tmp_path).stdout
    assert "task_scale" not in helped and "model.norm: pre, post, sandwich, none" in helped
    assert "attn.gate: none, headwise, elementwise" in helped
    script = sinkexp("-sc", "install=bash", cwd=tmp_path).stdout
    assert script.rstrip().endswith("hydra_bash_completion sinkexp")      # registered for the command
    env = {**os.environ, "COMP_LINE": "sinkexp train attn=rel", "COMP_POINT": "22"}
    query = subprocess.run([sys.executable, "-m", "sinkexp.cli", "-sc", "query=bash"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=120)
    assert query.stdout.split() == ["attn=relu", "attn=relu_len", "attn=relu_raw"]


def test_experiment_without_plus_and_files_readable_as_the_umask_allows(tmp_path):
    shown = sinkexp("train", "experiment=trigger_grid", "--cfg", "hydra", "-p", "hydra.sweeper.params", cwd=tmp_path)
    assert shown.returncode == 0 and "model.n_layers: 1,2,3" in shown.stdout
    result = subprocess.run(["bash", "-c", f"umask 022 && {sys.executable} -m sinkexp.cli train hydra.run.dir=r "
                             + " ".join(QUICK)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    modes = {p.name: oct(p.stat().st_mode & 0o777) for p in (tmp_path / "r").iterdir() if p.is_file()}
    assert set(modes.values()) == {"0o644"}, modes
