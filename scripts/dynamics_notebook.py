"""The source's own code for the dynamics form of conditional damping, run beside task=damping_dynamics:
Kempner attention_sink (a83cd59), toy/notebooks/noop_dynamics.ipynb. Cell 2's OneHead is transcribed
below (its lines, reformatted); cell 3's training step is `notebook_step`; the evaluation (the pooled
attention per key on a held-out batch, and the position that holds its peak) is added.

    .venv/bin/python scripts/dynamics_notebook.py SEED                       # the notebook's own draws
    .venv/bin/python scripts/dynamics_notebook.py SEED --sinkexp-draws [--structure-seed T]

The notebook's own draws: torch.manual_seed(SEED) (the notebook sets none), then the model, the gate
v = randn(64) / norm and every batch from the global generator, in the notebook's order. With
--sinkexp-draws the same code trains from sinkexp's draws for that run (its initial weights, the gate
of task.structure_seed, the trainer's batches), so the two codes can be compared run for run
(tests/scripts/test_dynamics_notebook.py: step for step). Batch 1024 (cell 3; the notebook's 30k steps are
--steps); one JSON line every --eval-every steps; the run stops --stop-after steps after the pooled
peak first reaches 0.3. docs/findings/fesser2026.md reports what it gave.
"""

from __future__ import annotations

import argparse
import json
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from sinkexp.config.compose import compose_config
from sinkexp.jobs.runner import make_trainer


class OneHead(nn.Module):
    """noop_dynamics.ipynb cell 2 (DMODEL = HEAD_DIM = 64, SEQ_LEN = 32; its `mlp` is an Identity never called)."""

    def __init__(self, d=64, h=64, length=32):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.Wq = nn.Linear(d, h, bias=False)
        self.Wk = nn.Linear(d, h, bias=False)
        self.Wv = nn.Linear(d, h, bias=False)
        self.Wo = nn.Linear(h, d, bias=False)
        self.pos = nn.Parameter(torch.randn(length, d) * 0.02)
        self.bos = nn.Parameter(torch.randn(d) * 0.02)

    def forward(self, x, ret=False):
        x = x.clone()
        x[:, 0, :] = x[:, 0, :] + self.bos
        x = x + self.pos.unsqueeze(0)
        x = self.norm(x)
        Q, K, V = self.Wq(x), self.Wk(x), self.Wv(x)
        A = torch.softmax(Q @ K.transpose(1, 2) / math.sqrt(Q.shape[-1]), dim=-1)
        O = x + self.Wo(A @ V)
        return (O, A) if ret else O


def notebook_step(model, opt, x, v_gate):
    """One step of cell 3's loop: target (1 - m) x with m = 1[<x, v> > 0], F.mse_loss, AdamW."""
    O = model(x)
    s = (x * v_gate).sum(dim=-1, keepdim=True)
    mask = (s > 0).float()
    loss = F.mse_loss(O, (1.0 - mask) * x)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss.detach()


def copy_into_notebook(model) -> OneHead:
    """A OneHead holding a task=damping_dynamics model's weights."""
    theirs = OneHead()
    attn = model.blocks[0].attn
    w_q, w_k, w_v = attn.qkv.weight.chunk(3)
    with torch.no_grad():
        for name, weight in {"Wq": w_q, "Wk": w_k, "Wv": w_v, "Wo": attn.out.weight}.items():
            getattr(theirs, name).weight.copy_(weight)
        theirs.pos.copy_(model.positions.table[:32])
        theirs.bos.copy_(model.bos_vector)
        theirs.norm.weight.copy_(model.embed_norm.weight)
        theirs.norm.bias.copy_(model.embed_norm.bias)
    return theirs


def own_draws(seed: int, batch: int):
    """(model, gate, next batch) as cell 3 draws them, seeded."""
    torch.manual_seed(seed)
    model = OneHead()
    v_gate = torch.randn(64)
    return model, v_gate / v_gate.norm(), lambda: torch.randn(batch, 32, 64)


def sinkexp_draws(seed: int, structure_seed: int, batch: int):
    """(model, gate, next batch) from sinkexp's run of the same seed and structure draw."""

    cfg = compose_config(
        "task=damping_dynamics",
        f"train.batch_size={batch}",
        f"seed={seed}",
        f"task.structure_seed={structure_seed}",
        "device=cpu",
    )
    (task,), trainer = make_trainer([cfg], torch.device("cpu"))
    return copy_into_notebook(trainer.model), task.gate, lambda: task.sample(batch, trainer.generator, "cpu").inputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("seed", type=int)
    parser.add_argument("--sinkexp-draws", action="store_true")
    parser.add_argument("--structure-seed", type=int, default=0, help="with --sinkexp-draws: task.structure_seed")
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=12000)
    parser.add_argument("--eval-every", type=int, default=500)
    parser.add_argument("--stop-after", type=int, default=1000)
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.sinkexp_draws:
        draws = sinkexp_draws(args.seed, args.structure_seed, args.batch)
    else:
        draws = own_draws(args.seed, args.batch)
    model, v_gate, next_batch = draws
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-4)  # cell 3
    held_out = torch.randn(512, 32, 64, generator=torch.Generator().manual_seed(12345))
    started, formed = time.time(), None
    for step in range(1, args.steps + 1):
        loss = notebook_step(model, opt, next_batch(), v_gate)
        if step % args.eval_every and step != args.steps:
            continue
        with torch.no_grad():
            per_key = model(held_out, ret=True)[1].mean(dim=(0, 1))  # the notebook's pooling
        row = {
            "step": step,
            "train_loss": loss.item(),
            "pooled_peak": per_key.max().item(),
            "peak_position": int(per_key.argmax()),
            "wall_s": round(time.time() - started, 1),
        }
        print(json.dumps(row), flush=True)
        formed = formed or (step if row["pooled_peak"] >= 0.3 else None)
        if formed and step - formed >= args.stop_after:
            break


if __name__ == "__main__":
    main()
