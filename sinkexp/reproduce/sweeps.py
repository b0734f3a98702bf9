"""reproduce's command step for its experiments: each declared experiment's overrides (a paper
file's, the user's winning key by key) written and read once (commands/overrides.py) into the Sweep
that jobs/plan.py composes, with the packing decided once, into the command's settings.

    settings = decided(["scale=reach"], [PAPERS["gu2025"]])   # reproduce/command.py: with_sweeps(settings, pack)
    settings.sweeps["gu2025", "lm_attention"]        # its Sweep at scale=reach (execute.plan_experiments plans it)

Part of the command layer (docs/glossary.md): reproduce/command.py's `decided` calls it; below it,
nothing reads an override string again.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from sinkexp.commands.overrides import read_sweep
from sinkexp.config.schema import packable_keys, task_of
from sinkexp.config.settings import ReproduceSettings
from sinkexp.config.sweep import Sweep
from sinkexp.evaluate.penalties import PENALTIES
from sinkexp.machine.devices import device_kind
from sinkexp.reproduce.declare import Experiment
from sinkexp.reproduce.experiment import Checkpoint
from sinkexp.reproduce.scales import trained_at


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


def experiment_sweeps(settings: ReproduceSettings, pack: bool, scale: str) -> dict[tuple[str, str], Sweep]:
    """The Sweep of every experiment of the settings' papers trained at `scale` (scales.trained_at),
    by (paper, experiment), at the settings' sizes (a checkpoint is measured, not trained)."""
    trained = {paper.name: trained_at(paper, scale) for paper in settings.papers}
    return {
        (paper.name, exp.name): read_sweep(
            experiment_overrides(exp, settings.root / paper.name / exp.name, settings, pack), multirun=True
        )
        for paper in settings.papers
        for exp in paper.experiments
        if not isinstance(exp, Checkpoint) and exp.name in trained[paper.name]
    }


def with_sweeps(settings: ReproduceSettings, pack: bool | None) -> ReproduceSettings:
    """`settings` with the packing decided (None: where packs_pay) and each experiment of its papers
    read into its Sweep, at its scale, and at scale=cpu for a larger scale's cost estimate."""
    pack = packs_pay(settings) if pack is None else pack
    sweeps = experiment_sweeps(settings, pack, settings.scale)
    at_cpu = None
    if settings.scale != "cpu":  # the same experiments (those trained at the scale), at the CPU sizes
        at_cpu = experiment_sweeps(settings.at_cpu(), pack, settings.scale)
    return replace(settings, pack=pack, sweeps=sweeps, sweeps_at_cpu=at_cpu)
