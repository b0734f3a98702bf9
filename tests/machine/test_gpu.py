"""CUDA checks: what a first GPU user runs. Skipped where torch sees no GPU (CI never has one);
scripts/gpu_check.sh runs them with scripts/bench_gpu.py as one script on a machine that has one.

Every task trains and evaluates; a killed run resumes to byte-identical tables (lone, replicas,
compiled, T = 256); fused and explicit attention agree in value and gradient; the precision and
determinism settings are recorded; a compiled lone run goes through the command line with
evaluation, checkpoints, data chunks and a penalty; packs equal their lone runs; no training step
waits for the GPU (lone, replicas, packs, after a resume); load_run of a GPU run reproduces its
last evaluation; bench_gpu.py runs at a small size. With two GPUs: tests/machine/test_two_gpus.py.
"""

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import QUICK
from helpers import assert_same_tables

from sinkexp.config.schema import run_configs
from sinkexp.jobs.runner import make_trainer, run, train_together
from sinkexp.machine import devices
from sinkexp.rundir import files, reading
from sinkexp.tasks import TASKS
from sinkexp.train.loop import Trainer
from sinkexp.train.replicas import ReplicaTrainer

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
ON_CUDA = (*QUICK[:-1], "device=cuda")  # 30 steps, evaluated and checkpointed every 10
ROOT = Path(__file__).parents[2]


@pytest.fixture(autouse=True)
def cpu_settings_after():
    """A CUDA run leaves deterministic mode on in the process; the CPU tests after these expect torch's defaults."""
    yield
    devices.configure(torch.device("cpu"), "exact")


def test_auto_resolves_to_an_indexed_cuda_device():
    assert devices.resolve_device("auto") == torch.device("cuda", torch.cuda.current_device())
    assert devices.device_kind("auto") == "cuda" and devices.cuda_status() == (True, None)


@pytest.mark.parametrize("task", sorted(TASKS))
def test_every_task_trains_and_evaluates_on_cuda(make_config, tmp_path, task):
    summary = run(make_config(*ON_CUDA, f"task={task}"), tmp_path)
    assert (tmp_path / "DONE").exists() and summary["step"] == 30
    assert files.read_json(tmp_path / files.META)["device"]["resolved"].startswith("cuda:")


@pytest.mark.parametrize("precision, matmul, tf32", [("exact", "highest", False), ("tf32", "high", True)])
def test_precision_and_determinism_are_recorded(make_config, tmp_path, precision, matmul, tf32):
    run(make_config(*ON_CUDA, f"precision={precision}"), tmp_path)
    assert files.read_json(tmp_path / files.META)["device"]["precision"] == {
        "float32_matmul_precision": matmul,
        "cuda_matmul_allow_tf32": tf32,
        "cudnn_allow_tf32": tf32,
        "deterministic_algorithms": True,
        "cublas_workspace_config": ":4096:8",
    }


RESUMES = {
    "lone": (),
    "replicas": ("train.replicas=2",),
    "compiled": ("train.compile=true",),
    "T256": ("task=backcopy", "task.seq_len=256", "model.n_heads=2", "train.batch_size=8", "eval.batch_size=8"),
}


@pytest.mark.parametrize("case", RESUMES)
def test_a_killed_run_resumes_to_identical_tables(make_config, tmp_path, kill_at_step, case):
    """Killed at step 25, resumed from the step-20 checkpoint: byte-identical tables. T256: the
    fused kernel's backward would split 256 keys across blocks, summed with atomics, without
    deterministic mode (devices.configure)."""
    members = run_configs(make_config(*ON_CUDA, "model.n_heads=2", *RESUMES[case]))
    cls = ReplicaTrainer if len(members) > 1 else Trainer
    train_together(members, [tmp_path / f"whole{k}" for k in range(len(members))])
    kill_at_step(cls, 25)
    with pytest.raises(KeyboardInterrupt):
        train_together(members, [tmp_path / f"split{k}" for k in range(len(members))])
    kill_at_step(cls, None)
    train_together(members, [tmp_path / f"split{k}" for k in range(len(members))])
    for k in range(len(members)):
        for name in (files.METRICS_CSV, files.LOSSES, files.SUMMARY):
            assert (tmp_path / f"split{k}" / name).read_bytes() == (tmp_path / f"whole{k}" / name).read_bytes(), name


@pytest.mark.parametrize("T", [32, 256])
def test_fused_and_explicit_attention_agree_in_value_and_gradient(T):
    """The fused kernel (memory-efficient, 3xTF32 products on Ampere and later) against the explicit
    path (full fp32 with precision=exact)."""
    from sinkexp.config.schema import AttnConfig
    from sinkexp.model import capture
    from sinkexp.model.attention import Attention

    devices.configure(torch.device("cuda"), "exact")
    torch.manual_seed(0)
    attention = Attention(64, 4, AttnConfig()).cuda()
    visible = torch.ones(T, T, dtype=torch.bool, device="cuda").tril()
    results = []
    for explicit in (False, True):
        x = torch.randn(8, T, 64, device="cuda", generator=torch.Generator("cuda").manual_seed(1), requires_grad=True)
        attention.zero_grad()
        if explicit:
            with capture(attention, ["weights"]):
                out = attention(x, visible)
        else:
            out = attention(x, visible)
        (out**2).sum().backward()
        results.append((out.detach(), x.grad, attention.qkv.weight.grad.clone()))
    for fused, explicit in zip(*results):
        torch.testing.assert_close(fused, explicit, atol=1e-4, rtol=1e-4)


