"""train.replicas=K: K seeds trained together along a model axis, each run directory as if alone."""

import json
import shutil

import pytest
import torch
from conftest import QUICK
from helpers import assert_same_tables

from sinkexp.config.identity import config_hash
from sinkexp.config.schema import run_configs
from sinkexp.errors import ConfigError
from sinkexp.jobs.runner import make_trainer, run, train_together
from sinkexp.rundir import files
from sinkexp.rundir.reading import run_status
from sinkexp.train.loop import Trainer, make_optimizer
from sinkexp.train.replicas import PerReplicaOptimizer, ReplicaTrainer, clip_grad_norm_per_replica_

# Two settings that touch every per-replica piece: clipping that bites (gradient norms here are
# 0.008-0.02, and SGD's step scales with the clipped gradient where AdamW's barely does), AdamW and
# SGD with momentum, vector and token tasks, fused softmax and explicit relu attention, an MLP and
# a register, and data drawn 4 steps at a time. Clipping all replicas by one joint norm fails the
# first setting.
SETTINGS = {
    "trigger-sgd-clipped": ("model.n_heads=2", "train.optim=sgd", "train.lr=1.0", "train.grad_clip=0.005"),
    "backcopy-adamw-relu-chunked": (
        "task=backcopy",
        "attn=relu",
        "model.n_layers=2",
        "model.mlp=gelu",
        "model.n_registers=1",
        "train.data_chunk=4",
    ),
}


@pytest.mark.parametrize("setting", SETTINGS)
def test_k_replicas_equal_k_lone_runs(make_config, tmp_path, setting):
    cfg = make_config(*QUICK, *SETTINGS[setting], "seed=4", "train.replicas=3")
    lone = [make_config(*QUICK, *SETTINGS[setting], f"seed={seed}") for seed in (4, 5, 6)]
    assert [c.seed for c in run_configs(cfg)] == [4, 5, 6]
    assert [config_hash(c) for c in run_configs(cfg)] == [config_hash(c) for c in lone]
    train_together(run_configs(cfg), [tmp_path / f"together{k}" for k in range(3)])
    for k, lone_cfg in enumerate(lone):
        run(lone_cfg, tmp_path / f"alone{k}")
        together, alone = tmp_path / f"together{k}", tmp_path / f"alone{k}"
        assert_same_tables(together, alone)
        meta = json.loads((together / files.META).read_text())
        assert meta["seed"] == 4 + k and meta["replica"] == {"index": k, "of": 3}
        assert meta["config_hash"] == json.loads((alone / files.META).read_text())["config_hash"]
        assert (together / files.DONE).exists()


# Packs (pack={key: [values]}): grids over what a replica can carry, each with a setting that makes
# the values matter within 30 steps (the lone runs' tables differ by far more than the tolerance).
PACKS = {
    "weight_decay": (("task=backcopy", "model.n_heads=2"), "train.weight_decay", (0.0, 3.0)),
    "gamma": (("task=damping",), "task.gamma", (0.0, 1.0)),
    "lr_sgd_clipped": (("model.n_heads=2", "train.optim=sgd", "train.grad_clip=0.05"), "train.lr", (0.3, 1.0)),
    "structure": (("task=broadcast", "train.data_chunk=4"), "task.structure_seed", (0, 1)),
}


@pytest.mark.parametrize("pack", PACKS)
def test_a_packed_grid_equals_its_lone_runs(make_config, tmp_path, pack):
    extra, key, values = PACKS[pack]
    cfg = make_config(*QUICK, *extra, f"pack={{{key}:[{','.join(map(str, values))}]}}", "seed=3", "train.replicas=2")
    lone = [make_config(*QUICK, *extra, f"{key}={value}", f"seed={seed}") for value in values for seed in (3, 4)]
    packed = run_configs(cfg)
    assert [config_hash(c) for c in packed] == [config_hash(c) for c in lone]  # the lone runs' names
    train_together(packed, [tmp_path / f"together{k}" for k in range(4)])
    for k, lone_cfg in enumerate(lone):
        run(lone_cfg, tmp_path / f"alone{k}")
        assert_same_tables(tmp_path / f"together{k}", tmp_path / f"alone{k}")
    # The packed value matters: the two values' lone runs (seed 3) are far apart.
    with pytest.raises(AssertionError):
        assert_same_tables(tmp_path / "alone0", tmp_path / "alone2")


