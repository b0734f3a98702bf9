"""Runs, start to finish: build the task and the model, train with periodic evaluation, and hand
every table to the run directory (rundir/lifecycle.py decides what a directory allows and writes the files).

`run` trains one config; `train_together` trains the configs of one job together (train.replicas, pack:
schema.run_configs: the runs of a job), each writing the directory it would write alone.
"""

from __future__ import annotations

import logging
import math
import time
from collections import defaultdict
from pathlib import Path

import torch

from sinkexp.config.schema import Config, packable_keys, to_dict
from sinkexp.evaluate.evaluator import evaluate, mean_attention
from sinkexp.evaluate.tables import final_rows, summary
from sinkexp.jobs.memory import check_start
from sinkexp.machine.devices import configure, resolve_device
from sinkexp.machine.preemption import Requeue, requested
from sinkexp.model import Transformer
from sinkexp.rundir.curves import open_curves
from sinkexp.rundir.lifecycle import RunDir
from sinkexp.tasks import TASKS, held_out_batch
from sinkexp.train.loop import Diverged, Trainer
from sinkexp.train.replicas import ReplicaTrainer

log = logging.getLogger(__name__)


def run(cfg: Config, run_dir: Path) -> dict:
    """Train and evaluate `cfg` into `run_dir`; returns the summary. Marks FAILED on any error."""
    return train_together([cfg], [run_dir])[0]


def train_together(
    cfgs: list[Config], run_dirs: list[Path], hydra_files: dict | None = None, notes: dict | None = None
) -> list[dict]:
    """Train configs that differ only in what a pack may vary (schema.run_configs: seeds,
    learning rates, weight decays, a task's data settings), one directory each; returns the summaries.

    Finished runs are skipped; the others train together, grouped by the step their checkpoint
    holds (0 without one), so that each resumes where it stopped. A failure marks every run of the
    group it hit FAILED, except Requeue (the scheduler's signal: machine/preemption.py), which leaves them
    checkpointed and incomplete, and divergence in a pack, which marks only the runs that diverged:
    the others go on from their last checkpoint (as a rerun would resume them), and Diverged is
    raised once they have finished. `hydra_files` (.hydra/<name>: text) are written into each started run;
    `notes` go into its meta.json and the first lines of its log (e.g. the thread count and why).
    Raises RunDirError (RunBusy: another process holds a directory) or ConfigError (start_device)
    before training anything.
    """
    runs = [RunDir(path, cfg, hydra_files, notes) for cfg, path in zip(cfgs, run_dirs)]
    device = start_device(cfgs, runs)
    try:
        summaries, pending = open_runs(runs)
        diverged = []
        while pending:
            group = pending.pop(0)
            try:
                results = train_and_evaluate([runs[i] for i in group], device)
            except Requeue:  # checkpointed for the scheduler: incomplete, not failed
                raise
            except Diverged as err:
                lost = group if err.replicas is None else [group[k] for k in err.replicas]
                for i in lost:
                    diverged.append(explain_divergence(err, runs[i], len(group) > 1))
                    runs[i].fail(diverged[-1])
                rest = [i for i in group if i not in lost]
                if not rest:
                    raise diverged[-1] from None
                for i in rest:  # back to its last checkpoint, as a rerun would start it
                    runs[i].close()
                    runs[i].open()
                pending += [
                    [i for i in rest if runs[i].resume_step == step]
                    for step in sorted({runs[i].resume_step for i in rest})
                ]
                continue
            except BaseException as err:  # KeyboardInterrupt too: the directory says why it stopped
                for i in group:
                    runs[i].fail(err)
                raise
            summaries.update(zip(group, results))
        if diverged:
            raise one_divergence(diverged)
    finally:
        for run_dir in runs:
            run_dir.close()
    return [summaries[i] for i in range(len(cfgs))]


def one_divergence(diverged: list[Diverged]) -> Diverged:
    """The runs of a pack that diverged as one error, with what each run's FAILED says (RunDir.fail's notes)."""
    if len(diverged) == 1:
        err = diverged[0]
    else:
        err = Diverged(f"{len(diverged)} runs of the pack diverged, the others finished; the first: {diverged[0]}")
    err.__notes__ = [text for each in diverged for text in getattr(each, "__notes__", ())]
    return err


