"""sinkexp/jobs/memory.py on the CPU: the floor counts the attention path a run actually takes, a plan made
where the jobs will not run (a login node) is checked against the stated memory or left to the job,
and reproduce's pool sizes its GPU workers from memory."""

import pytest
import torch
import torch.nn.functional as F
from conftest import QUICK

from sinkexp.commands.overrides import read_sweep
from sinkexp.config.schema import run_configs
from sinkexp.errors import ConfigError
from sinkexp.jobs import memory
from sinkexp.jobs.launcher import BASIC, Launcher
from sinkexp.jobs.plan import plan
from sinkexp.jobs.runner import make_trainer
from sinkexp.machine.devices import CONTEXT_BYTES
from sinkexp.reproduce.command import decided

GiB = 2**30
JOBLIB = "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher"
SLURM = Launcher("hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher")


@pytest.mark.parametrize(
    "overrides",
    [
        (),
        ("train.replicas=2",),
        ("attn=relu",),
        ("attn=sink_kv",),
        ("train.bos_penalty=0.1",),
        ("train.common_mode_penalty=0.1",),
        ("pack={train.weight_decay:[0.0,0.1]}",),
    ],
)
def test_the_fused_path_is_predicted_as_the_trainer_takes_it(make_config, monkeypatch, overrides):
    """fused_training says whether a training step calls the fused kernel: counted in a real step."""
    cfg = make_config(*QUICK, *overrides)
    members = run_configs(cfg)
    calls = []
    fused = F.scaled_dot_product_attention
    monkeypatch.setattr(F, "scaled_dot_product_attention", lambda *a, **k: calls.append(1) or fused(*a, **k))
    _, trainer = make_trainer(members, torch.device("cpu"))
    trainer.train_step()
    assert bool(calls) == memory.fused_training(cfg, len(members))


def test_the_fused_path_counts_one_log_sum_exp_per_query_not_the_scores(make_config):
    """Explicit minus fused: 4 bytes x layers x batch x (3 H T^2 - H T), where the step outweighs evaluation."""
    sizes = (
        "task=lm",
        "model.n_layers=2",
        "model.n_heads=4",
        "model.d_model=64",
        "task.seq_len=128",
        "train.batch_size=32",
        "eval.batch_size=1",
    )
    fused, explicit = (make_config(*sizes, *extra) for extra in ((), ("train.bos_penalty=0.1",)))
    assert memory.fused_training(fused, 1) and not memory.fused_training(explicit, 1)
    L, B, H, T = 2, 32, 4, 128
    assert memory.bytes_needed(explicit) - memory.bytes_needed(fused) == 4 * L * B * (3 * H * T * T - H * T)


def test_the_paper_scale_language_model_fits_a_24_gib_card(make_config):
    """task=lm scale=paper (8 x 512, T 512, batch 64) trains on the fused path: under 24 GiB, where
    counting the explicit path's (B, H, T, T) tensors would refuse it."""
    cfg = make_config("task=lm", "scale=paper")
    paper_lm = make_config("task=lm", "scale=paper", "attn=sink_kv")
    assert memory.bytes_needed(cfg) < 24 * GiB < memory.bytes_needed(paper_lm)


def test_replicas_need_the_models_they_train(make_config):
    one, three = make_config(*QUICK), make_config(*QUICK, "train.replicas=3")
    assert memory.bytes_needed(three) == memory.bytes_needed(one, models=3) > memory.bytes_needed(one)


@pytest.fixture
def no_gpu_here(monkeypatch):
    monkeypatch.setattr(memory, "usable_gpus", lambda: 0)
    monkeypatch.delenv(memory.STATED, raising=False)


def test_a_login_node_defers_a_gpu_jobs_memory_check_to_the_job(no_gpu_here, make_config):
    cfg = make_config("device=cuda", "model.n_layers=64", "model.d_model=2048", "train.batch_size=4096")  # ~784 GiB
    memory.check_plan(cfg, SLURM, multirun=True)  # not refused: the job checks


def test_a_login_node_checks_against_the_stated_memory(no_gpu_here, make_config, monkeypatch):
    cfg = make_config("device=cuda", "model.n_layers=64", "model.d_model=2048", "train.batch_size=4096")  # ~784 GiB
    monkeypatch.setenv(memory.STATED, "80")
    with pytest.raises(ConfigError, match=r"need at least .* GiB .*cuda \(SINKEXP_DEVICE_MEMORY\) has 80 GiB"):
        memory.check_plan(cfg, SLURM, multirun=True)
    memory.check_plan(make_config("device=cuda"), SLURM, multirun=True)  # a small job fits
    monkeypatch.setenv(memory.STATED, "eighty")
    with pytest.raises(ConfigError, match="SINKEXP_DEVICE_MEMORY=eighty is not valid"):
        memory.check_plan(cfg, SLURM, multirun=True)


def test_a_login_node_cannot_resolve_auto_for_jobs_elsewhere(no_gpu_here, make_config):
    with pytest.raises(ConfigError, match="device=auto: .* name it: device=cuda or device=cpu"):
        memory.check_plan(make_config(), SLURM, multirun=True)


