"""Running a paper's experiments: each one sweep into outputs/reproduce/<paper>/<experiment>/.

`plan_experiments` checks every job of every experiment (launch.plan: composed and preflighted
once) before anything trains, so a bad override stops the whole command at once; `run_experiment`
then hands an experiment's plan to launch. A rerun skips finished runs and resumes interrupted
ones, and any Hydra launcher works (parallel by default when installed).
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import time
from pathlib import Path

from sinkexp.launch import Plan, compose_config, launch, plan
from sinkexp.reproduce.declare import Experiment, Paper
from sinkexp.runfiles import DONE


def launcher(overrides: list[str]) -> list[str]:
    """hydra/launcher=parallel unless the user chose one (or the joblib plugin is not installed)."""
    if any(o.startswith("hydra/launcher=") for o in overrides):
        return []
    if importlib.util.find_spec("hydra_plugins.hydra_joblib_launcher") is None:
        print("sinkexp reproduce: hydra-joblib-launcher is not installed: the runs go one at a time "
              "(pip install -e '.[parallel]')", file=sys.stderr)
        return []
    return ["hydra/launcher=parallel"]


def scale_of(overrides: list[str]) -> str:
    """The `scale` the user chose (cpu by default): it picks the experiments' sizes too."""
    chosen = [o.split("=", 1)[1] for o in overrides if o.split("=", 1)[0] == "scale"]
    return chosen[-1] if chosen else "cpu"


def packed_keys(exp: Experiment, given: set[str]) -> tuple[str, ...]:
    """The grid keys a job of `exp` can train together (config.packable_keys), unless the user set
    them; none where a penalty is on (penalties are not per replica)."""
    from sinkexp.config import packable_keys
    from sinkexp.penalties import PENALTIES

    if any(f"train.{key}" in {**exp.overrides, **exp.grid} for key in PENALTIES):
        return ()
    task = compose_config(f"task={exp.task}").task.name     # the group (damping_dynamics) names a task (damping)
    return tuple(key for key in exp.grid if key in packable_keys(task) and key not in given)


def packs_pay(overrides: list[str]) -> bool:
    """Whether reproduce packs its grids by default: on a GPU, where a step over many small models
    costs about what one does. On the CPU it does not pay (docs/performance.md: 0.91-1.02x the
    model-steps/s of one run at a time, measured on reproduce's own grids)."""
    from sinkexp.runner import resolve_device

    chosen = [o.split("=", 1)[1] for o in overrides if o.split("=", 1)[0] == "device"]
    return resolve_device(chosen[-1] if chosen else "auto").type == "cuda"


def experiment_overrides(exp: Experiment, folder: Path, overrides: list[str], pack: bool = False) -> list[str]:
    """One experiment's sweep overrides: the user's win over its own, key by key; with `pack`, the
    grid keys a job can train together go into one `pack=` (the same run directories)."""
    given = {o.split("=", 1)[0] for o in overrides}
    keys = packed_keys(exp, given) if pack else ()
    own = [o for o in exp.argv(scale_of(overrides), keys) if o.split("=", 1)[0] not in given]
    return [*launcher(overrides), f"hydra.sweep.dir={folder}", *own, *overrides]


def plan_experiments(papers: list[Paper], overrides: list[str], root: Path,
                     pack: bool = False) -> dict[tuple[str, str], Plan]:
    """Every experiment's checked plan, by (paper, experiment); ConfigError on the first bad job."""
    return {(paper.name, exp.name): plan(experiment_overrides(exp, root / paper.name / exp.name, overrides, pack),
                                         multirun=True)
            for paper in papers for exp in paper.experiments}


def planned_dirs(planned: Plan) -> set[Path]:
    """The run directories a plan writes (a claim reads only these)."""
    return {run_dir.resolve() for run_dir, _ in planned.runs}


def copy_finished_twins(run_dirs: set[Path], root: Path) -> None:
    """Into each planned run directory that does not exist yet, copy a finished run of the same
    config from elsewhere below `root` (the name s<seed>-<config hash> says so), so that runs one
    experiment repeats from another (barbero2025's 64-token context is guo2024's one-layer
    backcopy) train once. The copy is atomic: a temporary sibling, renamed."""
    finished = {}
    for done in sorted(root.rglob(DONE)):
        finished.setdefault(done.parent.name, done.parent)
    for run_dir in sorted(run_dirs):
        twin = finished.get(run_dir.name)
        if twin is None or run_dir.exists():
            continue
        partial = run_dir.with_name(f".{run_dir.name}.copying")
        shutil.rmtree(partial, ignore_errors=True)             # left by a killed copy
        shutil.copytree(twin, partial, ignore=shutil.ignore_patterns(".lock"))
        os.replace(partial, run_dir)
        print(f"{run_dir}: the same config finished in {twin}; copied, not trained again")


def run_experiment(paper: Paper, exp: Experiment, planned: Plan, root: Path) -> float:
    """Train (or resume, or copy) one experiment's runs; returns its wall time in seconds. A run
    that fails is left to the verdicts (its claims FAIL with the reason), so the others go on."""
    print(f"== {paper.name} / {exp.name}", flush=True)
    started = time.perf_counter()
    copy_finished_twins(planned_dirs(planned), root)
    launch(planned)
    return time.perf_counter() - started
