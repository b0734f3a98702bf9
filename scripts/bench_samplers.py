"""Sampler speed at the sources' shapes, one thread, on the CPU: backcopy (L 256, batch 512) in
tokens/s with the inverse-CDF sampler against the first release's torch.multinomial sampler in the
same run, and damping / broadcast (batch 1024 x 32 x 64) in ms per batch.

    .venv/bin/python scripts/bench_samplers.py [--table PATH] [--reps 7] [--threads 1]

--table takes a JSON bigram table (e.g. the paper's Tiny-Shakespeare one); without it the
synthetic default table (V = 64) is used. Each number is the best of --reps timed draws after one
warm-up draw. Backcopy is also timed next to its source's generator (Guo et al.'s BBM/data.py,
class bbm, re-implemented below; best of min(--reps, 3): one of its batches takes seconds), and
broadcast next to its source's generator (Kempner toy/global_pathway/common.py:
`sample_batch` then `make_task`, re-implemented below from that file) in the same run, the two
sides' draws alternating; damping's
source (a notebook) has no separate generator to time. Another process on the machine makes the numbers
invalid: they are marked so.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from sinkexp.machine.benchmark import load, machine, validity
from sinkexp.tasks.backcopy import BackcopyConfig, BackcopyTask
from sinkexp.tasks.broadcast import BroadcastConfig, BroadcastTask
from sinkexp.tasks.damping import DampingConfig, DampingTask


def best_seconds(task, batch_size: int, reps: int) -> float:
    generator = torch.Generator().manual_seed(0)
    task.sample(batch_size, generator, "cpu")
    times = []
    for _ in range(reps):
        started = time.perf_counter()
        task.sample(batch_size, generator, "cpu")
        times.append(time.perf_counter() - started)
    return min(times)


class SourceBroadcast:
    """The source's broadcast batch: x ~ N(0, I) from the data generator, j* = argmax <x_j, u>,
    target x + alpha x_{j*} R (common.py's sample_batch and make_task)."""

    def __init__(self, task: BroadcastTask):
        self.u, self.R, self.alpha, self.L, self.d = (
            task.hub_direction,
            task.rotation,
            task.cfg.alpha,
            task.cfg.seq_len,
            task.cfg.d,
        )

    def sample(self, batch_size: int, generator: torch.Generator, device):
        x = torch.randn(batch_size, self.L, self.d, device=device, generator=generator)
        b = torch.arange(x.shape[0], device=x.device)
        j_star = (x @ self.u).argmax(dim=-1)
        payload = x[b, j_star] @ self.R
        return dict(target=x + self.alpha * payload.unsqueeze(1), j_star=j_star)


class SourceBackcopy:
    """The source's backcopy batch, as Guo et al.'s BBM/data.py draws it (class bbm: gen_seq per
    sequence, gen_batch): BOS, x_1 from the marginal without triggers, then per position one numpy
    rng.choice over the vocabulary list with P(. | x), drawn even where x is a trigger and the
    sequence copies x_{t-1} instead. The source ran this in 24-60 worker processes; here it is one."""

    def __init__(self, task: BackcopyTask):
        cond = task.cond.double()
        self.cond = (cond / cond.sum(-1, keepdim=True).clamp_min(1e-300)).numpy()  # rows sum to 1 in float64
        first = task.first.double()
        self.marginal2 = (first / first.sum()).numpy()
        self.bos, self.idxs = task.bos, task.triggers.tolist()
        self.tok_range = list(np.arange(task.vocab_size))
        self.seq_length = task.seq_len

    def gen_seq(self, rng: np.random.Generator) -> list:
        seq = [self.bos, rng.choice(self.tok_range, p=self.marginal2)]
        while len(seq) <= self.seq_length:
            x, xp = seq[-1], seq[-2]
            x_markov = rng.choice(self.tok_range, p=self.cond[x])
            seq.append(xp if x in self.idxs else x_markov)
        return seq

    def sample(self, batch_size: int, generator: torch.Generator, device):
        rng = np.random.default_rng(int(torch.randint(2**62, (1,), generator=generator)))
        return np.array([self.gen_seq(rng) for _ in range(batch_size)])  # (B, L + 1), as gen_batch


def best_seconds_interleaved(tasks, batch_size: int, reps: int) -> list[float]:
    """best_seconds of each task with their draws alternating, so that load from other processes
    falls on both sides alike."""
    generators = [torch.Generator().manual_seed(0) for _ in tasks]
    times = [[] for _ in tasks]
    for task, generator in zip(tasks, generators):
        task.sample(batch_size, generator, "cpu")
    for _ in range(reps):
        for task, generator, spent in zip(tasks, generators, times):
            started = time.perf_counter()
            task.sample(batch_size, generator, "cpu")
            spent.append(time.perf_counter() - started)
    return [min(spent) for spent in times]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", default=None, help="a JSON bigram table for backcopy")
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    loads = [load()]
    print(machine(args.threads))
    print(f"table: {args.table or 'synthetic (V = 64)'}")
    tokens = 512 * 256
    speed = {}
    for sampler in ("inverse_cdf", "multinomial"):
        task = BackcopyTask(BackcopyConfig(seq_len=256, bigram_table=args.table, sampler=sampler))
        speed[sampler] = tokens / best_seconds(task, 512, args.reps)
        print(f"backcopy {sampler:<12} {speed[sampler] / 1e6:7.2f} M tokens/s")
    print(f"backcopy inverse_cdf / multinomial: {speed['inverse_cdf'] / speed['multinomial']:.1f}x")
    task = BackcopyTask(BackcopyConfig(seq_len=256, bigram_table=args.table))
    ours, source = best_seconds_interleaved([task, SourceBackcopy(task)], 512, min(args.reps, 3))
    print(
        f"backcopy the source's generator (one process) {tokens / source / 1e6:7.3f} M tokens/s; inverse_cdf "
        f"in the same run {tokens / ours / 1e6:7.2f} M tokens/s (sinkexp / source: {source / ours:.0f}x)"
    )
    print(
        f"damping   batch 1024 x 32 x 64: {best_seconds(DampingTask(DampingConfig()), 1024, args.reps) * 1e3:7.2f} ms"
    )
    broadcast = BroadcastTask(BroadcastConfig())
    ours, source = best_seconds_interleaved([broadcast, SourceBroadcast(broadcast)], 1024, args.reps)
    print(
        f"broadcast batch 1024 x 32 x 64: {ours * 1e3:7.2f} ms, the source's generator {source * 1e3:7.2f} ms "
        f"(source / sinkexp: {source / ours:.2f}x)" + validity([*loads, load()])
    )


if __name__ == "__main__":
    main()