def test_a_diverging_learning_rate_fails_alone_and_the_rest_of_its_pack_finishes(make_config, tmp_path):
    """pack={train.lr: [1e-3, 1e6]} x 2 seeds: the two runs at 1e6 diverge and are marked FAILED with
    their own rate; the two at 1e-3 go on from their last checkpoint and end as their lone runs."""
    from sinkexp.train.loop import Diverged

    cfg = make_config(*QUICK, "pack={train.lr:[1e-3,1e6]}", "seed=3", "train.replicas=2")
    dirs = [tmp_path / f"together{k}" for k in range(4)]  # lr 1e-3 seeds 3, 4; lr 1e6 seeds 3, 4
    with pytest.raises(Diverged, match=r"2 runs of the pack diverged.*together2 diverged .*now 1e\+06"):
        train_together(run_configs(cfg), dirs)
    for k in (2, 3):
        assert run_status(dirs[k]).status == "failed"
        assert f"together{k} diverged" in (dirs[k] / files.FAILED).read_text().splitlines()[0]
    for k, seed in ((0, 3), (1, 4)):
        run(make_config(*QUICK, "train.lr=1e-3", f"seed={seed}"), tmp_path / f"alone{k}")
        assert run_status(dirs[k]).status == "done" and not (dirs[k] / files.FAILED).exists()
        assert_same_tables(dirs[k], tmp_path / f"alone{k}")


def test_after_a_late_divergence_the_packs_other_run_resumes_from_its_checkpoint(make_config, tmp_path, monkeypatch):
    """Replica 1's weights turn NaN at step 15: it is marked FAILED; replica 0 goes on from its step-10
    checkpoint and ends as its lone run."""
    from sinkexp.train.loop import Diverged

    real = ReplicaTrainer.train_step

    def poisoned(self):
        loss = real(self)
        if self.step == 14:  # the 15th step
            with torch.no_grad():
                next(iter(self.params.values()))[1].fill_(float("nan"))
        return loss

    monkeypatch.setattr(ReplicaTrainer, "train_step", poisoned)
    cfg = make_config(*QUICK, "seed=3", "train.replicas=2")
    dirs = [tmp_path / "together0", tmp_path / "together1"]
    with pytest.raises(Diverged, match=r"together1 diverged by step 15 \(a parameter is not finite\)"):
        train_together(run_configs(cfg), dirs)
    assert run_status(dirs[1]).status == "failed" and run_status(dirs[0]).status == "done"
    assert json.loads((dirs[0] / files.META).read_text())["resumed_from_step"] == 10
    run(make_config(*QUICK, "seed=3"), tmp_path / "alone")
    assert_same_tables(dirs[0], tmp_path / "alone")


def test_a_pack_refuses_what_it_cannot_vary(make_config):
    with pytest.raises(ConfigError, match="pack: model.n_layers cannot be packed .*train.weight_decay"):
        make_config("pack={model.n_layers:[1,2]}")
    with pytest.raises(ConfigError, match="pack: task.gamma cannot be packed .*task trigger"):
        make_config("pack={task.gamma:[0,1]}")
    with pytest.raises(ConfigError, match="pack.train.lr"):
        make_config("pack={train.lr:[0.1,abc]}")
    with pytest.raises(ConfigError, match="train.lr=-1"):  # each packed run is validated as alone
        make_config("pack={train.lr:[0.1,-1]}")
    with pytest.raises(ConfigError, match="train.bos_penalty.*pack"):
        make_config("pack={train.lr:[0.1,0.2]}", "train.bos_penalty=1")
    with pytest.raises(ValueError, match="model.n_layers"):
        make_trainer([make_config(), make_config("model.n_layers=2")], torch.device("cpu"))