def test_a_compiled_lone_run_through_the_command_line(tmp_path):
    """`sinkexp train` with CUDA graphs, evaluation, kept checkpoints, 4-step data chunks and a penalty."""
    args = [
        "task=backcopy",
        "device=cuda",
        "train.compile=true",
        "train.steps=40",
        "eval.every=20",
        "train.checkpoint_every=20",
        "train.keep_checkpoints=true",
        "train.data_chunk=4",
        "train.common_mode_penalty=0.1",
        "train.batch_size=16",
        "eval.batch_size=32",
        f"hydra.run.dir={tmp_path}",
    ]
    done = subprocess.run(
        [sys.executable, "-m", "sinkexp.cli", "train", *args], capture_output=True, text=True, cwd=tmp_path, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / files.DONE).exists() and reading.RunFiles(tmp_path).kept_steps() == [20, 40]
    assert sorted(set(reading.RunFiles(tmp_path).metrics["step"])) == [0, 20, 40]
    meta = files.read_json(tmp_path / files.META)
    assert meta["device"]["resolved"] == "cuda:0" and meta["device"]["precision"]["deterministic_algorithms"]


def test_a_pack_equals_its_lone_runs_on_cuda(make_config, tmp_path):
    cfg = make_config(*ON_CUDA, "task=backcopy", "model.n_heads=2", "pack={train.weight_decay:[0.0,3.0]}", "seed=3")
    packed = run_configs(cfg)
    train_together(packed, [tmp_path / f"together{k}" for k in range(2)])
    for k, member in enumerate(packed):
        run(member, tmp_path / f"alone{k}")
        assert_same_tables(tmp_path / f"together{k}", tmp_path / f"alone{k}")
    with pytest.raises(AssertionError):  # the packed value matters
        assert_same_tables(tmp_path / "alone0", tmp_path / "alone1")


def test_replicas_on_cuda_equal_lone_runs(make_config, tmp_path):
    cfg = make_config(*ON_CUDA, "model.n_heads=2", "train.replicas=3")
    train_together(run_configs(cfg), [tmp_path / f"together{k}" for k in range(3)])
    for k, lone in enumerate(run_configs(cfg)):
        run(lone, tmp_path / f"alone{k}")  # replicas=3 is not hashed: the lone run is the same run
        assert_same_tables(tmp_path / f"together{k}", tmp_path / f"alone{k}")


def test_compiled_replicas_with_cuda_graphs_match_eager(make_config):
    trainers = [
        make_trainer(
            run_configs(make_config("model.n_heads=2", "train.replicas=4", "device=cuda", f"train.compile={compile}")),
            torch.device("cuda"),
        )[1]
        for compile in (False, True)
    ]
    for _ in range(5):
        eager, compiled = (trainer.train_step() for trainer in trainers)
        torch.testing.assert_close(compiled, eager, rtol=1e-4, atol=1e-6)


def resumed(trainer, members):
    """A fresh trainer continued from `trainer`'s state as a checkpoint holds it (saved, loaded to the CPU)."""
    _, fresh = make_trainer(members, torch.device("cuda"))
    buffer = io.BytesIO()
    states = [view.state_dict() for view in trainer.views()] if len(members) > 1 else [trainer.state_dict()]
    torch.save(states, buffer)
    buffer.seek(0)
    states = torch.load(buffer, map_location="cpu", weights_only=True)
    fresh.load_state_dicts(states) if len(members) > 1 else fresh.load_state_dict(states[0])
    return fresh


TRAINERS = {
    "lone": (),
    "replicas": ("train.replicas=4",),
    "pack": ("pack={train.weight_decay:[0.0,0.1]}",),
    "resumed": ("train.replicas=2",),
    "resumed lone": (),
}


@pytest.mark.parametrize("task", sorted(TASKS))
@pytest.mark.parametrize("which", TRAINERS)
def test_training_steps_never_wait_for_the_gpu(make_config, task, which):
    """No host synchronisation inside a step (deterministic mode on, as in a run): data, loss,
    clipping and optimiser stay on the device, after a resume too."""
    members = run_configs(make_config(f"task={task}", "train.batch_size=16", "device=cuda", *TRAINERS[which]))
    devices.configure(torch.device("cuda"), "exact")
    _, trainer = make_trainer(members, torch.device("cuda"))
    trainer.train_step()  # the first step allocates optimiser state
    if which.startswith("resumed"):
        trainer = resumed(trainer, members)
    trainer.train_step()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(3):
            trainer.train_step()
    finally:
        torch.cuda.set_sync_debug_mode("default")


def test_load_run_of_a_gpu_run_reproduces_its_last_evaluation(make_config, tmp_path):
    from sinkexp import load_run
    from sinkexp.evaluate.evaluator import evaluate

    run(make_config(*ON_CUDA, "model.n_heads=2"), tmp_path)
    loaded = load_run(tmp_path)
    assert loaded.batch.inputs.device.type == "cuda" and loaded.step == 30
    rows, losses = evaluate(loaded.model, loaded.task, loaded.batch, loaded.step)
    metrics = loaded.metrics[loaded.metrics["step"] == 30]
    assert [row[-1] for row in rows] == pytest.approx(metrics["value"].tolist(), rel=1e-6, abs=1e-9)
    recorded = loaded.losses[(loaded.losses["step"] == 30) & loaded.losses["split"].str.contains("/")]
    assert [loss for _, _, loss in losses] == pytest.approx(recorded["loss"].tolist(), rel=1e-6)


def test_bench_gpu_runs_at_a_small_size(tmp_path):
    out = tmp_path / "bench.json"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "bench_gpu.py"),
            "--ks",
            "1,4",
            "--chunks",
            "1",
            "--seconds",
            "0.5",
            "--damping-steps",
            "100",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads(out.read_text())
    assert [row["K"] for row in results["replicas"]] == [1, 4] and results["damping"]["steps"] == 100
    assert all(row["deterministic_steps_per_s"] > 0 for row in results["determinism"])
