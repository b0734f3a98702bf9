"""Planning a paper's experiments, each one sweep into outputs/reproduce/<paper>/<experiment>/.

`plan_papers` checks every job of every experiment (sinkexp/jobs/plan.py: composed and validated
once) before anything trains, so a bad override stops the whole command at once, and hands its
`Planned` down: to the pool (pool.py: reproduce's own, every job of every experiment), to the cost
estimate (estimate.py), and with a launcher the user chose (hydra/launcher=slurm, ...) to
`run_experiment`, which hands each experiment's plan to launch. Runs another experiment has
finished already (the same config and seed) are copied, not trained again. A rerun skips finished
runs and resumes interrupted ones.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from sinkexp.config.settings import ReproduceSettings
from sinkexp.jobs.launch import launch
from sinkexp.jobs.plan import Plan, plan_sweeps
from sinkexp.reproduce.declare import Experiment, Paper
from sinkexp.rundir.files import DONE, copy_finished, finished


def plan_experiments(settings: ReproduceSettings, check_memory: bool = True) -> dict[tuple[str, str], Plan]:
    """The checked plan of every experiment the settings read into a Sweep (reproduce/sweeps.py: those
    trained at its scale), by (paper, experiment); ConfigError on the first bad job (with
    `check_memory` False, a job too large for its device is planned: --estimate says so)."""
    return dict(zip(settings.sweeps, plan_sweeps(list(settings.sweeps.values()), check_memory)))


@dataclass
class Planned:
    """A command's plans, made once and handed down: every experiment's checked plan by (paper,
    experiment), with the settings that decided them (its papers, folder and packing); `at_cpu`: the
    same experiments' plans at scale=cpu, whose jobs the cost estimate times for a larger scale's
    (estimate.py): the plans themselves at scale=cpu, and at another scale planned when first asked
    for (a launcher of the user's never does)."""

    settings: ReproduceSettings
    plans: dict[tuple[str, str], Plan]

    @property
    def root(self) -> Path:
        return self.settings.root

    @cached_property
    def at_cpu(self) -> dict[tuple[str, str], Plan]:
        if self.settings.scale == "cpu":
            return self.plans
        return plan_experiments(self.settings.at_cpu())  # the same experiments, at the CPU sizes


def plan_papers(settings: ReproduceSettings, check_memory: bool = True) -> Planned:
    """Every experiment of the settings' papers planned (plan_experiments)."""
    return Planned(settings, plan_experiments(settings, check_memory))


def planned_dirs(planned: Plan) -> set[Path]:
    """The run directories a plan writes (a claim reads only these)."""
    return {run_dir.resolve() for run_dir, _ in planned.runs}


def finished_runs(root: Path) -> dict[str, Path]:
    """The finished runs anywhere below `root`, by directory name: s<seed>-<config hash> names the
    config and seed, so a name found twice is the same run (the first in sorted order kept)."""
    found: dict[str, Path] = {}
    for done in sorted(root.rglob(DONE)) if root.is_dir() else ():
        if finished(done.parent):
            found.setdefault(done.parent.name, done.parent)
    return found


def copy_finished_runs(run_dirs: set[Path], root: Path) -> None:
    """Into each planned run directory that does not exist yet, copy a finished run of the same
    config from elsewhere below `root` (finished_runs), so that runs one experiment repeats from
    another (barbero2025's 64-token context is guo2024's one-layer backcopy) train once. The copy
    is atomic: a temporary sibling, renamed."""
    finished = finished_runs(root)
    for run_dir in sorted(run_dirs):
        twin = finished.get(run_dir.name)
        if twin is None or run_dir.exists():
            continue
        copy_finished(twin, run_dir)
        print(f"{run_dir}: the same config finished in {twin}; copied, not trained again")


def run_experiment(paper: Paper, exp: Experiment, planned: Plan, root: Path) -> float:
    """Train (or resume, or copy) one experiment's runs; returns its wall time in seconds. A run
    that fails is left to the verdicts (its claims are not run, with the reason), so the others go on."""
    print(f"== {paper.name} / {exp.name}", flush=True)
    started = time.perf_counter()
    copy_finished_runs(planned_dirs(planned), root)
    launch(planned)
    return time.perf_counter() - started
