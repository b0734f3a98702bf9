"""Experiments, start to finish, each in its run directory: build the task and model, train with
periodic evaluation, and write the tables, the summary and the markers (rundir.py's layout).

A directory that already holds a finished run of the same config is left untouched; one that
holds a checkpoint of the same config resumes from it; a different config is refused.
`run_replicas` trains several seeds of one config together (train.replicas) and writes each
seed's directory exactly as `run` would alone.
"""
from __future__ import annotations

import dataclasses
import logging
import time
import traceback
from collections import defaultdict
from pathlib import Path

import pandas as pd
import torch
from omegaconf import OmegaConf

from sinkexp import rundir as R
from sinkexp.config import Config, config_hash, to_dict
from sinkexp.errors import ConfigError
from sinkexp.evaluate.evaluator import LOSS_COLUMNS, METRIC_COLUMNS, evaluate, mean_attention, summarise
from sinkexp.model import Transformer
from sinkexp.tasks import TASKS
from sinkexp.train import ReplicaTrainer, Trainer

log = logging.getLogger(__name__)


class RunDirError(RuntimeError):
    """The run directory holds something this run must not overwrite."""


def resolve_device(requested: str) -> torch.device:
    """The torch device for `device=...`, with an explicit index on CUDA (cuda -> cuda:0)."""
    if requested == "auto":
        requested = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(requested)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(f"device={requested} is not available (torch sees no CUDA device); "
                              "choose one of: auto, cpu")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ConfigError(f"device={requested} is not available; choose one of: auto, cpu, "
                              + ", ".join(f"cuda:{i}" for i in range(torch.cuda.device_count())))
        if device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
    return device


def run(cfg: Config, run_dir: Path) -> dict:
    """Train and evaluate `cfg` into `run_dir`; returns the summary. Marks FAILED on any error."""
    return run_replicas([cfg], [run_dir])[0]


def replica_configs(cfg: Config) -> list[Config]:
    """The lone runs train.replicas=K stands for: seeds seed .. seed+K-1, all else equal."""
    return [dataclasses.replace(cfg, seed=cfg.seed + k) for k in range(cfg.train.replicas)]


def run_replicas(cfgs: list[Config], run_dirs: list[Path]) -> list[dict]:
    """Train configs that differ only in the seed together, one directory each; returns the summaries.

    Finished runs are skipped; the others train in lockstep, grouped by the step their checkpoint
    holds (0 without one), so that each resumes where it stopped. A failure marks every run of the
    group it hit FAILED.
    """
    run_dirs = [Path(d) for d in run_dirs]
    digests = [config_hash(cfg) for cfg in cfgs]
    summaries: dict[int, dict] = {}
    groups: dict[int, list[int]] = defaultdict(list)
    states = {}
    for i, (run_dir, digest) in enumerate(zip(run_dirs, digests)):
        if (run_dir / R.DONE).exists():
            finished = R.read_json(run_dir / R.META).get("config_hash")
            if finished != digest:
                raise RunDirError(f"{run_dir} holds a finished run of another config (hash {finished}, "
                                  f"this one {digest}); refusing to overwrite it")
            log.info("%s is finished already (hash %s); left untouched", run_dir, digest)
            summaries[i] = R.read_json(run_dir / R.SUMMARY)
            continue
        states[i] = load_checkpoint(run_dir, digest)
        groups[states[i]["trainer"]["step"] if states[i] else 0].append(i)
    for group in groups.values():
        for i in group:
            (run_dirs[i] / R.FAILED).unlink(missing_ok=True)
        try:
            results = _train_and_evaluate([RunFiles(cfgs[i], run_dirs[i], digests[i], states[i]) for i in group])
        except BaseException as err:  # KeyboardInterrupt too: the directory says why it stopped
            for i in group:
                R.write_text(run_dirs[i] / R.FAILED, "".join(traceback.format_exception(err)))
            raise
        summaries.update(zip(group, results))
    return [summaries[i] for i in range(len(cfgs))]


def load_checkpoint(run_dir: Path, digest: str) -> dict | None:
    checkpoint = run_dir / R.CHECKPOINT
    if not checkpoint.exists():
        return None
    state = torch.load(checkpoint, map_location="cpu", weights_only=False)
    if state["config_hash"] != digest:
        raise RunDirError(f"{checkpoint} belongs to another config (hash {state['config_hash']}, "
                          f"this one {digest}); refusing to resume from it")
    return state


