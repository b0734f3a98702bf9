"""One experiment, start to finish, in one run directory: build the task and model, train with
periodic evaluation, and write the tables, the summary and the markers (rundir.py's layout).

A directory that already holds a finished run of the same config is left untouched; one that
holds a checkpoint of the same config resumes from it; a different config is refused.
"""
from __future__ import annotations

import logging
import time
import traceback
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
from sinkexp.train import Trainer

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
    run_dir = Path(run_dir)
    digest = config_hash(cfg)
    if (run_dir / R.DONE).exists():
        finished = R.read_json(run_dir / R.META).get("config_hash")
        if finished != digest:
            raise RunDirError(f"{run_dir} holds a finished run of another config (hash {finished}, "
                              f"this one {digest}); refusing to overwrite it")
        log.info("%s is finished already (hash %s); left untouched", run_dir, digest)
        return R.read_json(run_dir / R.SUMMARY)
    (run_dir / R.FAILED).unlink(missing_ok=True)
    try:
        return _train_and_evaluate(cfg, run_dir, digest)
    except BaseException as err:  # KeyboardInterrupt too: the directory says why it stopped
        R.write_text(run_dir / R.FAILED, "".join(traceback.format_exception(err)))
        raise


def _train_and_evaluate(cfg: Config, run_dir: Path, digest: str) -> dict:
    device = resolve_device(cfg.device)
    task = TASKS[cfg.task.name](cfg.task)
    torch.manual_seed(cfg.seed)  # model initialisation; data come from explicit generators below
    model = Transformer(cfg.model, cfg.attn, task).to(device)
    trainer = Trainer(model, task, cfg.train, torch.Generator(device=device).manual_seed(cfg.seed), device)
    eval_batch = task.sample(cfg.eval.batch_size, torch.Generator(device=device).manual_seed(cfg.eval.seed),
                             device)
    metric_rows, loss_rows = [], []

    checkpoint = run_dir / R.CHECKPOINT
    if checkpoint.exists():
        state = torch.load(checkpoint, map_location=device, weights_only=False)
        if state["config_hash"] != digest:
            raise RunDirError(f"{checkpoint} belongs to another config (hash {state['config_hash']}, "
                              f"this one {digest}); refusing to resume from it")
        trainer.load_state_dict(state["trainer"])
        torch.set_rng_state(state["torch_rng"])
        metric_rows, loss_rows = state["metric_rows"], state["loss_rows"]
        log.info("resuming %s from step %d", run_dir, trainer.step)

    meta = R.start_meta(seed=cfg.seed, config_hash=digest, requested_device=cfg.device, device=device)
    meta["resumed_from_step"] = trainer.step or None
    R.write_text(run_dir / R.CONFIG, OmegaConf.to_yaml(OmegaConf.create(to_dict(cfg))))
    R.write_json(run_dir / R.META, meta)

    def tables() -> tuple[pd.DataFrame, pd.DataFrame]:
        return (pd.DataFrame(metric_rows, columns=METRIC_COLUMNS), pd.DataFrame(loss_rows, columns=LOSS_COLUMNS))

    def on_eval(step: int) -> None:
        rows, losses = evaluate(model, task, eval_batch, step)
        metric_rows.extend(rows)
        loss_rows.extend(losses)
        metrics, loss_table = tables()
        R.write_csv(run_dir / R.METRICS, metrics)
        R.write_csv(run_dir / R.LOSSES, loss_table)
        now = {split: loss for s, split, loss in losses if split.startswith("eval/")}
        log.info("step %d eval %s", step, " ".join(f"{k}={v:.4g}" for k, v in now.items()))

    def on_log(step: int, loss: float) -> None:
        loss_rows.append((step, "train", loss))
        log.info("step %d train loss %.5g", step, loss)

    def on_checkpoint(step: int) -> None:
        # The tables so far travel with the checkpoint, so a resumed run continues them exactly.
        R.save_checkpoint(checkpoint, {"config_hash": digest, "trainer": trainer.state_dict(),
                                       "torch_rng": torch.get_rng_state(),
                                       "metric_rows": metric_rows, "loss_rows": loss_rows})

    started = time.perf_counter()
    steps_per_s = trainer.fit(eval_every=cfg.eval.every, on_eval=on_eval, on_log=on_log,
                              on_checkpoint=on_checkpoint)
    metrics, loss_table = tables()
    R.write_csv(run_dir / R.LOSSES, loss_table)
    summary = summarise(metrics, loss_table, task.query_types, task.reference)
    R.write_arrays(run_dir / R.ATTENTION, mean_attention(model, eval_batch))
    R.write_json(run_dir / R.SUMMARY, summary)
    meta.update(end_time=R.utc_now(), wall_time_s=round(time.perf_counter() - started, 3),
                steps_per_s=round(steps_per_s, 2))
    R.write_json(run_dir / R.META, meta)
    R.write_text(run_dir / R.DONE, R.utc_now() + "\n")
    return summary
