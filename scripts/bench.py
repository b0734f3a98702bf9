"""Benchmark: sinkexp's trainer against a minimal hand-written loop of the same model, same batches.

    .venv/bin/python scripts/bench.py            # about a minute on 2 CPU cores
    .venv/bin/python scripts/bench.py --steps 30 --reps 3 --threads 1

Both sides train the same architecture from the same initial weights on the same batches (the
task sampler, one seeded generator each), alternating repetitions so drift in the machine hits
both alike. The project side is the real Trainer, with evaluation (capture points and metrics)
every `eval.every` steps as in a training run; a third side runs it with the fused attention kernel
switched off ("explicit"), which gives the fused path's speed-up in the same run. Reported: steps/s,
tokens/s, FLOPs per step (matmuls, forward + backward = 3x forward), utilisation of the matmul peak measured here at the
same thread count, and the project/reference ratio. A machine busy with other processes makes the
measurement invalid: it is marked so, and the numbers are not to be quoted.
"""

from __future__ import annotations

import argparse
import statistics

import torch
import torch.nn.functional as F
from torch import nn

from sinkexp.config.schema import AttnConfig, Config, EvalConfig, ModelConfig, TrainConfig
from sinkexp.evaluate.evaluator import evaluate
from sinkexp.jobs.cost import training_flops
from sinkexp.machine.benchmark import load, machine, matmul_peak, time_sides, validity
from sinkexp.model import Transformer
from sinkexp.tasks.trigger import TriggerConfig, TriggerTask
from sinkexp.train.loop import Trainer, masked_mean

REFERENCE = dict(n_layers=2, d_model=64, n_heads=4, seq_len=64, batch_size=256)


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
        return self.out(y.transpose(1, 2).reshape(B, T, d))  # no residual, as the trigger task's model


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


def sides(args, cfg: dict, task, model_cfg: ModelConfig, train_cfg: TrainConfig) -> dict:
    """The three sides' step functions, from the same initial weights and batches."""
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

    return {"reference": reference_step, "project": stepper(trainer), "explicit": stepper(explicit_trainer)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="steps per repetition")
    parser.add_argument("--reps", type=int, default=5, help="alternating repetitions per side")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--eval-every", type=int, default=250, help="the project's evaluation interval")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    cfg = REFERENCE
    before = load()
    print(machine(args.threads))
    peak = matmul_peak(args.threads)
    print(f"matmul peak (fp32, 512x512): {peak:.1f} GFLOP/s")
    task = TriggerTask(TriggerConfig(seq_len=cfg["seq_len"]))
    model_cfg = ModelConfig(n_layers=cfg["n_layers"], n_heads=cfg["n_heads"], d_model=cfg["d_model"], residual=False)
    train_cfg = TrainConfig(batch_size=cfg["batch_size"], grad_clip=0.0)
    timings = time_sides(sides(args, cfg, task, model_cfg, train_cfg), args.steps, args.reps)
    flops = training_flops(Config(task=task.cfg, model=model_cfg, train=train_cfg))
    print(f"config: trigger task, {cfg}, AdamW, project evaluates every {args.eval_every} steps")
    print(f"FLOPs per step (matmuls, fwd+bwd, sinkexp/jobs/cost.py): {flops / 1e9:.3f} GFLOP")
    for side, rates in timings.items():
        rate = statistics.median(rates)
        print(
            f"{side:>10}: {rate:7.1f} steps/s  {rate * cfg['batch_size'] * cfg['seq_len'] / 1e3:8.1f} k tokens/s  "
            f"{rate * flops / 1e9:6.1f} GFLOP/s = {rate * flops / 1e9 / peak:5.1%} of peak  "
            f"(reps: {', '.join(f'{r:.1f}' for r in rates)})"
        )
    median = {side: statistics.median(rates) for side, rates in timings.items()}
    print(
        f"project / reference: {median['project'] / median['reference']:.3f}x; fused attention / explicit: "
        f"{median['project'] / median['explicit']:.3f}x" + validity([before, load()])
    )


if __name__ == "__main__":
    main()
