"""Claims on named open checkpoints: each paper's `Checkpoint` experiments, measured with `sinkexp
measure` (sinkexp/hf/) where the weights are on this machine, and the reason a claim was not run
where they are not. Nothing is downloaded: a checkpoint is on this machine when the Hugging Face
cache holds it, or when `weights=DIR` holds it as DIR/<hub id> (e.g. DIR/openai-community/gpt2-xl,
a folder with config.json, weights and tokenizer; a revision as DIR/<hub id>@<revision>).

    missing = measure_checkpoints(papers, root, weights=Path("/models"))   # {(paper, experiment): why not}

Each is measured into <root>/<paper>/<experiment>/trained/, and its untrained revision, where the
model publishes one (Pythia's step0), into .../untrained/: a claim's value untrained, so that one
that holds untrained too cannot fail (verdicts.py).
"""

from __future__ import annotations

from pathlib import Path

from sinkexp.errors import ConfigError
from sinkexp.hf import require_transformers
from sinkexp.reproduce.declare import Paper
from sinkexp.reproduce.experiment import Checkpoint
from sinkexp.rundir.files import finished

TRAINED, UNTRAINED = "trained", "untrained"


def checkpoints(paper: Paper) -> list[Checkpoint]:
    return [exp for exp in paper.experiments if isinstance(exp, Checkpoint)]


def needs(exp: Checkpoint) -> str:
    """The verdict's reason where the weights are absent."""
    revision = f" at revision {exp.revision}" if exp.revision else ""
    return (
        f"needs the weights of {exp.model}{revision} on this machine (the Hugging Face cache, or "
        f"`sinkexp reproduce PAPER weights=DIR` with DIR/{exp.model})"
    )


def source(exp: Checkpoint, weights: Path | None, revision: str | None) -> str | None:
    """Where the checkpoint is on this machine (a folder, or the hub id the cache holds); None: not here."""
    from sinkexp.hf.sources import on_disk  # lazy: hf/sources.py pulls in torch (~2.4 s); this module is torch-free

    folder = weights / f"{exp.model}{'@' + revision if revision else ''}" if weights is not None else None
    if folder is not None and on_disk(str(folder)):
        return str(folder)
    return exp.model if on_disk(exp.model, revision) else None


def measure_checkpoints(papers: list[Paper], root: Path, weights: Path | None = None) -> dict[tuple[str, str], str]:
    """Measure every checkpoint of `papers` that is on this machine (a finished measurement is kept);
    returns, for each that is not, why its claims are not run."""
    missing, extra = {}, ""
    try:
        require_transformers()
    except ConfigError:
        extra = "the hf extra (pip install -e .[hf]) and "
    for paper in papers:
        for exp in checkpoints(paper):
            if extra:
                missing[paper.name, exp.name] = needs(exp).replace("needs the weights", f"needs {extra}the weights")
                continue
            folder = root / paper.name / exp.name
            if finished(folder / TRAINED):
                continue
            where = source(exp, weights, exp.revision)
            if where is None:
                missing[paper.name, exp.name] = needs(exp)
                continue
            from sinkexp.hf.runner import measure_checkpoint  # lazy: torch (~2.4 s) and the hf extra

            print(f"== {paper.name} / {exp.name}: sinkexp measure {where}", flush=True)
            measure_checkpoint(
                where, folder / TRAINED, revision=None if Path(where).exists() else exp.revision, **exp.settings
            )
            untrained = exp.untrained and source(exp, weights, exp.untrained)
            if untrained:
                measure_checkpoint(
                    untrained,
                    folder / UNTRAINED,
                    revision=None if Path(untrained).exists() else exp.untrained,
                    **exp.settings,
                )
    return missing


def planned_runs(paper: Paper, root: Path) -> dict[tuple[str, str], set[Path]]:
    """The run each checkpoint experiment's claims read (its trained measurement)."""
    return {(paper.name, exp.name): {(root / paper.name / exp.name / TRAINED).resolve()} for exp in checkpoints(paper)}
