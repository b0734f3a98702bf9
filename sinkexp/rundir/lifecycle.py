"""The run directory's lifecycle while a run trains (docs/rundir.md is the contract).

- its path: the Hydra patterns in configs/config.yaml name it by the run's identity (config/identity.py:
  the config hash, the process's UTC time, the sweep name), and `job_run_dirs` predicts the directory
  each run of a replica group or pack would get alone;
- what may happen to it (`RunDir.open`): a finished run of the same config is left untouched, a
  checkpoint of the same config is resumed, anything of another config is refused; the lock keeps
  two processes from training it at once.

What every run shares with `sinkexp measure`'s (the claim and its lock, FAILED, DONE last, meta.json
opened and closed) is rundir/claim.py's RunClaim, which RunDir extends with the checkpoint and the
tables. The files themselves (names, atomic writes, the lock) are rundir/files.py's and reading them back
rundir/reading.py's, neither importing torch; a fault on any of them is one line naming the file (rundir/faults.py).
"""

from __future__ import annotations

import io
import logging
import shutil
import warnings
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf

from sinkexp.config.identity import config_hash
from sinkexp.config.schema import Config, to_dict, value_of
from sinkexp.evaluate.tables import LOSS_COLUMNS, METRIC_COLUMNS
from sinkexp.machine import preemption
from sinkexp.machine.devices import device_kind
from sinkexp.rundir.claim import RunClaim
from sinkexp.rundir.faults import run_file_error
from sinkexp.rundir.files import (
    ATTENTION,
    CHECKPOINT,
    LOSSES,
    META,
    METRICS_CSV,
    SUMMARY,
    RunDirError,
    _atomic,
    kept_checkpoint,
    read_json,
    write_arrays,
    write_bytes,
    write_json,
    write_rows,
)
from sinkexp.rundir.provenance import numerics, opening_meta

log = logging.getLogger(__name__)


def job_run_dirs(full: DictConfig, multirun: bool, cfgs: list[Config]) -> list[Path]:
    """The run directory each of a job's runs (schema.run_configs) would get alone: Hydra's
    directory pattern resolved with that run's seed and packed values. `full` is a composed config
    with its hydra node (patterns unresolved)."""
    if len(cfgs) == 1 and cfgs[0].seed == full.seed and not full.get("pack"):  # one run: its own pattern, no copy
        return [Path(pattern_of(full, multirun)).absolute()]
    node = OmegaConf.create(OmegaConf.to_container(full, resolve=False))  # a copy whose values can change
    packed = list(node.get("pack") or {})
    node.pack = None
    dirs = []
    for cfg in cfgs:
        node.seed = cfg.seed
        for key in packed:
            OmegaConf.update(node, key, value_of(cfg, key), merge=False)
        dirs.append(Path(pattern_of(node, multirun)).absolute())
    return dirs


def pattern_of(node: DictConfig, multirun: bool) -> str:
    """Hydra's run directory of a composed config, resolved: hydra.sweep.dir/subdir in a sweep."""
    return f"{node.hydra.sweep.dir}/{node.hydra.sweep.subdir}" if multirun else node.hydra.run.dir


