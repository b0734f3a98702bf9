"""GPU benchmark: many models per step, and the paper-scale damping run (about three minutes).

    .venv/bin/python scripts/bench_gpu.py                       # on a machine with a GPU
    .venv/bin/python scripts/bench_gpu.py --compile             # also torch.compile (reduce-overhead)
    .venv/bin/python scripts/bench_gpu.py --device cpu --ks 1,2 --seconds 1 --damping-steps 40   # smoke run

Part 1, replicas: training throughput of K models of one config trained together
(train.replicas=K, ReplicaTrainer) for each K in --ks, against one lone model (Trainer, K = 1) with
the same train.data_chunk, for each chunk in --chunks, on the trigger task's default model
(1 layer, 1 head, d_model 64, L 32, batch 128). Each side trains for --seconds after a warm-up,
data sampling included, evaluation not; the device is synchronised before and after. Reported:
steps/s, model-steps/s (K x steps/s), the wall time of a step of K models over that of one lone
model (target: at most 2 at K = 64), and kernel launches per step (profiled over one data chunk;
on the CPU, the operators that would be kernels).

Part 3, packed hyper-parameter grids: reproduce's weight-decay grid (sun2026, backcopy with three
layers, 3 decays x 3 seeds) and gamma grid (fesser2026, damping dynamics, 4 gammas x 3 seeds), each as
one pack (`pack=`, a ReplicaTrainer) against its runs trained one at a time: model-steps/s, best of
two alternating rounds of --seconds each.

Part 4, deterministic kernels: a lone model's steps/s with torch.use_deterministic_algorithms on
(what a CUDA run uses: devices.configure) and off, on the trigger defaults (T 32) and on backcopy with
T 256 (where the fused attention's backward would otherwise split keys across blocks); the ratio is
the speed an exactly resumable run costs. Alternating rounds, the best of each side.

Part 2, the source's damping run: `sinkexp train task=damping scale=paper` (30k steps x batch 1024,
evaluation every 1000 steps) with train.data_chunk=--damping-chunk, in-process into a temporary
directory, with its wall time (target: at most a minute on an H200; the source reports about 4
minutes on one GPU) and whether the sink formed.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from sinkexp.config.compose import compose_config
from sinkexp.config.schema import run_configs
from sinkexp.evaluate.tables import format_summary
from sinkexp.jobs.runner import make_trainer, run
from sinkexp.machine.benchmark import alternate, load, validity
from sinkexp.machine.devices import configure, resolve_device
from sinkexp.rundir.provenance import device_name


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def steps_per_second(trainer, device: torch.device, seconds: float, warmup: int = 5) -> float:
    for _ in range(warmup):
        trainer.train_step()
    synchronize(device)
    steps, started = 0, time.perf_counter()
    while steps < 3 or time.perf_counter() - started < seconds:
        trainer.train_step()
        steps += 1
    synchronize(device)
    return steps / (time.perf_counter() - started)


# Operators that launch no kernel (views, metadata, allocation): left out of the CPU's launch count.
NO_KERNEL = {
    "aten::" + name
    for name in (
        "as_strided view _unsafe_view reshape expand permute transpose t unsqueeze squeeze slice select alias split "
        "split_with_sizes unbind detach lift_fresh empty empty_strided resolve_conj resolve_neg to _local_scalar_dense "
        "result_type"
    ).split()
}


def launches_per_step(trainer, device: torch.device) -> float:
    """Kernels per training step, averaged over one data chunk: CUDA kernels and copies on a GPU;
    on the CPU the operators that would be kernels (innermost aten ops that are not views)."""

    trainer.batches.clear()  # start the average at a fresh draw
    steps = trainer.cfg.data_chunk
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        for _ in range(steps):
            trainer.train_step()
        synchronize(device)
    events = prof.events()
    if device.type == "cuda":
        count = sum(event.device_type == DeviceType.CUDA for event in events)
    else:
        count = sum(
            event.name.startswith("aten::")
            and event.name not in NO_KERNEL
            and not any(child.name.startswith("aten::") for child in event.cpu_children)
            for event in events
        )
    return count / steps


def bench_replicas(ks: list[int], chunks: list[int], device: torch.device, seconds: float, compile: bool) -> list[dict]:
    """K = 1 is a lone run's Trainer, the baseline for its data chunk; every other K a ReplicaTrainer."""
    rows = []
    for chunk in chunks:
        lone_rate = None
        for K in sorted({1, *ks}):
            cfg = compose_config(
                "task=trigger", f"train.replicas={K}", f"train.compile={compile}", f"train.data_chunk={chunk}"
            )
            _, trainer = make_trainer(run_configs(cfg), device)
            rate = steps_per_second(trainer, device, seconds)
            launches = launches_per_step(trainer, device)
            lone_rate = lone_rate or rate
            rows.append(
                {
                    "K": K,
                    "data_chunk": chunk,
                    "trainer": type(trainer).__name__,
                    "steps_per_s": rate,
                    "model_steps_per_s": K * rate,
                    "step_time_vs_lone": lone_rate / rate,
                    "launches_per_step": launches,
                }
            )
            print(
                f"data_chunk {chunk:>3}, K={K:>3} ({type(trainer).__name__:>14}): {rate:8.1f} steps/s  "
                f"{K * rate:9.1f} model-steps/s  step time {lone_rate / rate:5.2f}x the lone model's  "
                f"{launches:7.1f} launches/step",
                flush=True,
            )
    return rows


