"""Benchmark: sinkexp's trainer against a minimal hand-written loop of the same model, same batches.

    .venv/bin/python scripts/bench.py            # about a minute on 2 CPU cores
    .venv/bin/python scripts/bench.py --steps 30 --reps 3 --threads 1

Both sides train the same architecture from the same initial weights on the same batches (the
task sampler, one seeded generator each), alternating repetitions so drift in the machine hits
both alike. The project side is the real Trainer, with evaluation (capture points and metrics)
every `eval.every` steps as in a training run; a third side runs it with the fused attention kernel
switched off ("explicit"), which gives the fused path's speed-up in the same run. Reported: steps/s, tokens/s, FLOPs per step
(matmuls, forward + backward = 3x forward), utilisation of the matmul peak measured here at the
same thread count, and the project/reference ratio. A machine busy with other processes makes the
measurement invalid: it is marked so, and the numbers are not to be quoted.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import torch
import torch.nn.functional as F
from torch import nn

from sinkexp.config import AttnConfig, EvalConfig, ModelConfig, TrainConfig
from sinkexp.evaluate.evaluator import evaluate
from sinkexp.model import Transformer
from sinkexp.tasks.trigger import TriggerConfig, TriggerTask
from sinkexp.train import Trainer, masked_mean

REFERENCE = dict(n_layers=2, d_model=64, n_heads=4, seq_len=64, batch_size=256)


def busy_cores(seconds: float = 1.0) -> float:
    """CPU time that other processes used per second of wall time (Linux /proc), in cores."""
    def sample():
        with open("/proc/stat") as handle:
            fields = [int(x) for x in handle.readline().split()[1:]]
        own = os.times()
        return sum(fields[:3]) + fields[5] + fields[6], own.user + own.system
    ticks = os.sysconf("SC_CLK_TCK")
    (total0, own0), start = sample(), time.perf_counter()
    time.sleep(seconds)
    (total1, own1), elapsed = sample(), time.perf_counter() - start
    return max(0.0, (total1 - total0) / ticks - (own1 - own0)) / elapsed


def matmul_peak(threads: int, size: int = 512, repeats: int = 50) -> float:
    """fp32 GFLOP/s of square matmuls at the thread count in use."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    for _ in range(5):
        a @ b
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    return 2 * size ** 3 * repeats / (time.perf_counter() - start) / 1e9


def time_sides(sides: dict, steps: int, reps: int) -> dict[str, list[float]]:
    """steps/s of each side's step function per repetition: three warm-up steps each, then `reps`
    alternating repetitions of `steps` steps, so that drift in the machine hits every side alike."""
    timings = {side: [] for side in sides}
    for step in sides.values():
        for _ in range(3):
            step()
    for _ in range(reps):
        for side, step in sides.items():
            start = time.perf_counter()
            for _ in range(steps):
                step()
            timings[side].append(steps / (time.perf_counter() - start))
    return timings


class ReferenceBlock(nn.Module):
    def __init__(self, d: int, h: int):
        super().__init__()
        self.h = h
        self.norm = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.out = nn.Linear(d, d, bias=False)

    def forward(self, x):
        B, T, d = x.shape
        q, k, v = self.qkv(self.norm(x)).view(B, T, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(B, T, d))      # no residual, as the trigger task's model


class Reference(nn.Module):
    """The trigger model written out by hand: the same parameters, no capture points, no options."""

    def __init__(self, task, d: int, h: int, n_layers: int):
        super().__init__()
        self.embed_in = nn.Linear(task.input_dim, d, bias=False)
        self.pos = nn.Parameter(torch.zeros(task.seq_len, d))
        self.blocks = nn.ModuleList([ReferenceBlock(d, h) for _ in range(n_layers)])
        self.readout = nn.Linear(d, task.output_dim, bias=False)

    def forward(self, x):
        x = self.embed_in(x) + self.pos
        for block in self.blocks:
            x = block(x)
        return self.readout(x)


def copy_weights(project: Transformer, reference: Reference) -> None:
    with torch.no_grad():
        reference.embed_in.weight.copy_(project.embed_in.weight)
        reference.pos.copy_(project.positions.table)
        reference.readout.weight.copy_(project.readout.weight)
        for mine, theirs in zip(project.blocks, reference.blocks):
            theirs.norm.load_state_dict(mine.norms_in[0].state_dict())
            theirs.qkv.weight.copy_(mine.attn.qkv.weight)
            theirs.out.weight.copy_(mine.attn.out.weight)