def start_device(cfgs: list[Config], runs: list[RunDir]) -> torch.device | None:
    """The device the job trains on, set up for it (devices.configure) with room checked
    (memory.check_start), before any file is written; None when every run is finished already."""
    if all(run_dir.check() is not None for run_dir in runs):
        return None
    device = resolve_device(cfgs[0].device)
    configure(device, cfgs[0].precision)
    check_start(cfgs[0], device, len(cfgs))
    return device


class Finished(dict):
    """The summary of a run that was finished when this job claimed it (read back, not trained here)."""


def open_runs(runs: list[RunDir]) -> tuple[dict[int, dict], list[list[int]]]:
    """Open each run's directory: (the finished runs' summaries by index, the others grouped by the
    step their checkpoint holds, so that each group resumes together)."""
    summaries: dict[int, dict] = {}
    groups: dict[int, list[int]] = defaultdict(list)
    for i, run_dir in enumerate(runs):
        finished = run_dir.open()
        if finished is not None:
            print(f"{run_dir.path} is finished already (hash {run_dir.digest}); left untouched")
            summaries[i] = Finished(finished)
        else:
            groups[run_dir.resume_step].append(i)
    return summaries, list(groups.values())


def explain_divergence(err: Diverged, run_dir: RunDir, pack: bool) -> Diverged:
    """The run's own Diverged: which run of a pack, and its own learning rate to lower."""
    which = f"{run_dir.path.name} " if pack else ""
    return Diverged(f"{which}{err}; try a lower train.lr (now {run_dir.cfg.train.lr:g})")


def make_trainer(cfgs: list[Config], device: torch.device):
    """The tasks (one per config) and a trainer for configs one job trains together (a ReplicaTrainer
    for several). Each model is initialised, each data generator seeded and each task built exactly
    as a lone run of its config; ValueError if the configs differ in more than a pack may vary."""
    cfg = cfgs[0]
    unpackable = {key for other in cfgs[1:] for key in differing_keys(cfg, other)} - set(packable_keys(cfg.task.name))
    if unpackable:
        raise ValueError(f"configs trained together differ in {sorted(unpackable)}, which a pack cannot vary")
    tasks = [TASKS[c.task.name](c.task) for c in cfgs]
    # Replicas take the explicit attention path, which vmap batches. The CPU's fused kernel has no
    # batching rule: vmap runs it once per replica, and the backward of that loop costs O(K^2) (K=32:
    # 1.3 s a step, half of it filling zeros). CUDA's fused kernels have batching rules for the
    # forward only in current torch; their backward falls back to the same per-replica loop
    # (pytorch/pytorch#117016, open; the rules are proposed in pytorch/pytorch#176265).
    fused = len(cfgs) == 1
    models, generators = [], []
    for replica, task in zip(cfgs, tasks):
        torch.manual_seed(replica.seed)  # model initialisation; data come from explicit generators
        models.append(Transformer(cfg.model, cfg.attn, task, fused=fused).to(device))
        generators.append(torch.Generator(device=device).manual_seed(replica.seed))
    if len(cfgs) == 1:
        return tasks, Trainer(models[0], tasks[0], cfg.train, generators[0], device)
    return tasks, ReplicaTrainer(models, tasks, [c.train for c in cfgs], generators, device)


def differing_keys(a: Config, b: Config) -> list[str]:
    """The dotted keys whose values differ between two configs."""

    def flat(node: dict, prefix: str = "") -> dict:
        out = {}
        for key, value in node.items():
            out.update(flat(value, f"{prefix}{key}.") if isinstance(value, dict) else {prefix + key: value})
        return out

    flat_a, flat_b = flat(to_dict(a)), flat(to_dict(b))
    return sorted(key for key in flat_a.keys() | flat_b.keys() if repr(flat_a.get(key)) != repr(flat_b.get(key)))


