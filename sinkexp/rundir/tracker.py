"""Weights & Biases beside TensorBoard: with `wandb=true` (the wandb extra: pip install -e .[wandb])
each run logs what rundir/curves.py gives TensorBoard, the same scalars and images at the same steps,
into a wandb run in <run dir>/wandb/.

    sinkexp train task=trigger wandb=true                  # offline: nothing leaves the machine
    wandb sync outputs/runs/trigger/softmax/L1/*/wandb/offline-run-*    # upload later (after wandb login)
    WANDB_MODE=online sinkexp train wandb=true             # or live, as wandb is configured

- Offline unless WANDB_MODE says otherwise; the project is `sinkexp` unless WANDB_PROJECT says
  otherwise; wandb's console capture is off unless WANDB_CONSOLE says otherwise (the run directory
  keeps train.log); every other wandb setting is wandb's (its environment variables, `wandb login`).
- The run's config (schema.to_dict) is the wandb config; its name is the run directory's last folders
  (trigger/softmax/L1/s0-9fadbe90), its group the sweep's name.
- The run id is the config hash and a digest of the run directory's absolute path (`9fadbe90-3c1d2e`):
  a resume, which trains on in the same directory, continues the same wandb run (resume="allow"),
  while two directories of one config (a single run started twice, the same grid in two sweeps)
  stay two runs, which the hash alone would merge.
- A step is logged once: wandb keeps a run's steps increasing and has no purge like TensorBoard's, so
  a resumed run logs only the steps after the last one an earlier attempt logged
  (<run dir>/wandb/logged_step records it); those in between stay as the attempt logged them, on
  the CPU the values the resumed run computes again (docs/rundir.md).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np

from sinkexp.config.schema import Config, to_dict
from sinkexp.rundir.files import write_text

FOLDER = "wandb"  # wandb.init(dir=<run dir>) writes into <run dir>/wandb/
LOGGED = "logged_step"  # in FOLDER: the last step logged to the run, by any attempt
PROJECT = "sinkexp"
# a wandb setting sinkexp chooses, unless its environment variable chooses otherwise
CHOSEN = {"mode": ("WANDB_MODE", "offline"), "console": ("WANDB_CONSOLE", "off"), "quiet": ("WANDB_QUIET", True)}


def run_id(digest: str, run_dir: Path) -> str:
    """The config hash, and six hex digits of the run directory's absolute path."""
    return f"{digest}-{hashlib.sha256(str(Path(run_dir).resolve()).encode()).hexdigest()[:6]}"


class WandB:
    """One run's wandb run, opened (or resumed) in <run dir>/wandb/; `write` logs a step's scalars and
    images ((H, W) arrays in [0, 1]) once, `close` finishes the run."""

    def __init__(self, run_dir: Path, cfg: Config, digest: str):
        import wandb  # lazy: the wandb extra (0.5 s to import)

        self.wandb, self.folder = wandb, Path(run_dir) / FOLDER
        self.folder.mkdir(parents=True, exist_ok=True)
        logged = self.folder / LOGGED
        self.before = int(logged.read_text()) if logged.exists() else -1  # an earlier attempt's last step
        self.last = self.before
        chosen = {key: value for key, (variable, value) in CHOSEN.items() if variable not in os.environ}
        self.run = wandb.init(
            project=os.environ.get("WANDB_PROJECT", PROJECT),
            id=run_id(digest, run_dir),
            name="/".join(Path(run_dir).resolve().parts[-4:]),
            group=cfg.name,
            dir=str(run_dir),
            config=to_dict(cfg),
            resume="allow",
            reinit="create_new",  # a pack's runs are several wandb runs in one process
            mode=chosen.pop("mode", None),
            settings=wandb.Settings(**chosen),
        )

    def write(self, scalars: dict[str, float], images: dict[str, np.ndarray], step: int) -> None:
        if step <= self.before:  # an earlier attempt logged it
            return
        pictures = {tag: self.wandb.Image((image * 255).round().astype(np.uint8)) for tag, image in images.items()}
        self.run.log({**scalars, **pictures}, step=step)
        if step > self.last:
            self.last = step
            write_text(self.folder / LOGGED, str(step))

    def close(self) -> None:
        self.run.finish()
