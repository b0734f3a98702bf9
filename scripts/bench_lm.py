"""Benchmark: sinkexp's trainer on task=lm against a minimal hand-written LLaMA-style loop.

    .venv/bin/python scripts/bench_lm.py                 # about two minutes on 2 CPU cores
    .venv/bin/python scripts/bench_lm.py --steps 10 --reps 3 --threads 1

Both sides train the `task=lm` defaults' model (model=llama: pre-RMSNorm, SwiGLU, RoPE, 4 x 4,
d_model 64) from the same weights on the same batches (the task's sampler, one seeded generator
each), with the task's optimiser (AdamW, clipping 1), alternating repetitions so that drift in the
machine hits both alike. The reference is written out by hand: nn.Embedding, nn.RMSNorm, one qkv
matmul, RoPE, scaled_dot_product_attention(is_causal=True), SwiGLU, no capture points, no options.
The project side is the real Trainer, evaluating every `eval.every` steps as in a training run.
Reported: steps/s of each and the project/reference ratio. Another process on the machine makes
the numbers invalid: they are marked so.
"""

from __future__ import annotations

import argparse
import statistics

import torch
import torch.nn.functional as F
from torch import nn

from sinkexp.config.compose import compose_config
from sinkexp.evaluate.evaluator import evaluate
from sinkexp.machine.benchmark import load, time_sides, validity
from sinkexp.model import Transformer
from sinkexp.model.attention import rotary
from sinkexp.tasks import held_out_batch
from sinkexp.tasks.lm import LMTask
from sinkexp.train.loop import Trainer, batch_loss, make_optimizer


class SwiGLU(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        hidden = int(8 * d / 3)
        self.w1, self.w3 = nn.Linear(d, hidden, bias=False), nn.Linear(d, hidden, bias=False)
        self.w2 = nn.Linear(hidden, d, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, d: int, h: int):
        super().__init__()
        self.h = h
        self.attn_norm, self.mlp_norm = nn.RMSNorm(d), nn.RMSNorm(d)
        self.qkv, self.out = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d, bias=False)
        self.mlp = SwiGLU(d)

    def forward(self, x):
        B, T, d = x.shape
        q, k, v = self.qkv(self.attn_norm(x)).view(B, T, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(rotary(q), rotary(k), v, is_causal=True)
        x = x + self.out(y.transpose(1, 2).reshape(B, T, d))
        return x + self.mlp(self.mlp_norm(x))


class Reference(nn.Module):
    """The LLaMA-style LM written out by hand: the same parameters as sinkexp's model=llama."""

    def __init__(self, vocab: int, d: int, h: int, n_layers: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList([Block(d, h) for _ in range(n_layers)])
        self.norm = nn.RMSNorm(d)
        self.readout = nn.Linear(d, vocab, bias=False)

    def forward(self, tokens):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.readout(self.norm(x))


def copy_weights(project: Transformer, reference: Reference) -> None:
    with torch.no_grad():
        reference.embed.weight.copy_(project.embed_in.weight)
        reference.norm.weight.copy_(project.final_norm.weight)
        reference.readout.weight.copy_(project.readout.weight)
        for mine, theirs in zip(project.blocks, reference.blocks):
            theirs.attn_norm.weight.copy_(mine.norms_in[0].weight)
            theirs.mlp_norm.weight.copy_(mine.norms_in[1].weight)
            theirs.qkv.weight.copy_(mine.attn.qkv.weight)
            theirs.out.weight.copy_(mine.attn.out.weight)
            theirs.mlp.load_state_dict(mine.mlp.state_dict())


def build(overrides=()):
    """(config, task, project model, reference model with the same weights)."""
    cfg = compose_config("task=lm", "device=cpu", *overrides)
    task = LMTask(cfg.task)
    torch.manual_seed(cfg.seed)
    project = Transformer(cfg.model, cfg.attn, task)
    reference = Reference(task.vocab_size, cfg.model.d_model, cfg.model.n_heads, cfg.model.n_layers)
    copy_weights(project, reference)
    return cfg, task, project, reference


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="steps per repetition")
    parser.add_argument("--reps", type=int, default=5, help="alternating repetitions per side")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    before = load()
    cfg, task, project, reference = build()
    trainer = Trainer(project, task, cfg.train, torch.Generator().manual_seed(0), torch.device("cpu"))
    ref_optimizer = make_optimizer(reference.parameters(), cfg.train)
    ref_generator = torch.Generator().manual_seed(0)
    eval_batch = held_out_batch(task, cfg.eval.batch_size, cfg.eval.seed, "cpu")

    def reference_step():
        batch = task.sample(cfg.train.batch_size, ref_generator, "cpu")
        loss = batch_loss(task, reference(batch.inputs), batch)
        ref_optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(reference.parameters(), cfg.train.grad_clip)
        ref_optimizer.step()

    def project_step():
        trainer.train_step()
        trainer.step += 1
        if trainer.step % cfg.eval.every == 0:
            evaluate(trainer.model, task, eval_batch, trainer.step)

    sides = {"reference": reference_step, "project": project_step}
    timings = time_sides(sides, args.steps, args.reps)
    m = cfg.model
    print(
        f"task=lm defaults: {m.n_layers} layers x {m.n_heads} heads, d_model {m.d_model}, batch "
        f"{cfg.train.batch_size} x {cfg.task.seq_len} bytes; {args.threads} threads; project evaluates every "
        f"{cfg.eval.every} steps"
    )
    for side, rates in timings.items():
        print(f"{side:>10}: {statistics.median(rates):6.2f} steps/s  (reps: {', '.join(f'{r:.2f}' for r in rates)})")
    ratio = statistics.median(timings["project"]) / statistics.median(timings["reference"])
    print(f"project / reference: {ratio:.3f}x" + validity([before, load()]))


if __name__ == "__main__":
    main()