# Part 3: reproduce's hyper-parameter grids at their CPU sizes, each as one pack (pack=, plus its seeds
# as train.replicas) against the lone run of its first setting (every run of a grid costs the same).
GRIDS = {
    "weight_decay": (("task=backcopy", "model.n_layers=3", "pack={train.weight_decay:[0.0,0.0001,0.1]}"), 3),
    "gamma": (("task=damping_dynamics", "pack={task.gamma:[0.0,0.01,0.1,1.0]}"), 3),
}


def bench_packs(device: torch.device, seconds: float, rounds: int = 2) -> list[dict]:
    """Model-steps/s of each grid packed into one trainer against its runs one at a time (the lone
    Trainer, fused attention), alternating the two `rounds` times; the best round of each side."""
    rows = []
    for name, (overrides, seeds) in GRIDS.items():
        cfg = compose_config(*overrides, f"train.replicas={seeds}", f"device={device}")
        members = run_configs(cfg)
        _, packed = make_trainer(members, device)
        _, lone = make_trainer(members[:1], device)
        rates = alternate(
            {
                "lone": lambda: steps_per_second(lone, device, seconds),
                "packed": lambda: len(members) * steps_per_second(packed, device, seconds),
            },
            rounds,
        )
        lone_rate, packed_rate = max(rates["lone"]), max(rates["packed"])
        rows.append(
            {
                "grid": name,
                "overrides": list(overrides),
                "runs": len(members),
                "lone_model_steps_per_s": lone_rate,
                "packed_model_steps_per_s": packed_rate,
                "packed_over_lone": packed_rate / lone_rate,
            }
        )
        print(
            f"{name} grid ({len(members)} runs: {' '.join(overrides)} train.replicas={seeds}): one at a time "
            f"{lone_rate:8.1f} model-steps/s, packed {packed_rate:8.1f} ({packed_rate / lone_rate:.2f}x)",
            flush=True,
        )
    return rows


# Part 4: lone models where deterministic mode may cost speed (T 256: the attention backward's key splits).
DETERMINISM = {
    "trigger T32": ("task=trigger",),
    "backcopy T256": ("task=backcopy", "task.seq_len=256", "model.n_heads=4", "train.batch_size=32"),
}