class RunFiles:
    """One run's directory and the tables it accumulates; `state` is its checkpoint, if resuming."""

    def __init__(self, cfg: Config, run_dir: Path, digest: str, state: dict | None):
        self.cfg, self.run_dir, self.digest, self.state = cfg, run_dir, digest, state
        self.metric_rows = state["metric_rows"] if state else []
        self.loss_rows = state["loss_rows"] if state else []
        self.name = f"s{cfg.seed}"

    def start(self, device: torch.device, replica: int, replicas: int) -> None:
        meta = R.start_meta(seed=self.cfg.seed, config_hash=self.digest, requested_device=self.cfg.device,
                            device=device)
        meta["resumed_from_step"] = self.state["trainer"]["step"] if self.state else None
        meta["replica"] = {"index": replica, "of": replicas}
        self.meta = meta
        R.write_text(self.run_dir / R.CONFIG, OmegaConf.to_yaml(OmegaConf.create(to_dict(self.cfg))))
        R.write_json(self.run_dir / R.META, meta)

    def tables(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        return (pd.DataFrame(self.metric_rows, columns=METRIC_COLUMNS),
                pd.DataFrame(self.loss_rows, columns=LOSS_COLUMNS))

    def evaluated(self, rows: list, losses: list, step: int) -> None:
        self.metric_rows.extend(rows)
        self.loss_rows.extend(losses)
        metrics, loss_table = self.tables()
        R.write_csv(self.run_dir / R.METRICS, metrics)
        R.write_csv(self.run_dir / R.LOSSES, loss_table)
        now = {split: loss for s, split, loss in losses if split.startswith("eval/")}
        log.info("%s step %d eval %s", self.name, step, " ".join(f"{k}={v:.4g}" for k, v in now.items()))

    def logged(self, step: int, loss: float) -> None:
        self.loss_rows.append((step, "train", loss))
        log.info("%s step %d train loss %.5g", self.name, step, loss)

    def checkpoint(self, trainer_state: dict) -> None:
        # The tables so far travel with the checkpoint, so a resumed run continues them exactly.
        R.save_checkpoint(self.run_dir / R.CHECKPOINT, {
            "config_hash": self.digest, "trainer": trainer_state, "torch_rng": torch.get_rng_state(),
            "metric_rows": self.metric_rows, "loss_rows": self.loss_rows})

    def finish(self, model, task, eval_batch, wall_time_s: float, steps_per_s: float) -> dict:
        metrics, loss_table = self.tables()   # on disk already: the last step always evaluates
        summary = summarise(metrics, loss_table, task.query_types, task.reference)
        R.write_arrays(self.run_dir / R.ATTENTION, mean_attention(model, eval_batch))
        R.write_json(self.run_dir / R.SUMMARY, summary)
        self.meta.update(end_time=R.utc_now(), wall_time_s=round(wall_time_s, 3), steps_per_s=round(steps_per_s, 2))
        R.write_json(self.run_dir / R.META, self.meta)
        R.write_text(self.run_dir / R.DONE, R.utc_now() + "\n")
        return summary


def make_trainer(cfgs: list[Config], device: torch.device) -> tuple[object, Trainer]:
    """The task and a trainer for configs that differ only in the seed (a ReplicaTrainer for several).

    Each model is initialised and each data generator seeded exactly as a lone run of its seed.
    """
    cfg = cfgs[0]
    task = TASKS[cfg.task.name](cfg.task)
    models, generators = [], []
    for replica in cfgs:
        torch.manual_seed(replica.seed)   # model initialisation; data come from explicit generators
        models.append(Transformer(cfg.model, cfg.attn, task).to(device))
        generators.append(torch.Generator(device=device).manual_seed(replica.seed))
    if len(cfgs) == 1:
        return task, Trainer(models[0], task, cfg.train, generators[0], device)
    return task, ReplicaTrainer(models, task, cfg.train, generators, device)


def _train_and_evaluate(runs: list[RunFiles]) -> list[dict]:
    cfg = runs[0].cfg
    device = resolve_device(cfg.device)
    task, trainer = make_trainer([run_.cfg for run_ in runs], device)
    eval_batch = task.sample(cfg.eval.batch_size, torch.Generator(device=device).manual_seed(cfg.eval.seed), device)
    if runs[0].state:
        trainer.load_state_dicts([run_.state["trainer"] for run_ in runs])
        torch.set_rng_state(runs[0].state["torch_rng"])
        log.info("resuming %s from step %d", ", ".join(str(run_.run_dir) for run_ in runs), trainer.step)
    for k, run_ in enumerate(runs):
        run_.start(device, k, len(runs))

    def on_eval(step: int) -> None:
        for k, run_ in enumerate(runs):
            run_.evaluated(*evaluate(trainer.replica(k), task, eval_batch, step), step)

    def on_log(step: int, losses: list[float]) -> None:
        for run_, loss in zip(runs, losses):
            run_.logged(step, loss)

    def on_checkpoint(step: int) -> None:
        for k, run_ in enumerate(runs):
            run_.checkpoint(trainer.state_dict(k))

    started = time.perf_counter()
    steps_per_s = trainer.fit(eval_every=cfg.eval.every, on_eval=on_eval, on_log=on_log, on_checkpoint=on_checkpoint)
    wall_time_s = time.perf_counter() - started
    return [run_.finish(trainer.replica(k), task, eval_batch, wall_time_s, steps_per_s) for k, run_ in enumerate(runs)]