class RunDir(RunClaim):
    """One run's directory and the tables it accumulates. `open()` returns the finished run's summary
    (nothing touched), or takes the directory's lock (RunClaim.take) and returns None, with the
    checkpoint to resume from in `self.state` (None: start fresh). It raises RunDirError for anything
    of another config or a checkpoint that cannot be loaded safely, and RunBusy when another live
    process holds the lock. `notes` (launch.run_job's: threads, argv, allocator, denormals, followed) go into
    meta.json after its own fields and into the log's first lines; the note `argv` is meta.json's
    `argv` (a sweep's job records its own command, not the process's), and a note that names another
    of meta.json's fields is refused (provenance.opening_meta)."""

    def __init__(
        self,
        path: Path,
        cfg: Config,
        hydra_files: dict[str, str] | None = None,
        notes: dict | None = None,
        kind: str | None = None,
    ):
        kind = kind or device_kind(cfg.device)  # cpu | cuda
        super().__init__(path, config_hash(cfg, kind), fix="hydra.run.dir (a sweep: name or hydra.sweep.dir)")
        self.cfg, self.kind = cfg, kind
        self.hydra_files = hydra_files or {}  # .hydra/<name>: text, written when the run starts
        self.notes = notes or {}
        self.state: dict | None = None
        self.metric_rows: list = []
        self.loss_rows: list = []
        self.name = f"s{cfg.seed}"

    def check(self) -> dict | None:
        """RunClaim.check, naming a run of this config trained on the other device kind."""
        try:
            return super().check()
        except RunDirError:
            other = "cpu" if self.kind == "cuda" else "cuda"
            try:
                recorded = read_json(self.path / META).get("config_hash")
            except (OSError, ValueError):  # meta.json itself is what is wrong: the error says so
                recorded = None
            if recorded == config_hash(self.cfg, other):  # this config, other kind
                raise RunDirError(
                    f"{self.path} holds a run of this config trained on {other}, this one trains on "
                    f"{self.kind} (device={self.cfg.device}); runs never change device kind: use "
                    f"device={other}"
                ) from None
            raise

    def open(self) -> dict | None:
        if (finished := self.take()) is not None:
            return finished
        try:
            self.state = self.load_checkpoint(
                fix="move it away and run the same command again to train this run from step 0"
            )
        except BaseException:
            self.close()
            raise
        # The rows up to the checkpoint: opened again, a run forgets what it evaluated since (a pack's divergence).
        state = self.state or {"metric_rows": [], "loss_rows": []}
        self.metric_rows, self.loss_rows = state["metric_rows"], state["loss_rows"]
        return None

    @property
    def resume_step(self) -> int:
        return self.state["trainer"]["step"] if self.state else 0

    def load_checkpoint(self, name: str = CHECKPOINT, fix: str = "") -> dict | None:
        """The checkpoint's state, loaded as tensors and plain data only (weights_only: a crafted
        file cannot run code); None without one. RunDirError (ending with `fix`) for a file that is
        not a checkpoint; an OSError reading it is a file fault (rundir/faults.py)."""
        checkpoint = self.path / name
        if not checkpoint.exists():
            return None
        try:
            with warnings.catch_warnings():  # a raw pickle's protocol warning: the refusal below says it all
                warnings.filterwarnings("ignore", message="Detected pickle protocol", category=UserWarning)
                state = torch.load(checkpoint, map_location="cpu", weights_only=True)
            recorded = state["config_hash"]
        except OSError as err:  # e.g. no read permission: a fault on the run's file, told as a read
            raise run_file_error(err, checkpoint, doing="read") from None
        except Exception as err:  # torch's reason (a truncated zip, an unpickling error)
            text = str(err).strip() or err.__class__.__name__
            refused = text.startswith("Weights only load failed")  # an object other than tensors and plain data
            reason = refusal(text) if refused else text.split(". ")[0].strip(" .")
            what = "holds objects the safe loader refuses (not executed)" if refused else "is corrupt or truncated"
            raise RunDirError(f"{checkpoint} {what}: {reason}" + (f"; {fix}" if fix else "")) from None
        if recorded != self.digest:
            raise RunDirError(
                f"{checkpoint} belongs to another config (hash {recorded}, "
                f"this one {self.digest}); refusing to resume from it"
            )
        return state

    def start(self, device: torch.device, replica: int, replicas: int) -> None:
        """Clear a previous failure and write config.yaml, Hydra's files and the opening meta.json."""
        notes = dict(self.notes)
        argv = notes.pop("argv", None)
        meta = opening_meta(
            self.digest,
            self.cfg.device,
            device,
            identity={"seed": self.cfg.seed},
            device_extra={"precision": numerics()},
            fields={
                "steps_per_s": None,
                "resumed_from_step": self.resume_step if self.state else None,
                "replica": {"index": replica, "of": replicas},
            },
            notes=notes,
            argv=argv,
        )
        for key, value in self.notes.items():
            log.info("%s %s: %s", self.name, key, value)
        files = {f".hydra/{name}": text for name, text in self.hydra_files.items()}
        self.begin(to_dict(self.cfg), meta, files)

    def evaluated(self, rows: list, losses: list, step: int) -> None:
        self.metric_rows.extend(rows)
        self.loss_rows.extend(losses)
        write_rows(self.path / METRICS_CSV, METRIC_COLUMNS, self.metric_rows)
        write_rows(self.path / LOSSES, LOSS_COLUMNS, self.loss_rows)
        now = {split: loss for s, split, loss in losses if split.startswith("eval/")}
        log.info("%s step %d eval %s", self.name, step, " ".join(f"{k}={v:.4g}" for k, v in now.items()))

    def logged(self, step: int, loss: float) -> None:
        self.loss_rows.append((step, "train", loss))
        log.info("%s step %d train loss %.5g", self.name, step, loss)

    def checkpoint(self, trainer_state: dict, keep: bool = True) -> None:
        """Write checkpoint.pt (and, with train.keep_checkpoints and `keep`, its copy for load_run)."""
        # The tables so far travel with the checkpoint, so a resumed run continues them exactly.
        state = {
            "config_hash": self.digest,
            "trainer": trainer_state,
            "torch_rng": torch.get_rng_state(),
            "metric_rows": self.metric_rows,
            "loss_rows": self.loss_rows,
        }
        buffer = io.BytesIO()  # serialised in memory: a full disk is then an OSError with its errno
        torch.save(state, buffer)
        write_bytes(self.path / CHECKPOINT, buffer.getvalue())
        if keep and self.cfg.train.keep_checkpoints:  # a copy of the file just written, not a second serialisation
            _atomic(
                self.path / kept_checkpoint(trainer_state["step"]),
                lambda tmp: shutil.copyfile(self.path / CHECKPOINT, tmp),
            )

    def finish(self, summary: dict, attention: dict, wall_time_s: float, steps_per_s: float) -> None:
        """Write the summary, the attention maps and the closing meta.json, then DONE, once the
        tables are complete: every one ends at train.steps."""
        preemption.check(summary["step"])  # a stop whose exception was lost ends here, not in DONE
        ends = {
            METRICS_CSV: max(row[0] for row in self.metric_rows),
            LOSSES: max(row[0] for row in self.loss_rows),
            SUMMARY: summary["step"],
        }
        if any(end != self.cfg.train.steps for end in ends.values()):
            raise RunDirError(
                f"{self.path}: tables end at steps {ends}, not train.steps={self.cfg.train.steps}; DONE not written"
            )
        write_arrays(self.path / ATTENTION, attention)
        write_json(self.path / SUMMARY, summary)
        self.end(wall_time_s, steps_per_s=round(steps_per_s, 2))


def refusal(text: str) -> str:
    """torch's reason for refusing a checkpoint's objects, its first sentence, without the boilerplate
    around it: what follows "WeightsUnpickler error:", or else the paragraph after the first."""
    marker = "WeightsUnpickler error:"
    if marker in text:
        reason = text.partition(marker)[2].strip().split("\n\n")[0]
    else:
        paragraphs = [p.strip() for p in text.split("\n\n") if p.strip()]
        reason = next((p for p in paragraphs[1:] if not p.startswith("Check the documentation")), paragraphs[0])
    return " ".join(reason.split()).split(". ")[0].strip(" .")
