"""`sinkexp measure`'s runs: sinkexp's metrics on a Hugging Face causal LM, one run directory per
(model, revision, settings), as `sinkexp train` writes them (docs/measure.md). The command line is
commands/measure.py's; it hands each job's checked MeasureConfig here.

`plan_measurement` checks a measurement before anything runs (the model is there and supported, the
text is long enough, the directory holds no other config's run): a problem is a ConfigError, one line.
`run_measurement` then measures it under the lifecycle every run shares with training
(rundir/claim.py's RunClaim, which training's RunDir extends): a finished run (DONE, same config
hash) is skipped, the directory's lock keeps two processes apart, a failure writes FAILED and the
sweep goes on, DONE is written last, a rerun of the same command does what is left.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import torch

from sinkexp.config.settings import MeasureConfig, measure_config
from sinkexp.evaluate.tables import LOSS_COLUMNS, METRIC_COLUMNS, final_rows, format_summary, summary
from sinkexp.hf import gguf, sources
from sinkexp.hf import identity as hf_identity
from sinkexp.hf.measure import NextToken, load_checkpoint, measure, perturbation_rows
from sinkexp.hf.record import Recorder
from sinkexp.jobs.plan import check_run_dir
from sinkexp.machine import preemption
from sinkexp.machine.allocator import keep_freed_memory
from sinkexp.machine.devices import resolve_device
from sinkexp.rundir import files as rundir_files
from sinkexp.rundir.claim import RunClaim, left_behind, resumes
from sinkexp.rundir.faults import note
from sinkexp.rundir.files import RunBusy, RunDirError
from sinkexp.rundir.provenance import opening_meta
from sinkexp.tasks.base import data_digest


@dataclass
class Measurement:
    """One checkpoint measured into one run directory (a job of `sinkexp measure -m`), checked."""

    cfg: MeasureConfig
    folder: Path  # the model's local folder (a hub id's snapshot: config and tokenizer so far)
    digest: str  # config hash
    run_dir: Path
    inputs: torch.Tensor  # (n, seq_len) token ids
    step: int  # the checkpoint's training step (-1: unknown)
    written: dict  # config.yaml
    checkpoint: gguf.Checkpoint | None = None  # a GGUF checkpoint's source, file and quantization


def model_identity(folder: Path, cfg: MeasureConfig) -> str:
    """A GGUF file's sha256, a hub snapshot's commit (its folder's name in the cache), or a local
    folder's content hash."""
    if gguf.is_gguf(cfg.model):
        return f"gguf:{gguf.open_checkpoint(cfg.model).facts['sha256']}"
    if cfg.revision is not None or not Path(cfg.model).expanduser().exists():
        return f"hub:{cfg.model}@{folder.name}"
    return sources.folder_digest(folder)


def build_measurement(cfg: MeasureConfig, multirun: bool, started: str) -> Measurement:
    """The job of `cfg`: its model checked, its inputs cut, its hash and directory; what plan_measurement
    checks before a run, and what load_run rebuilds a finished measure run's inputs with."""
    folder = sources.resolve(cfg.model, cfg.revision)
    config, _ = sources.check_model(folder, cfg.model, cfg.seq_len)
    tokenizer = sources.load_tokenizer(folder, cfg.model)
    inputs = sources.sequences(tokenizer, config, cfg.text, cfg.n, cfg.seq_len, cfg.bos, cfg.skip)
    resolve_device(cfg.device)
    digest = hf_identity.measure_hash(cfg, model_identity(folder, cfg), data_digest("text", cfg.text))
    where = hf_identity.run_dir(cfg, multirun, digest, started)
    step = hf_identity.checkpoint_step(cfg, config)
    written = hf_identity.as_written(cfg, step, config)
    checkpoint = gguf.open_checkpoint(cfg.model) if gguf.is_gguf(cfg.model) else None
    if checkpoint is not None:  # what loads it again (the shipped name or the file, and its sha256)
        written["measured"]["gguf"] = {key: value for key, value in checkpoint.record().items() if key != "cache"}
    return Measurement(cfg, folder, digest, where, inputs, step, written, checkpoint)


def plan_measurement(cfg: MeasureConfig, multirun: bool, started: str) -> Measurement:
    job = build_measurement(cfg, multirun, started)
    check_run_dir(job.run_dir, job.digest, key="dir")
    return job


def open_model(job: Measurement, device: torch.device):
    """(the model's folder with its weights, the model loaded for measuring): what a measure run
    reads, and load_run of a finished one."""
    return load_checkpoint(job.cfg.model, job.cfg.revision, job.cfg.dtype, device, job.cfg.init)


def utc_stamp() -> str:
    """The process's start as the default run directories name it (20261202T064301Z)."""
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def start_meta(job: Measurement, device: torch.device, allocator: str) -> dict:
    """meta.json's opening fields (provenance.opening_meta) with what a measure run adds: the model
    (its weights' digests once they are read), the dtype, transformers' version, and the allocator
    (as a training job's, machine/allocator.py: the loss's and the taps' buffers reused)."""
    import transformers  # lazy: transformers is the hf extra (cli.py checks for it first)

    return opening_meta(
        job.digest,
        job.cfg.device,
        device,
        identity={
            "command": "measure",
            "model": {"id": job.cfg.model, "revision": job.cfg.revision, "folder": str(job.folder), "weights": None},
            "dtype": job.cfg.dtype,
        },
        versions_extra={"transformers": transformers.__version__},
        notes={"allocator": allocator},
    )


def measure_into(job: Measurement, run: RunClaim) -> dict:
    """Load, measure and write the run's files, under `run`'s claim (RunClaim: config.yaml and the
    opening meta.json first, DONE last). Returns the summary."""
    began, device = time.perf_counter(), resolve_device(job.cfg.device)
    run.begin(job.written, start_meta(job, device, allocator=keep_freed_memory()))
    folder, model = open_model(job, device)
    if job.cfg.init is not None:  # no weights read: the architecture's own initialisation (measure.initialised)
        run.meta["model"]["weights"] = {"init": f"transformers from_config, torch.manual_seed({job.cfg.init})"}
    elif job.checkpoint is not None:  # the GGUF file's digest: the cache's float32 copy is made from it
        run.meta["model"]["weights"] = {job.checkpoint.facts["file"]: job.checkpoint.facts["sha256"]}
        run.meta["model"]["gguf"] = job.checkpoint.record()
    else:
        run.meta["model"]["weights"] = {path.name: sources.file_digest(path) for path in sources.weight_files(folder)}
    record = Recorder()  # what the report's figures of the model need (hf/record.py)
    metric_rows, loss_rows = measure(model, job.inputs, job.step, job.cfg.chunk, observe=record.observe)
    if job.cfg.perturb:
        metric_rows += perturbation_rows(model, job.inputs.to(device), job.step, job.cfg.chunk)
    result = summary(final_rows(metric_rows, loss_rows), job.step, NextToken.query_types, NextToken.reference)
    if weights_said(job) is not None:
        result["weights"] = weights_said(job)[0]
    rundir_files.write_rows(job.run_dir / rundir_files.METRICS_CSV, METRIC_COLUMNS, metric_rows)
    rundir_files.write_rows(job.run_dir / rundir_files.LOSSES, LOSS_COLUMNS, loss_rows)
    rundir_files.write_arrays(job.run_dir / INPUTS, {"inputs": job.inputs.numpy()})
    record.write(job.run_dir)
    rundir_files.write_json(job.run_dir / rundir_files.SUMMARY, result)
    run.end(time.perf_counter() - began)
    return result


INPUTS = "inputs.npz"  # the measured token ids, (n, seq_len): what `sinkexp measure` read


def run_measurement(job: Measurement, quiet: bool = False) -> bool:
    """Measure one job into its directory unless it is finished; True when it is finished. A stop
    (Ctrl-C, SIGTERM) writes FAILED where this process holds the run, and notes what it left for
    cli.main's line (claim.left_behind: a folder or .lock alone is never "nothing written")."""
    run = RunClaim(job.run_dir, job.digest, fix="dir or name")
    try:
        return claim_and_measure(job, run, quiet)
    except KeyboardInterrupt as err:
        if run.held:
            run.fail(err)
        if not getattr(err, "__notes__", None):
            note(err, left_behind(err, [job.run_dir]))
        raise
    finally:
        run.close()


def claim_and_measure(job: Measurement, run: RunClaim, quiet: bool) -> bool:
    try:  # finished (now or by another process meanwhile), another config's run put there since the plan
        finished = run.take()
    except RunBusy as err:
        print(f"sinkexp: {err}", file=sys.stderr)
        return False
    except RunDirError as err:  # not this run's directory: nothing marked
        print(f"sinkexp: error: {err}", file=sys.stderr)
        return False
    if finished is not None:
        print(f"{job.run_dir}: finished already (DONE); skipped", file=sys.stderr if quiet else sys.stdout)
        return True
    try:
        result = measure_into(job, run)
    except Exception as err:
        preemption.check()  # after Ctrl-C or SIGTERM, an error is that stop's doing (machine/preemption.py)
        run.fail(err)
        why = f"{err.__class__.__name__}: {str(err).splitlines()[0] if str(err) else ''}"
        then = f"; then {resumes([job.run_dir], measured=True)}"
        print(f"sinkexp: error: {job.run_dir}: {why}{then} ({left_behind(err, [job.run_dir])})", file=sys.stderr)
        return False
    if not quiet:
        print(said(format_summary(result).replace("on the held-out batch", "on the measured text"), weights_said(job)))
        print(f"run directory: {job.run_dir}")
    return True


def weights_said(job: Measurement) -> tuple[str, str] | None:
    """(what the measured weights were, the same in short for each verdict line): the architecture at
    random initialisation (init=), or a GGUF checkpoint's quantization; None for float weights as read."""
    if job.cfg.init is not None:
        return (
            f"none trained: the architecture at random initialisation (transformers' own, torch seed {job.cfg.init})",
            f"random initialisation, seed {job.cfg.init}",
        )
    return None if job.checkpoint is None else (job.checkpoint.said(), job.checkpoint.said(short=True))


def said(table: str, weights: tuple[str, str] | None) -> str:
    """The printed table with what its weights were (weights_said) above it, and in short on every verdict line."""
    if weights is None:
        return table
    tag = f" [{weights[1]}]"
    lines = [line + tag if line.startswith(("layer ", "model: ")) else line for line in table.splitlines()]
    return "\n".join([f"weights: {weights[0]}", *lines])


def checkpoint_job(model: str, run_dir: Path, revision: str | None = None, **settings) -> Measurement:
    """The planned measurement of one checkpoint into `run_dir` (its config hash known before it
    runs), for claims on open checkpoints (sinkexp reproduce): `settings` are MeasureConfig's keys
    with Python values (n=8, dtype="bfloat16"), checked as the command line's are
    (settings.measure_config), never turned into text. ConfigError when the model is not on the
    machine (sources.on_disk says so first) or a setting is bad."""
    cfg = measure_config(dict(model=model, dir=str(run_dir), revision=revision or None, **settings))
    return plan_measurement(cfg, multirun=False, started=utc_stamp())


def measure_checkpoint(model: str, run_dir: Path, revision: str | None = None, **settings) -> Path:
    """Measure one checkpoint into `run_dir` (checkpoint_job; nothing to do when a finished run of
    the same settings is there) and return it; read its tables with rundir.reading.RunFiles(run_dir).
    RuntimeError when the measurement failed."""
    job = checkpoint_job(model, run_dir, revision, **settings)
    if not run_measurement(job, quiet=True):
        raise RuntimeError(f"{job.run_dir}: the measurement did not finish (FAILED says why)")
    return job.run_dir