def test_jobs_that_run_here_are_checked_against_this_machine(no_gpu_here, make_config):
    with pytest.raises(ConfigError, match="device=cuda is not available"):
        memory.check_plan(make_config("device=cuda"), Launcher(), multirun=False)
    with pytest.raises(ConfigError, match="GiB .*; cpu has"):
        memory.check_plan(make_config("model.n_layers=100000", "model.d_model=4096"), Launcher(JOBLIB), True)


@pytest.mark.parametrize(
    "overrides,target,n_jobs",
    [
        ((), BASIC, -1),
        (("hydra/launcher=parallel",), JOBLIB, -1),
        (("hydra/launcher=parallel", "hydra.launcher.n_jobs=3"), JOBLIB, 3),
        (("hydra/launcher=slurm",), SLURM.target, -1),
        (
            ("hydra/launcher=submitit_local",),
            "hydra_plugins.hydra_submitit_launcher.submitit_launcher.LocalLauncher",
            -1,
        ),
    ],
)
def test_the_plan_reads_the_launcher_from_the_composed_config(overrides, target, n_jobs):
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher")
    launcher = plan(read_sweep(["device=cpu", *overrides], multirun=True)).launcher
    assert launcher == Launcher(target, n_jobs)
    assert (launcher.basic, launcher.parallel, launcher.elsewhere) == (
        target == BASIC,
        target == JOBLIB,
        target == SLURM.target,
    )


def test_the_plan_passes_the_launcher_to_the_check(make_config, monkeypatch, no_gpu_here):
    plan(read_sweep(["device=cuda", "hydra/launcher=slurm"], multirun=True))
    with pytest.raises(ConfigError, match="device=auto"):
        plan(read_sweep(["hydra/launcher=slurm"], multirun=True))


def test_gpu_jobs_share_a_gpus_free_memory(make_config, monkeypatch):
    """A parallel sweep's n_jobs over the GPUs each take their share of the least free GPU."""
    monkeypatch.setattr(memory, "usable_gpus", lambda: 2)
    monkeypatch.setattr(memory, "resolve_device", lambda requested: torch.device("cuda", 0))
    free = {0: 40 * GiB, 1: 10 * GiB}
    monkeypatch.setattr(memory, "available", lambda device: free[device.index])
    cfg = make_config("device=cuda")
    need = memory.bytes_needed(cfg)
    assert memory.jobs_per_gpu(Launcher(JOBLIB, n_jobs=8), 2) == 4
    memory.check_plan(cfg, Launcher(JOBLIB, n_jobs=8), multirun=True)  # 10 GiB / 4 jobs
    free[1] = 3 * need  # 3 needs of room, 4 jobs at once on it
    with pytest.raises(ConfigError, match=r"the least free of 2 GPUs \(free now, over 4 jobs at once\)"):
        memory.check_plan(cfg, Launcher(JOBLIB, n_jobs=8), multirun=True)
    memory.check_plan(cfg, Launcher(), multirun=True)  # Hydra's basic launcher: one at a time


def test_the_pool_gives_each_gpu_as_many_workers_as_its_memory_holds(make_config, monkeypatch):
    monkeypatch.setattr(memory, "usable_gpus", lambda: 2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5,7")
    monkeypatch.setattr(memory.os, "sched_getaffinity", lambda pid: set(range(16)))
    cfg = make_config(*QUICK)
    per_worker = memory.bytes_needed(cfg) + CONTEXT_BYTES
    monkeypatch.setattr(memory, "available", lambda device: 3 * per_worker)
    assert memory.pool_gpus("auto", [cfg], None) == ["5", "7"] * 3  # 3 per GPU, in turn
    assert memory.pool_gpus("cuda", [cfg], 3) == ["5", "7", "5"]  # hydra.launcher.n_jobs=3
    assert memory.pool_gpus("cuda:1", [cfg], None) == []  # one named GPU: no pinning
    assert memory.pool_gpus("auto", [], None) == []  # no job to run
    big = make_config("task=lm", "scale=paper")  # 13.9 GiB: these GPUs hold one
    assert memory.pool_gpus("auto", [cfg, big, cfg], None) == ["5", "7"]  # the largest job decides


def test_reproduce_sizes_its_pool_by_the_gpus_and_else_by_the_cores(make_config, monkeypatch):
    """run_pool and --estimate take one worker per GPU slot (memory.pool_gpus), the CPU pool one per core."""
    from types import SimpleNamespace

    from sinkexp.reproduce import pool

    monkeypatch.setattr(memory, "usable_gpus", lambda: 2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5,7")
    monkeypatch.setattr(memory.os, "sched_getaffinity", lambda pid: set(range(16)))
    cfg = make_config(*QUICK)
    monkeypatch.setattr(memory, "available", lambda device: 3 * (memory.bytes_needed(cfg) + CONTEXT_BYTES))
    jobs = [SimpleNamespace(config=cfg)] * 4
    assert pool.pool_workers(decided([]), jobs) == (["5", "7"] * 3, 6)
    assert pool.pool_workers(decided(["hydra.launcher.n_jobs=3"]), jobs) == (["5", "7", "5"], 3)
    assert pool.pool_workers(decided(["device=cpu", "hydra.launcher.n_jobs=3"]), jobs) == ([], 3)
    monkeypatch.setattr(memory, "usable_gpus", lambda: 0)
    assert pool.pool_workers(decided([]), jobs) == ([], pool.workers_for(decided([])))
