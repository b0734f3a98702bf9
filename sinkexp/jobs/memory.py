"""How much memory a job needs, and whether the device it will train on has it: checked when the
plan is made (jobs/plan.py, `check_plan`) and again when the job starts (runner.train_together,
`check_start`), and used to size reproduce's pool on GPUs (`pool_gpus`).

What counts as the device's memory: on the CPU the machine's physical memory; on a GPU its free
memory now (other processes' and other users' allocations left out), divided among the jobs that
will share it. A plan made where the jobs will not run (hydra/launcher=slurm, on a login node
without a GPU) is checked against the memory stated in SINKEXP_DEVICE_MEMORY (GiB of the device
each job gets), or, without it, when each job starts.
"""

from __future__ import annotations

import math
import os

import torch

from sinkexp.config.schema import Config, run_configs
from sinkexp.errors import ConfigError
from sinkexp.jobs.launcher import Launcher
from sinkexp.machine.devices import device_kind, resolve_device, usable_gpus, visible_gpus, worker_gpus, workers_per_gpu
from sinkexp.machine.threads import usable_cores
from sinkexp.tasks import TASKS

STATED = "SINKEXP_DEVICE_MEMORY"


def fused_training(cfg: Config, models: int) -> bool:
    """Whether training steps take the fused attention kernel (model/attention.py): a lone model
    (replicas and packs take the explicit path, which vmap batches; runner.make_trainer), softmax
    without a slot, and no penalty that captures the weights (train.bos_penalty reads them)."""
    return models == 1 and cfg.attn.normaliser == "softmax" and cfg.attn.slot == "none" and cfg.train.bos_penalty == 0


def bytes_needed(cfg: Config, models: int | None = None) -> int:
    """Bytes a training step or an evaluation of `cfg` needs at the least (fp32), for `models`
    models trained together (default: the job's, schema.run_configs): weights, gradients and
    two optimiser moments per model, the drawn data, the task's structure, and the larger of the
    training step's activations and the captured evaluation's. A coarse floor, for refusing sizes
    the device cannot hold."""
    m, t = cfg.model, cfg.train
    dims = TASKS[cfg.task.name].dims(cfg.task)
    d, L, H = m.d_model, m.n_layers, m.n_heads
    T = dims.seq_len + m.n_registers
    width = dims.vocab_size or dims.input_dim
    mlp = 0 if m.mlp == "none" else 8 * d * d
    params = L * (4 * d * d + mlp) + width * d + d * dims.output_dim + T * d
    K = models or len(run_configs(cfg))
    # Per layer and sequence: a dozen (T, d) tensors (and as many for an MLP) kept for the backward
    # pass, and the attention's own: the fused kernel keeps one log-sum-exp per query and head, the
    # explicit path the scores, the weights and the mask's copy (B, H, T, T) each.
    per_token = 12 * d + (12 * d if mlp else 0)
    attention = H * T if fused_training(cfg, K) else 3 * H * T * T
    step = L * t.batch_size * (T * per_token + attention)
    # Evaluation keeps no graph, but it captures every layer's scores and weights (B, H, T, T) and
    # half a dozen (B, T, d) taps, and works on one layer at a time (evaluate/evaluator.py: CAPTURED).
    evaluation = cfg.eval.batch_size * (L * (2 * H * T * T + 6 * T * d) + 2 * H * T * T + T * per_token)
    data = t.data_chunk * t.batch_size * T * (dims.input_dim or 1)
    floats = (4 * params + data + dims.structure) * K + max(K * step, evaluation)
    return 4 * floats


def stated_memory() -> int | None:
    """SINKEXP_DEVICE_MEMORY (GiB) in bytes; None when unset."""
    value = os.environ.get(STATED)
    if value is None:
        return None
    try:
        gib = float(value.removesuffix("GiB").strip())
    except ValueError:
        gib = -1.0
    if not (math.isfinite(gib) and gib > 0):
        raise ConfigError(f"{STATED}={value} is not valid; give the memory of the device each job gets in GiB, e.g. 80")
    return int(gib * 2**30)


