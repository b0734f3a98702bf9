"""scripts/bench.py compares like with like: the hand-written reference is the same model."""

import torch
from conftest import load_script

from sinkexp.config.schema import AttnConfig, ModelConfig
from sinkexp.model import Transformer
from sinkexp.tasks.trigger import TriggerConfig, TriggerTask

bench = load_script("bench")


def test_reference_model_computes_what_the_project_model_computes():
    task = TriggerTask(TriggerConfig(seq_len=16))
    torch.manual_seed(0)
    project = Transformer(ModelConfig(n_layers=2, n_heads=4, d_model=32, residual=False), AttnConfig(), task)
    reference = bench.Reference(task, 32, 4, 2)
    bench.copy_weights(project, reference)
    batch = task.sample(8, torch.Generator().manual_seed(0), "cpu")
    torch.testing.assert_close(reference(batch.inputs), project(batch.inputs), atol=1e-5, rtol=1e-5)
    assert sum(p.numel() for p in reference.parameters()) == sum(p.numel() for p in project.parameters())


def test_gpu_benchmark_runs_all_three_parts_on_the_cpu():
    bench_gpu = load_script("bench_gpu")
    rows = bench_gpu.bench_replicas([2], [1, 4], torch.device("cpu"), seconds=0.0, compile=False)
    assert [(row["K"], row["data_chunk"], row["trainer"]) for row in rows] == [
        (1, 1, "Trainer"),
        (2, 1, "ReplicaTrainer"),
        (1, 4, "Trainer"),
        (2, 4, "ReplicaTrainer"),
    ]
    assert rows[0]["step_time_vs_lone"] == rows[2]["step_time_vs_lone"] == 1.0
    assert rows[1]["model_steps_per_s"] == 2 * rows[1]["steps_per_s"] > 0
    # A second replica adds one sampler call per step; drawing 4 steps at a time divides that by 4.
    launches = [row["launches_per_step"] for row in rows]
    assert launches[3] - launches[2] < launches[1] - launches[0]
    packs = bench_gpu.bench_packs(torch.device("cpu"), seconds=0.0, rounds=1)
    assert [(row["grid"], row["runs"]) for row in packs] == [("weight_decay", 9), ("gamma", 12)]
    assert all(
        row["packed_over_lone"] == row["packed_model_steps_per_s"] / row["lone_model_steps_per_s"] > 0 for row in packs
    )
    determinism = bench_gpu.bench_determinism(torch.device("cpu"), seconds=0.0, rounds=1)
    assert [row["model"] for row in determinism] == ["trigger T32", "backcopy T256"]
    assert all(
        row["deterministic_over_free"] == row["deterministic_steps_per_s"] / row["free_steps_per_s"] > 0
        for row in determinism
    )
    assert not torch.are_deterministic_algorithms_enabled()  # left as a CPU run has it
    damping = bench_gpu.bench_damping(torch.device("cpu"), steps=2, chunk=1, compile=False)
    assert damping["batch_size"] == 1024 and damping["steps"] == 2
    assert set(damping["sink_attn_layer0"]) >= {"nop", "active"}


def test_sampler_benchmark_runs_and_times_both_backcopy_samplers(capsys, monkeypatch):
    bench_samplers = load_script("bench_samplers")
    monkeypatch.setattr("sys.argv", ["bench_samplers.py", "--reps", "1"])
    bench_samplers.main()
    printed = capsys.readouterr().out
    assert "backcopy inverse_cdf" in printed and "backcopy multinomial" in printed
    assert "inverse_cdf / multinomial:" in printed and "damping" in printed and "broadcast" in printed
    assert "the source's generator" in printed


def test_the_benchmarks_source_broadcast_generator_draws_sinkexps_batches():
    """Like for like: from the same generator state both draw the same inputs, hubs and targets."""
    from sinkexp.tasks.broadcast import BroadcastConfig, BroadcastTask

    task = BroadcastTask(BroadcastConfig(structure_seed=3))
    ours = task.sample(64, torch.Generator().manual_seed(5), "cpu")
    source = load_script("bench_samplers").SourceBroadcast(task).sample(64, torch.Generator().manual_seed(5), "cpu")
    assert torch.equal(ours.sink, source["j_star"])
    torch.testing.assert_close(ours.targets, source["target"])


def test_the_benchmarks_source_backcopy_generator_follows_the_task():
    """Guo et al.'s rule (BOS, a first token that is no trigger, after a trigger the token before it)
    and the table's transitions: its empirical P(. | x) lies within 0.03 of sinkexp's table."""
    from sinkexp.tasks.backcopy import BackcopyConfig, BackcopyTask

    task = BackcopyTask(BackcopyConfig(seq_len=64, vocab=8, n_triggers=2, structure_seed=1))
    seqs = torch.from_numpy(
        load_script("bench_samplers").SourceBackcopy(task).sample(400, torch.Generator().manual_seed(0), "cpu")
    )
    assert seqs.shape == (400, 65) and (seqs[:, 0] == task.bos).all() and not task.is_trigger[seqs[:, 1]].any()
    after_trigger = task.is_trigger[seqs[:, 1:-1]]
    assert torch.equal(seqs[:, 2:][after_trigger], seqs[:, :-2][after_trigger])
    current, following = seqs[:, 1:-1][~after_trigger], seqs[:, 2:][~after_trigger]
    checked = [x for x in range(task.vocab_size) if (current == x).sum() >= 2000]
    assert len(checked) >= 3
    for x in checked:
        empirical = torch.bincount(following[current == x], minlength=task.vocab_size) / (current == x).sum()
        assert (empirical - task.cond[x]).abs().max() < 0.03, x


def test_the_lm_reference_computes_what_the_llama_preset_computes(monkeypatch):
    bench_lm = load_script("bench_lm")
    cfg, task, project, reference = bench_lm.build(["task.seq_len=16"])
    batch = task.sample(4, torch.Generator().manual_seed(0), "cpu")
    torch.testing.assert_close(reference(batch.inputs), project(batch.inputs), atol=1e-5, rtol=1e-5)
    assert sum(p.numel() for p in reference.parameters()) == sum(p.numel() for p in project.parameters())