def bench_determinism(device: torch.device, seconds: float, rounds: int = 2) -> list[dict]:
    """steps/s of a lone model with deterministic kernels on and off, alternating `rounds` times."""
    rows = []
    for name, overrides in DETERMINISM.items():
        _, trainer = make_trainer([compose_config(*overrides, f"device={device}")], device)

        def measured(deterministic: bool) -> float:
            torch.use_deterministic_algorithms(deterministic)
            return steps_per_second(trainer, device, seconds)

        rates = alternate({True: lambda: measured(True), False: lambda: measured(False)}, rounds)
        rate = {side: max(values) for side, values in rates.items()}  # the best round of each side
        configure(device, "exact")  # back to what a run on this device uses
        rows.append(
            {
                "model": name,
                "overrides": list(overrides),
                "deterministic_steps_per_s": rate[True],
                "free_steps_per_s": rate[False],
                "deterministic_over_free": rate[True] / rate[False],
            }
        )
        print(
            f"{name}: deterministic {rate[True]:8.1f} steps/s, not {rate[False]:8.1f} "
            f"({rate[True] / rate[False]:.2f}x)",
            flush=True,
        )
    return rows


def bench_damping(device: torch.device, steps: int, chunk: int, compile: bool) -> dict:
    cfg = compose_config(
        "task=damping",
        "scale=paper",
        f"device={device}",
        f"train.steps={steps}",
        f"train.compile={compile}",
        f"train.data_chunk={chunk}",
    )
    with tempfile.TemporaryDirectory() as run_dir:
        started = time.perf_counter()
        summary = run(cfg, run_dir)
        wall = time.perf_counter() - started
        meta = json.loads((Path(run_dir) / "meta.json").read_text())
    print(format_summary(summary))
    print(
        f"damping, scale=paper, data_chunk {chunk}: {steps} steps x batch {cfg.train.batch_size} in {wall:.1f} s "
        f"({meta['steps_per_s']:.0f} steps/s, evaluation every {cfg.eval.every} steps included)",
        flush=True,
    )
    return {
        "steps": steps,
        "batch_size": cfg.train.batch_size,
        "data_chunk": chunk,
        "wall_s": wall,
        "steps_per_s": meta["steps_per_s"],
        "sink_attn_layer0": summary["sink_attn"]["0"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--ks", default="1,8,64", help="replica counts, comma-separated")
    parser.add_argument("--seconds", type=float, default=5.0, help="timed seconds per side")
    parser.add_argument("--chunks", default="1,32", help="train.data_chunk values for part 1, comma-separated")
    parser.add_argument("--damping-steps", type=int, default=30000)
    parser.add_argument("--damping-chunk", type=int, default=32, help="train.data_chunk of part 2")
    parser.add_argument("--compile", action="store_true", help="train.compile=true for every side")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    device = resolve_device(args.device)
    configure(device, "exact")  # as a run on this device: deterministic kernels on CUDA, exact fp32
    name = device_name(device)
    before = load()
    print(
        f"device {device} ({name}), torch {torch.__version__}, CUDA {torch.version.cuda}, "
        f"compile {args.compile}, fp32 matmuls (TF32 {torch.backends.cuda.matmul.allow_tf32}), "
        f"deterministic {torch.are_deterministic_algorithms_enabled()}",
        flush=True,
    )
    results = {
        "device": str(device),
        "device_name": name,
        "torch": torch.__version__,
        "compile": args.compile,
        "replicas": bench_replicas(
            [int(k) for k in args.ks.split(",")],
            [int(c) for c in args.chunks.split(",")],
            device,
            args.seconds,
            args.compile,
        ),
        "packs": bench_packs(device, args.seconds),
        "determinism": bench_determinism(device, args.seconds),
        "damping": bench_damping(device, args.damping_steps, args.damping_chunk, args.compile),
    }
    print(validity([before, load()]).strip() or "other processes' load below a quarter of a core before and after")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=2)


if __name__ == "__main__":
    main()