def available(device: torch.device) -> int:
    """Bytes `device` offers a job: a GPU's free memory now, the CPU's physical memory."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def refusal(cfg: Config, need: int, have: int, where: str) -> ConfigError:
    m, t = cfg.model, cfg.train
    return ConfigError(
        f"model.n_layers={m.n_layers} model.d_model={m.d_model} train.batch_size={t.batch_size} "
        f"eval.batch_size={cfg.eval.batch_size} train.replicas={t.replicas} need at least "
        f"{need / 2**30:.3g} GiB (weights, optimiser state, activations); {where} has "
        f"{have / 2**30:.3g} GiB: choose smaller sizes"
    )


def jobs_per_gpu(launcher: Launcher, gpus: int) -> int:
    """Jobs that train at once on one GPU: a parallel (joblib) sweep's n_jobs spread over the GPUs."""
    if not launcher.parallel:
        return 1
    n_jobs = launcher.n_jobs if launcher.n_jobs > 0 else usable_cores()  # -1 (parallel.yaml): a core each
    return max(1, math.ceil(n_jobs / max(1, gpus)))


def check_plan(cfg: Config, launcher: Launcher, multirun: bool) -> None:
    """At planning: refuse (ConfigError, one line) a job whose floor does not fit the device it will
    train on, or a device it cannot have. `launcher` is the command's (jobs/launcher.py); in a sweep
    (`multirun`) an unindexed GPU request may land on any GPU (launch.spread_over_gpus)."""
    need, elsewhere = bytes_needed(cfg), launcher.elsewhere
    if elsewhere and cfg.device == "auto" and not usable_gpus():
        raise ConfigError(
            "device=auto: this machine has no GPU to resolve it for the jobs hydra/launcher=slurm runs "
            "elsewhere, and a run's directory depends on its device kind; name it: "
            "device=cuda or device=cpu"
        )
    if elsewhere and (device_kind(cfg.device) == "cpu" or not usable_gpus()):
        stated = stated_memory()  # the jobs' device is not here: the stated memory, or the job checks
        if stated is not None and need > stated:
            raise refusal(cfg, need, stated, f"{cfg.device} ({STATED})")
        return
    device = resolve_device(cfg.device)  # ConfigError for a device this machine does not have
    if device.type == "cpu":
        if need > available(device):
            raise refusal(cfg, need, available(device), "cpu")
        return
    gpus = usable_gpus()
    spread = multirun and cfg.device in ("auto", "cuda") and gpus > 1  # any GPU may get the job
    devices = [torch.device("cuda", i) for i in range(gpus)] if spread else [device]
    share = jobs_per_gpu(launcher, gpus)
    have = min(available(d) for d in devices) // share
    if need > have:
        where = f"{device}" if len(devices) == 1 else f"the least free of {len(devices)} GPUs"
        raise refusal(cfg, need, have, f"{where} (free now" + (f", over {share} jobs at once)" if share > 1 else ")"))


def check_start(cfg: Config, device: torch.device, models: int) -> None:
    """When a job starts: its floor against what its device offers now (a plan made on a login node
    could not look, and on a GPU other jobs may have taken memory since)."""
    need, have = bytes_needed(cfg, models), available(device)
    if need > have:
        raise refusal(cfg, need, have, f"{device}" + (" (free now)" if device.type == "cuda" else ""))


def pool_gpus(device: str, jobs: list[Config], workers: int | None) -> list[str]:
    """The GPU of each worker of reproduce's pool, as CUDA_VISIBLE_DEVICES names it ([] for a pool
    on the CPU, or where `device` names one GPU). `jobs` are the pool's jobs' configs, `workers` the
    user's hydra.launcher.n_jobs (None: as many per GPU as its free memory holds for the largest
    job's floor, devices.workers_per_gpu)."""
    count = usable_gpus()
    if device not in ("auto", "cuda") or not count or not jobs:
        return []
    gpus = visible_gpus(os.environ.get("CUDA_VISIBLE_DEVICES"), count)
    if workers is None:
        free = min(available(torch.device("cuda", i)) for i in range(count))
        workers = len(gpus) * workers_per_gpu(free, max(map(bytes_needed, jobs)), usable_cores(), len(gpus))
    return worker_gpus(gpus, workers)
