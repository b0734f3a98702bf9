"""GPU benchmark: many models per step, and the paper-scale damping run (about three minutes).

    .venv/bin/python scripts/bench_gpu.py                       # on a machine with a GPU
    .venv/bin/python scripts/bench_gpu.py --compile             # also torch.compile (reduce-overhead)
    .venv/bin/python scripts/bench_gpu.py --device cpu --ks 1,2 --seconds 1 --damping-steps 40   # smoke run

Part 1, replicas: training throughput of K models of one config trained together
(train.replicas=K, ReplicaTrainer) for each K in --ks, against one lone model (Trainer, K = 1), on the
trigger task's default model (1 layer, 1 head, d_model 64, L 32, batch 128). Each side trains for
--seconds after a warm-up, data sampling included, evaluation not; the device is synchronised
before and after. Reported: steps/s, model-steps/s (K x steps/s), and the wall time of a step of K
models over that of one lone model (target: at most 2 at K = 64).

Part 2, the source's damping run: `sinkexp train task=damping scale=paper` (30k steps x batch 1024,
evaluation every 1000 steps) in-process into a temporary directory, with its wall time (target: at
most a minute on an H200; the source reports about 4 minutes on one GPU) and whether the sink formed.
"""
from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path

import torch
from hydra import compose, initialize_config_module

from sinkexp.cli import CONFIG_MODULE, _register_resolvers
from sinkexp.config import from_dictconfig, register_schema
from sinkexp.evaluate.evaluator import format_summary
from sinkexp.runner import make_trainer, replica_configs, resolve_device, run


def make_config(*overrides: str):
    register_schema()
    _register_resolvers()
    with initialize_config_module(CONFIG_MODULE, version_base="1.3"):
        return from_dictconfig(compose("config", overrides=list(overrides)))


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


def bench_replicas(ks: list[int], device: torch.device, seconds: float, compile: bool) -> list[dict]:
    """K = 1 is a lone run's Trainer, the baseline; every other K a ReplicaTrainer."""
    rows = []
    for K in sorted({1, *ks}):
        cfg = make_config("task=trigger", f"train.replicas={K}", f"train.compile={compile}")
        _, trainer = make_trainer(replica_configs(cfg), device)
        rate = steps_per_second(trainer, device, seconds)
        lone_rate = rows[0]["steps_per_s"] if rows else rate
        rows.append({"K": K, "trainer": type(trainer).__name__, "steps_per_s": rate, "model_steps_per_s": K * rate,
                     "step_time_vs_lone": lone_rate / rate})
        print(f"K={K:>3} ({type(trainer).__name__:>14}): {rate:8.1f} steps/s  {K * rate:9.1f} model-steps/s  "
              f"step time {lone_rate / rate:5.2f}x the lone model's", flush=True)
    return rows


def bench_damping(device: torch.device, steps: int, compile: bool) -> dict:
    cfg = make_config("task=damping", "scale=paper", f"device={device}", f"train.steps={steps}",
                      f"train.compile={compile}")
    with tempfile.TemporaryDirectory() as run_dir:
        started = time.perf_counter()
        summary = run(cfg, run_dir)
        wall = time.perf_counter() - started
        meta = json.loads((Path(run_dir) / "meta.json").read_text())
    print(format_summary(summary))
    print(f"damping, scale=paper: {steps} steps x batch {cfg.train.batch_size} in {wall:.1f} s "
          f"({meta['steps_per_s']:.0f} steps/s, evaluation every {cfg.eval.every} steps included)", flush=True)
    return {"steps": steps, "batch_size": cfg.train.batch_size, "wall_s": wall, "steps_per_s": meta["steps_per_s"],
            "sink_attn_layer0": summary["sink_attn"]["0"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--ks", default="1,8,64", help="replica counts, comma-separated")
    parser.add_argument("--seconds", type=float, default=8.0, help="timed seconds per side")
    parser.add_argument("--damping-steps", type=int, default=30000)
    parser.add_argument("--compile", action="store_true", help="train.compile=true for every side")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    device = resolve_device(args.device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or platform.machine()
    print(f"device {device} ({name}), torch {torch.__version__}, CUDA {torch.version.cuda}, "
          f"compile {args.compile}, fp32 matmuls (TF32 {torch.backends.cuda.matmul.allow_tf32})", flush=True)
    results = {"device": str(device), "device_name": name, "torch": torch.__version__, "compile": args.compile,
               "replicas": bench_replicas([int(k) for k in args.ks.split(",")], device, args.seconds, args.compile),
               "damping": bench_damping(device, args.damping_steps, args.compile)}
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=2)


if __name__ == "__main__":
    main()
