"""A finished run as a claim sees it (FinishedRun): its settings, final values and files, the same run
untrained (its step-0 evaluation and its model rebuilt from the seed), and the run at any evaluated
step (its values there only). A value a run does not have raises MissingValue: the claim is then
**not run**, with that problem as its why, never judged on a NaN that would read as a scientific result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from sinkexp.reproduce.experiment import TRAINED, UNTRAINED
from sinkexp.rundir.files import ATTENTION, finished
from sinkexp.rundir.reading import RunFiles, collect, final_values, setting


class MissingValue(LookupError):
    """The run has no such value; the message says which."""


@dataclass
class FinishedRun:
    """One finished run as a claim sees it: its settings (dotted keys), final values and files."""

    path: Path
    settings: dict
    finals: pd.DataFrame  # final values: layer, query_type, metric, value (mean over heads)
    experiment: str = ""  # the experiment (folder below the paper) the run belongs to
    analyses: dict = field(default_factory=dict, repr=False)  # (analysis, args) -> its result
    untrained: bool = False  # this view is the run at step 0 (its `initial`)
    at_step: int | None = None  # this view is the run as it stood at an earlier evaluated step (`at`)

    @property
    def label(self) -> str:
        """s<seed>/t<structure seed>: the draw, which pairs and groups runs across settings; a measured
        checkpoint's: its draw's folder (<text>@<skip>, experiment.Checkpoint.measured), or "run"."""
        if self.settings.get("command") == "measure":
            return self.path.name if self.path.parent.name in (TRAINED, UNTRAINED) else "run"
        draw = (f"{'s' if key == 'seed' else 't'}{self.settings[key]}" for key in DRAW_KEYS if key in self.settings)
        return "/".join(draw) or "run"

    def setting(self, key: str):
        return setting(self.settings, key)

    @cached_property
    def files(self) -> RunFiles:
        return RunFiles(self.path)

    @property
    def metrics(self) -> pd.DataFrame:
        """Every evaluated step, per head (metrics.csv, read once); untrained, step 0; at an earlier
        step, the steps up to it."""
        m = self.files.metrics
        if self.untrained:
            return m[m["step"] == 0]
        return m if self.at_step is None else m[m["step"] <= self.at_step]

    def steps(self) -> list[int]:
        """The evaluated steps, in order (none where the run has no metrics table)."""
        m = self.files.metrics
        return [] if m is None else sorted(set(m["step"]))

    def at(self, step: int) -> "FinishedRun":
        """The run as it stood at an evaluated step: its values there and its curves up to it; no
        attention maps and no model (a measure that needs them raises MissingValue)."""
        m, losses = self.files.metrics, self.files.losses
        finals = final_values(m[m["step"] == step], losses[losses["step"] == step])
        return FinishedRun(self.path, self.settings, finals, self.experiment, at_step=step)

    @cached_property
    def initial(self) -> "FinishedRun":
        """The same run untrained: its step-0 evaluation (every run writes one) and its model
        rebuilt from the seed, for measuring whether a claim's criterion could have failed."""
        if self.settings.get("command") == "measure":  # a checkpoint: its untrained revision, if measured
            return self.untrained_checkpoint()
        m, losses = self.files.metrics, self.files.losses
        if m is None or losses is None or not (m["step"] == 0).any():
            raise MissingValue(f"{self.label} has no step-0 evaluation in its tables")
        start = final_values(m[m["step"] == 0], losses[losses["step"] == 0])
        return FinishedRun(self.path, self.settings, start, self.experiment, untrained=True)

    def untrained_checkpoint(self) -> "FinishedRun":
        """The measured untrained model beside a checkpoint's run (reproduce/checkpoints.py): its
        untrained revision, or its architecture at random initialisation, for the same draw."""
        draw = self.path.parent.name == TRAINED  # <checkpoint>/trained/<draw>: <checkpoint>/untrained/<draw>
        folder = self.path.parent.parent / UNTRAINED / self.path.name if draw else self.path.parent / UNTRAINED
        if not finished(folder):
            raise MissingValue(f"no untrained revision of {self.settings.get('model')} was measured")
        table, finals = collect(folder)
        return FinishedRun(folder, table.iloc[0].to_dict(), finals, self.experiment)  # its own run, read as it is

    def attention(self) -> dict:
        """The attention maps averaged over the held-out batch, per layer ({"layer0": (H, T, T)}):
        attention.npz for the trained run, computed from the rebuilt model for its step 0."""
        self.whole("attention maps")
        if self.untrained:
            # lazy: pulls in torch (~2.4 s); --list and the declarations load measures.py without it
            from sinkexp.evaluate.evaluator import mean_attention

            return mean_attention(self.loaded.model, self.loaded.batch)
        with np.load(self.path / ATTENTION) as maps:
            return {name: maps[name] for name in maps.files}

    @cached_property
    def provenance(self) -> dict[str, str]:
        """What produced the run (meta.json): its commit (+dirty), sinkexp and torch, device, threads."""
        meta = self.files.meta or {}
        git, versions, device = meta.get("git") or {}, meta.get("versions") or {}, meta.get("device") or {}
        commit = (git.get("commit") or "unknown")[:7] + ("+dirty" if git.get("dirty") else "")
        return {
            "commits": commit,
            "versions": f"sinkexp {versions.get('sinkexp')}, torch {versions.get('torch')}",
            "devices": str(device.get("name") or device.get("resolved")),
            "threads": str(device.get("torch_threads")),
        }

    def whole(self, what: str) -> None:
        """MissingValue where this view is an earlier step's, which keeps its tables' values only."""
        if self.at_step is not None:
            raise MissingValue(f"{self.label} keeps no {what} at step {self.at_step}")

    @cached_property
    def loaded(self):  # the trained model and held-out batch (sinkexp.analysis.load.load_run)
        # lazy: pulls in torch (~2.4 s); --list and the declarations load measures.py without it
        from sinkexp.analysis.load import load_run

        self.whole("model")
        return load_run(self.path, step=0 if self.untrained else None)

    def analysis(self, fn: Callable, *args):
        """fn(the loaded run, *args), a sinkexp.analysis.interventions analysis, computed once per run and
        args (several claims read one analysis)."""
        key = (fn.__name__, args)
        if key not in self.analyses:
            self.analyses[key] = fn(self.loaded, *args)
            if self.settings.get("command") == "measure":  # a real LM (0.5-1 GB): loaded again if asked again,
                self.__dict__.pop("loaded", None)  # not held for every run a paper's claims read
        return self.analyses[key]

    def final(self, metric: str, layer: int = -1, query_type: str = "all") -> float:
        rows = self.finals[
            (self.finals["metric"] == metric)
            & (self.finals["layer"] == layer)
            & (self.finals["query_type"] == query_type)
        ]
        if not len(rows):
            raise MissingValue(f"{self.label} has no final {metric}[layer {layer}, {query_type}]")
        return float(rows["value"].iloc[0])


DRAW_KEYS = ("seed", "task.structure_seed")  # a paired claim pairs runs that share these
