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

from sinkexp.config.schema import packable_keys, task_of
from sinkexp.config.settings import ReproduceSettings
from sinkexp.evaluate.penalties import PENALTIES
from sinkexp.jobs.launch import launch
from sinkexp.jobs.plan import Plan, plan_sweeps
from sinkexp.machine.devices import device_kind
from sinkexp.reproduce.declare import Experiment, Paper
from sinkexp.reproduce.experiment import Checkpoint
from sinkexp.reproduce.scales import trained_at
from sinkexp.rundir.files import DONE, copy_finished, finished


def packed_keys(exp: Experiment, given: set[str]) -> tuple[str, ...]:
    """The grid keys a job of `exp` can train together (schema.packable_keys), unless the user set
    them; none where a penalty is on (penalties are not per replica)."""
    if any(f"train.{key}" in {**exp.overrides, **exp.grid} for key in PENALTIES):
        return ()
    return tuple(key for key in exp.grid if key in packable_keys(task_of(exp.task)) and key not in given)


def packs_pay(settings: ReproduceSettings) -> bool:
    """Whether reproduce packs its grids by default: on a GPU, where a step over many small models
    costs about what one does. On the CPU it does not pay (docs/performance.md: 0.67-0.72x the
    model-steps/s of one run at a time, measured on reproduce's own grids)."""
    return device_kind(settings.device) == "cuda"


def experiment_overrides(exp: Experiment, folder: Path, settings: ReproduceSettings, pack: bool = False) -> list[str]:
    """One experiment's sweep overrides: the user's win over its own, key by key; with `pack`, the
    grid keys a job can train together go into one `pack=` (the same run directories)."""
    keys = packed_keys(exp, settings.keys) if pack else ()
    # exp.argv writes KEY=VALUE from the paper's own dicts (experiment.py): its key is what precedes `=`
    own = [line for line in exp.argv(settings.scale, keys) if line.partition("=")[0] not in settings.keys]
    return [f"hydra.sweep.dir={folder}", *own, *settings.lines()]


def plan_experiments(
    papers: list[Paper],
    settings: ReproduceSettings,
    root: Path,
    pack: bool = False,
    check_memory: bool = True,
    scale: str | None = None,
) -> dict[tuple[str, str], Plan]:
    """The checked plan of every experiment trained at `scale` (default: the settings' scale;
    scales.trained_at), by (paper, experiment); ConfigError on the first bad job (with `check_memory`
    False, a job too large for its device is planned: --estimate says so)."""
    trained = {paper.name: trained_at(paper, scale or settings.scale) for paper in papers}
    sweeps = {
        (paper.name, exp.name): experiment_overrides(exp, root / paper.name / exp.name, settings, pack)
        for paper in papers
        for exp in paper.experiments
        if not isinstance(exp, Checkpoint) and exp.name in trained[paper.name]
    }
    return dict(zip(sweeps, plan_sweeps(list(sweeps.values()), check_memory)))


@dataclass
class Planned:
    """A command's plans, made once and handed down: every experiment's checked plan by (paper,
    experiment), with the packing decided once; `at_cpu`: the same experiments' plans at scale=cpu,
    whose jobs the cost estimate times for a larger scale's (estimate.py): the plans themselves at
    scale=cpu, and at another scale planned when first asked for (a launcher of the user's never does)."""

    papers: list[Paper]
    settings: ReproduceSettings
    root: Path
    pack: bool
    plans: dict[tuple[str, str], Plan]

    @cached_property
    def at_cpu(self) -> dict[tuple[str, str], Plan]:
        if self.settings.scale == "cpu":
            return self.plans
        at_cpu = self.settings.at_cpu()  # the same experiments, at the CPU sizes
        return plan_experiments(self.papers, at_cpu, self.root, self.pack, scale=self.settings.scale)


def plan_papers(
    papers: list[Paper], settings: ReproduceSettings, root: Path, pack: bool | None = None, check_memory: bool = True
) -> Planned:
    """Every experiment of `papers` planned (plan_experiments), packed where `pack` says (None: where
    packs_pay)."""
    pack = packs_pay(settings) if pack is None else pack
    return Planned(papers, settings, root, pack, plan_experiments(papers, settings, root, pack, check_memory))


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
