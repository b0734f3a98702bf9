"""Training steps with glibc's default malloc thresholds against sinkexp's (sinkexp/machine/allocator.py).

    .venv/bin/python scripts/bench_malloc.py [--tasks trigger,damping,broadcast,backcopy] [--rounds 3] [--steps 40]

As the parallel launcher runs jobs: two worker processes at a time, one torch thread each, each
training its task's CPU defaults (seeds 0 and 1). Per task, the two sides alternate (glibc first in
odd rounds, sinkexp's first in even ones). Each worker warms up for 5 steps, then times --steps
steps and counts the minor page faults they took. Printed per task: median ms/step and faults per
step of each side, and glibc / sinkexp's time (above 1: sinkexp's setting is faster).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

from sinkexp.machine.threads import busy_cores

SIDES = {"glibc": "glibc", "kept": "keep"}  # side -> SINKEXP_MALLOC


def worker(task: str, seed: int, steps: int) -> None:
    # lazy: the parent process only starts and times the workers; torch and sinkexp load in each worker
    import torch

    from sinkexp.config.compose import compose_config
    from sinkexp.jobs.runner import make_trainer
    from sinkexp.machine.allocator import keep_freed_memory

    how = keep_freed_memory()  # as `sinkexp train` does before it builds anything
    torch.set_num_threads(1)
    cfg = compose_config(f"task={task}", f"seed={seed}")
    _, trainer = make_trainer([cfg], torch.device("cpu"))
    for _ in range(5):
        trainer.train_step()
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    started = time.perf_counter()
    for _ in range(steps):
        trainer.train_step()
    seconds = time.perf_counter() - started
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    print(json.dumps({"ms_per_step": 1000 * seconds / steps, "faults_per_step": faults / steps, "allocator": how}))


def pair(task: str, side: str, steps: int) -> list[dict]:
    """Two workers at once, as two parallel-launcher jobs."""
    env = {**os.environ, "SINKEXP_MALLOC": SIDES[side]}
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--worker", task, str(seed), str(steps)],
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        for seed in (0, 1)
    ]
    results = []
    for proc in procs:
        out, _ = proc.communicate()
        if proc.returncode:
            raise SystemExit(f"worker failed ({task}, {side})")
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="trigger,damping,broadcast,backcopy")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        task, seed, steps = args.worker
        worker(task, int(seed), int(steps))
        return
    # lazy: here, not at the top: torch (which it imports) loads in a worker only after its allocator is set
    from sinkexp.machine.benchmark import validity

    loads = [busy_cores(1.0) or 0.0]
    print(
        f"{os.cpu_count()} cores; other processes' load {loads[0]:.2f} cores; two workers at a time, "
        f"one thread each, {args.steps} timed steps per worker"
    )
    for task in args.tasks.split(","):
        results = {side: [] for side in SIDES}
        for round_ in range(args.rounds):
            for side in SIDES if round_ % 2 == 0 else reversed(list(SIDES)):
                results[side] += pair(task, side, args.steps)
        ms = {side: statistics.median(r["ms_per_step"] for r in rs) for side, rs in results.items()}
        faults = {side: statistics.median(r["faults_per_step"] for r in rs) for side, rs in results.items()}
        each = {side: ", ".join(f"{r['ms_per_step']:.1f}" for r in rs) for side, rs in results.items()}
        print(
            f"{task:>9}: glibc {ms['glibc']:6.2f} ms/step, {faults['glibc']:6.0f} faults/step | kept "
            f"{ms['kept']:6.2f} ms/step, {faults['kept']:6.0f} faults/step | "
            f"glibc / kept {ms['glibc'] / ms['kept']:.3f}"
            f"  (per worker, ms: glibc {each['glibc']}; kept {each['kept']})",
            flush=True,
        )
    loads.append(busy_cores(1.0) or 0.0)
    print(validity(loads).strip() or f"other processes' load after: {loads[-1]:.2f} cores")


if __name__ == "__main__":
    main()