def test_killed_replicas_resume_together_or_alone(make_config, tmp_path, kill_at_step):
    cfg = make_config(*QUICK, "model.n_heads=2", "train.replicas=2")
    seeds = run_configs(cfg)
    train_together(seeds, [tmp_path / "whole0", tmp_path / "whole1"])

    for split in ("together", "mixed"):
        kill_at_step(ReplicaTrainer, 25)
        with pytest.raises(KeyboardInterrupt):
            train_together(seeds, [tmp_path / f"{split}0", tmp_path / f"{split}1"])
        for k in range(2):
            assert (tmp_path / f"{split}{k}/FAILED").exists()
    kill_at_step(ReplicaTrainer, None)

    # Both resume from their step-20 checkpoints, together: the same computation as uninterrupted.
    train_together(seeds, [tmp_path / "together0", tmp_path / "together1"])
    for k in range(2):
        assert_same_tables(tmp_path / f"together{k}", tmp_path / f"whole{k}", exact=True)
    # Seed 1 resumes alone from the checkpoint the replicas wrote; then the pair is rerun: seed 1 is
    # finished and left untouched, seed 0 resumes by itself.
    run(seeds[1], tmp_path / "mixed1")
    stamps = {p: p.stat().st_mtime_ns for p in (tmp_path / "mixed1").iterdir()}
    train_together(seeds, [tmp_path / "mixed0", tmp_path / "mixed1"])
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "mixed1").iterdir()} == stamps
    for k in range(2):
        assert json.loads((tmp_path / f"mixed{k}" / files.META).read_text())["resumed_from_step"] == 20
        assert_same_tables(tmp_path / f"mixed{k}", tmp_path / f"whole{k}")


def test_per_replica_clipping_is_torch_clipping_of_each_replica():
    torch.manual_seed(0)
    scale = torch.tensor([0.01, 1.0, 10.0])  # replica 0 far below max_norm
    grads = [torch.randn(3, 4, 5) * scale.view(3, 1, 1), torch.randn(3, 7) * scale.view(3, 1)]
    params = [torch.zeros_like(g, requires_grad=True) for g in grads]
    for p, g in zip(params, grads):
        p.grad = g.clone()
    clip_grad_norm_per_replica_(params, max_norm=1.0)
    for k in range(3):
        alone = [torch.zeros_like(g[k], requires_grad=True) for g in grads]
        for p, g in zip(alone, grads):
            p.grad = g[k].clone()
        torch.nn.utils.clip_grad_norm_(alone, max_norm=1.0)
        for p, q in zip(params, alone):
            torch.testing.assert_close(p.grad[k], q.grad)
    total = torch.stack([p.grad.reshape(3, -1).norm(dim=1) for p in params]).norm(dim=0)
    torch.testing.assert_close(total[1:], torch.ones(2))  # replicas 1 and 2 clipped to norm 1
    assert total[0] < 0.5  # replica 0 is left as it was
    torch.testing.assert_close(params[0].grad[0], grads[0][0])