def resume(trainer, runs: list[RunDir]) -> None:
    """The trainer's state (each replica's) and the random state from the runs' checkpoints."""
    states = [run_dir.state["trainer"] for run_dir in runs]
    if isinstance(trainer, ReplicaTrainer):
        trainer.load_state_dicts(states)
    else:
        trainer.load_state_dict(states[0])
    torch.set_rng_state(runs[0].state["torch_rng"])
    log.info("resuming %s from step %d", ", ".join(str(run_dir.path) for run_dir in runs), trainer.step)
    for run_dir in runs:  # the console too (it shows only warnings of the log): one line per run
        print(f"{run_dir.path}: resuming from its checkpoint at step {trainer.step} of {run_dir.cfg.train.steps}")


def evaluate_runs(views: list, tasks: list, eval_batches: list, step: int) -> list[tuple[list, list]]:
    """Each run's (metric rows, loss rows) at `step`; Diverged when a held-out loss is not finite."""
    evaluated, diverged = [], []
    for k, (view, task, eval_batch) in enumerate(zip(views, tasks, eval_batches)):
        rows, losses = evaluate(view.model, task, eval_batch, step)
        bad = [f"{split}={loss}" for _, split, loss in losses if split.startswith("eval/") and not math.isfinite(loss)]
        if bad:  # finite weights can still be large enough to overflow the prediction
            diverged.append((k, bad[0]))
        evaluated.append((rows, losses))
    if diverged:  # nothing of this step is written: the runs that go on redo it from a checkpoint
        raise Diverged(
            f"diverged by step {step} (held-out loss {diverged[0][1]})",
            tuple(k for k, _ in diverged) if len(views) > 1 else None,
        )
    return evaluated


def train_and_evaluate(runs: list[RunDir], device: torch.device) -> list[dict]:
    """Train the runs' models together on `device` from where their checkpoints stopped; returns the summaries."""
    cfg = runs[0].cfg
    tasks, trainer = make_trainer([run_dir.cfg for run_dir in runs], device)
    # Per run: its model as a module now, and its trainer state (a lone trainer is its own view).
    views = trainer.views() if isinstance(trainer, ReplicaTrainer) else [trainer]
    # Each run's own held-out batch: a pack's runs may draw different data (task.gamma, ...).
    eval_batches = [held_out_batch(task, cfg.eval.batch_size, cfg.eval.seed, device) for task in tasks]
    if runs[0].state:
        resume(trainer, runs)
    for k, run_dir in enumerate(runs):
        run_dir.start(device, k, len(runs))
    # tensorboard=true, wandb=true (a job's runs ask alike): each run's curves (rundir/curves.py); a
    # resumed run's from the step after its checkpoint's
    curves = [open_curves(r.cfg, r.path, r.digest, trainer.step + 1 if r.state else None) for r in runs]
    curves = [curve for curve in curves if curve is not None]

    def on_eval(step: int) -> None:
        evaluated = evaluate_runs(views, tasks, eval_batches, step)
        for run_dir, (rows, losses) in zip(runs, evaluated):
            run_dir.evaluated(rows, losses, step)
        for curve, view, eval_batch, (rows, losses) in zip(curves, views, eval_batches, evaluated):
            curve.evaluated(rows, losses, mean_attention(view.model, eval_batch), step)

    def on_log(step: int, losses: list[float]) -> None:
        for run_dir, loss in zip(runs, losses):
            run_dir.logged(step, loss)
        for curve, loss in zip(curves, losses):
            curve.logged(step, loss)

    def on_checkpoint(step: int, keep: bool = True) -> None:
        for view, run_dir in zip(views, runs):
            run_dir.checkpoint(view.state_dict(), keep)

    started = time.perf_counter()
    try:
        steps_per_s = trainer.fit(
            eval_every=cfg.eval.every,
            on_eval=on_eval,
            on_log=on_log,
            on_checkpoint=on_checkpoint,
            eval_at_checkpoints=cfg.eval.at_checkpoints,
            stop=requested,
        )
    finally:
        for curve in curves:
            curve.close()
    wall_time_s = time.perf_counter() - started
    summaries = []
    for view, run_dir, task, eval_batch in zip(views, runs, tasks, eval_batches):
        final = final_rows(run_dir.metric_rows, run_dir.loss_rows)  # on disk already: the last step always evaluates
        result = summary(final, max(row[0] for row in run_dir.metric_rows), task.query_types, task.reference)
        run_dir.finish(result, mean_attention(view.model, eval_batch, task.query_types), wall_time_s, steps_per_s)
        summaries.append(result)
    return summaries
