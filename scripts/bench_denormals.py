"""Training steps with subnormal floats kept against flushed to zero (sinkexp/machine/denormals.py).

    .venv/bin/python scripts/bench_denormals.py RUN_DIR [--rounds 3] [--steps 40] [--threads 1]
    .venv/bin/python scripts/bench_denormals.py --fresh "task=damping task.gamma=0.0" --steps 500 --rounds 1

RUN_DIR is a run with a checkpoint after its sink formed: the effect shows only there (e.g. the
two-layer broadcast at its reach size, `sinkexp train task=broadcast model.global_pathway=learned
train.steps=15000`, after step 6000). With --fresh the sides train the composed config from step 0
instead (whether flushing changes what a whole run computes). Each side runs in a fresh process, as
a training job does: it sets the thread count, then flushes or keeps subnormals
(SINKEXP_DENORMALS), loads the checkpoint (or builds the model), warms up for 3 steps (not with
--fresh), times --steps steps, then counts each layer's subnormal attention weights on one batch.
The sides alternate (kept first in odd rounds). Printed: median ms/step per side and kept /
flushed (above 1: flushing is faster), whether the two sides' losses and final weights were
bit-identical, and the subnormal shares; first the machine line, and INVALID at the end where other
processes kept a core busy before, between or after the rounds.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time

from sinkexp.machine.benchmark import load, machine, validity

SIDES = {"kept": "keep", "flushed": ""}  # side -> SINKEXP_DENORMALS


def worker(run: str, fresh: str, steps: int, threads: int) -> None:
    # lazy: the parent process only starts and times the workers
    from pathlib import Path

    import torch
    from omegaconf import OmegaConf

    from sinkexp.config.compose import compose_config
    from sinkexp.config.validate import from_dictconfig
    from sinkexp.jobs.runner import make_trainer
    from sinkexp.machine.denormals import flush_denormals

    torch.set_num_threads(threads)
    how = flush_denormals()  # as run_job does, before the first parallel region
    if fresh:
        _, trainer = make_trainer([compose_config(*fresh.split())], torch.device("cpu"))
    else:
        cfg = from_dictconfig(OmegaConf.load(Path(run) / "config.yaml"))
        _, trainer = make_trainer([cfg], torch.device("cpu"))
        state = torch.load(Path(run) / "checkpoint.pt", map_location="cpu", weights_only=False)
        trainer.load_state_dict(state["trainer"])
        for _ in range(3):
            trainer.train_step()
    step = trainer.step
    start = time.perf_counter()
    losses = [trainer.train_step().item() for _ in range(steps)]
    ms = (time.perf_counter() - start) / steps * 1e3
    weights = hashlib.sha256(b"".join(v.numpy().tobytes() for v in trainer.model.state_dict().values()))
    subnormal = subnormal_weights(trainer)  # after the timed steps: its batch is not theirs
    print(
        json.dumps(
            {
                "ms": ms,
                "step": step,
                "how": how,
                "losses": losses,
                "weights": weights.hexdigest(),
                "subnormal": subnormal,
            }
        )
    )


def subnormal_weights(trainer) -> list[float]:
    """Per layer, the share of attention weights below float32's smallest normal, on one batch."""
    # lazy: called in a worker only, as worker()'s imports
    import torch

    from sinkexp.model.capture import capture

    names = [f"blocks.{layer}.attn.weights" for layer in range(len(trainer.model.blocks))]
    with torch.no_grad(), capture(trainer.model, names) as cache:
        trainer.forward(trainer.next_batch().inputs)
    tiny = torch.finfo(torch.float32).tiny
    return [round(((cache[n] > 0) & (cache[n] < tiny)).float().mean().item(), 4) for n in names]


def timed(args: argparse.Namespace, side: str) -> dict:
    env = {**os.environ, "SINKEXP_DENORMALS": SIDES[side]}
    args = [
        sys.executable,
        __file__,
        args.run or "",
        "--fresh",
        args.fresh or "",
        "--worker",
        "--steps",
        str(args.steps),
        "--threads",
        str(args.threads),
    ]
    return json.loads(subprocess.run(args, env=env, check=True, capture_output=True, text=True).stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", nargs="?", help="a run directory with a checkpoint")
    parser.add_argument("--fresh", help="overrides of a config to train from step 0 instead")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args.run, args.fresh, args.steps, args.threads)
    if not (args.run or args.fresh):
        parser.error("give a run directory or --fresh OVERRIDES")
    print(machine(args.threads), flush=True)
    times, last, loads = {side: [] for side in SIDES}, {}, [load()]
    for round_ in range(args.rounds):
        for side in SIDES if round_ % 2 == 0 else reversed(list(SIDES)):
            result = timed(args, side)
            times[side].append(result["ms"])
            last[side] = result
            print(f"round {round_ + 1} {side}: {result['ms']:.1f} ms/step ({result['how']})", flush=True)
        loads.append(load())
    kept, flushed = (statistics.median(times[side]) for side in SIDES)
    same = {key: last["kept"][key] == last["flushed"][key] for key in ("losses", "weights")}
    print(
        f"from step {result['step']}, {args.threads} thread(s), {args.steps} steps: "
        f"kept {kept:.1f} ms/step, flushed {flushed:.1f} ms/step, kept / flushed {kept / flushed:.2f}x; "
        + ", ".join(f"{key} {'bit-identical' if equal else 'differ'}" for key, equal in same.items())
        + f"; subnormal attention weights by layer at the end, kept: {last['kept']['subnormal']}"
        + validity(loads)
    )


if __name__ == "__main__":
    main()