def flops_per_step(task, cfg: dict) -> float:
    B, T, d, L = cfg["batch_size"], cfg["seq_len"], cfg["d_model"], cfg["n_layers"]
    per_layer = 2 * B * T * d * 3 * d + 2 * 2 * B * T * T * d + 2 * B * T * d * d
    forward = L * per_layer + 2 * B * T * task.input_dim * d + 2 * B * T * d * task.output_dim
    return 3 * forward


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="steps per repetition")
    parser.add_argument("--reps", type=int, default=5, help="alternating repetitions per side")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--eval-every", type=int, default=250, help="the project's evaluation interval")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    cfg = REFERENCE
    load = busy_cores()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
          f"{args.threads} threads, device cpu; other processes' load {load:.2f} cores")
    peak = matmul_peak(args.threads)
    print(f"matmul peak (fp32, 512x512): {peak:.1f} GFLOP/s")

    task = TriggerTask(TriggerConfig(seq_len=cfg["seq_len"]))
    model_cfg = ModelConfig(n_layers=cfg["n_layers"], n_heads=cfg["n_heads"], d_model=cfg["d_model"], residual=False)
    train_cfg = TrainConfig(batch_size=cfg["batch_size"], grad_clip=0.0)
    torch.manual_seed(0)
    project = Transformer(model_cfg, AttnConfig(), task)
    reference = Reference(task, cfg["d_model"], cfg["n_heads"], cfg["n_layers"])
    copy_weights(project, reference)
    trainer = Trainer(project, task, train_cfg, torch.Generator().manual_seed(0), torch.device("cpu"))
    # The same trainer with the fused attention kernel switched off: what the fused path buys.
    explicit = Transformer(model_cfg, AttnConfig(), task, fused=False)
    explicit.load_state_dict(project.state_dict())
    explicit_trainer = Trainer(explicit, task, train_cfg, torch.Generator().manual_seed(0), torch.device("cpu"))
    ref_optimizer = torch.optim.AdamW(reference.parameters(), lr=train_cfg.lr, betas=train_cfg.betas)
    ref_generator = torch.Generator().manual_seed(0)
    eval_batch = task.sample(EvalConfig().batch_size, torch.Generator().manual_seed(1), "cpu")

    def reference_step():
        batch = task.sample(cfg["batch_size"], ref_generator, "cpu")
        loss = masked_mean(task.loss(reference(batch.inputs), batch), batch.loss_mask)
        ref_optimizer.zero_grad(set_to_none=True)
        loss.backward()
        ref_optimizer.step()

    def stepper(trainer_):
        def step():
            trainer_.train_step()
            trainer_.step += 1
            if trainer_.step % args.eval_every == 0:
                evaluate(trainer_.model, task, eval_batch, trainer_.step)
        return step

    sides = {"reference": reference_step, "project": stepper(trainer), "explicit": stepper(explicit_trainer)}
    timings = time_sides(sides, args.steps, args.reps)
    load_after = busy_cores()
    flops = flops_per_step(task, cfg)
    print(f"config: trigger task, {cfg}, AdamW, project evaluates every {args.eval_every} steps")
    print(f"FLOPs per step (matmuls, fwd+bwd): {flops / 1e9:.3f} GFLOP")
    for side, rates in timings.items():
        rate = statistics.median(rates)
        print(f"{side:>10}: {rate:7.1f} steps/s  {rate * cfg['batch_size'] * cfg['seq_len'] / 1e3:8.1f} k tokens/s  "
              f"{rate * flops / 1e9:6.1f} GFLOP/s = {rate * flops / 1e9 / peak:5.1%} of peak  "
              f"(reps: {', '.join(f'{r:.1f}' for r in rates)})")
    median = {side: statistics.median(rates) for side, rates in timings.items()}
    quiet = max(load, load_after) < 0.25
    print(f"project / reference: {median['project'] / median['reference']:.3f}x; fused attention / explicit: "
          f"{median['project'] / median['explicit']:.3f}x" + ("" if quiet else
          f"  INVALID: other processes used {max(load, load_after):.2f} cores; rerun on a quiet machine"))


if __name__ == "__main__":
    main()