@pytest.mark.parametrize("optim", ["adamw", "sgd"])
def test_per_replica_optimizer_is_torch_optimizer_on_each_replica(make_config, optim):
    """Three replicas with their own learning rate and weight decay step as three torch optimisers do."""
    lrs, decays = (1e-3, 1e-2, 3e-2), (0.0, 0.1, 0.5)
    cfgs = [
        make_config(f"train.optim={optim}", f"train.lr={lr}", f"train.weight_decay={wd}").train
        for lr, wd in zip(lrs, decays)
    ]
    generator = torch.Generator().manual_seed(0)
    stacked = [torch.randn(3, 4, 5, generator=generator), torch.randn(3, generator=generator)]  # a matrix, a scalar
    lone = [[p[k].clone() for p in stacked] for k in range(3)]
    packed = PerReplicaOptimizer(stacked, cfgs)
    torch_optimizers = [make_optimizer(params, cfg) for params, cfg in zip(lone, cfgs)]
    for step in range(4):
        grads = [torch.randn(p.shape, generator=generator) for p in stacked]
        for p, g in zip(stacked, grads):
            p.grad = g
        packed.factor = 0.5 if step == 3 else 1.0  # a schedule's factor: lr_k x factor
        packed.step()
        for k, (params, torch_optimizer) in enumerate(zip(lone, torch_optimizers)):
            for p, g in zip(params, grads):
                p.grad = g[k]
            for group in torch_optimizer.param_groups:
                group["lr"] = lrs[k] * (0.5 if step == 3 else 1.0)
            torch_optimizer.step()
    for k in range(3):
        for p, q in zip(stacked, lone[k]):
            torch.testing.assert_close(p[k], q, rtol=1e-6, atol=1e-7)
        # Replica k's state is its lone optimiser's state_dict: it loads into one, and back.
        state = packed.replica_state_dict(k)
        reference = torch_optimizers[k].state_dict()
        assert state["param_groups"][0] == reference["param_groups"][0]
        torch_optimizers[k].load_state_dict(state)
        for index, entry in reference["state"].items():
            for key, value in entry.items():
                torch.testing.assert_close(state["state"][index][key], value, rtol=1e-6, atol=1e-7)
    rebuilt = PerReplicaOptimizer(stacked, cfgs)
    rebuilt.load_replica_state_dicts([packed.replica_state_dict(k) for k in range(3)])
    for index, entry in packed.state.items():
        for key, value in entry.items():
            torch.testing.assert_close(rebuilt.state[index][key], value, rtol=0, atol=0)


@pytest.mark.skipif(shutil.which("cc") is None, reason="torch.compile on the CPU needs a C compiler")
@pytest.mark.parametrize("K", [1, 2])
def test_compiled_training_step_matches_eager(make_config, K):
    def trainer(compile):
        cfg = make_config(
            *QUICK, "model.n_heads=2", "task.seq_len=16", f"train.replicas={K}", f"train.compile={compile}"
        )
        return make_trainer(run_configs(cfg), torch.device("cpu"))[1]

    eager, compiled = trainer(False), trainer(True)
    for _ in range(5):
        torch.testing.assert_close(compiled.train_step(), eager.train_step(), rtol=1e-4, atol=1e-6)

    def weights(trainer):
        return (trainer.replica(K - 1) if K > 1 else trainer.model).state_dict()

    torch.testing.assert_close(weights(compiled), weights(eager), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("replicas", [1, 2])
def test_chunked_data_resumes_to_the_same_tables(make_config, tmp_path, kill_at_step, replicas):
    """data_chunk=4 with checkpoints every 10 steps draws 4, 4, 2 steps per interval, so a run
    killed at step 25 resumes from step 20 drawing exactly what the uninterrupted run drew."""
    seeds = run_configs(make_config(*QUICK, "train.data_chunk=4", f"train.replicas={replicas}"))
    trainer = ReplicaTrainer if replicas > 1 else Trainer
    train_together(seeds, [tmp_path / f"whole{k}" for k in range(replicas)])
    kill_at_step(trainer, 25)
    with pytest.raises(KeyboardInterrupt):
        train_together(seeds, [tmp_path / f"split{k}" for k in range(replicas)])
    kill_at_step(trainer, None)
    train_together(seeds, [tmp_path / f"split{k}" for k in range(replicas)])
    for k in range(replicas):
        assert_same_tables(tmp_path / f"split{k}", tmp_path / f"whole{k}", exact=True)


def test_chunked_batches_are_the_sampler_draw_cut_in_steps(make_config):
    cfg = make_config(*QUICK, "train.data_chunk=4")  # 30 steps, checkpoints every 10
    (task,), trainer = make_trainer([cfg], torch.device("cpu"))
    drawn = task.sample(16 * 4, torch.Generator().manual_seed(cfg.seed), "cpu")
    sizes = []
    for step in range(12):
        trainer.step = step
        batch = trainer.next_batch()
        if step < 4:
            torch.testing.assert_close(batch.inputs, drawn.inputs[16 * step : 16 * (step + 1)], rtol=0, atol=0)
        sizes.append(len(trainer.batches))
    assert sizes == [3, 2, 1, 0, 3, 2, 1, 0, 1, 0, 3, 2]  # chunks of 4, 4, 2, then 4 after the checkpoint
