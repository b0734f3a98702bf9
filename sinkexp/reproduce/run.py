"""`reproduce()`: every experiment of some papers planned, run (or resumed) and judged, and the
claims table written; `estimate_papers` plans them for `--estimate`'s cost estimate. Each plans
once (execute.plan_papers) and hands the plan down. The command line is command.py's."""

from __future__ import annotations

import time

import pandas as pd

from sinkexp.config.settings import ReproduceSettings
from sinkexp.errors import ConfigError
from sinkexp.machine import preemption
from sinkexp.reproduce.checkpoints import measure_checkpoints, planned_runs
from sinkexp.reproduce.scales import judged_at, trained_at
from sinkexp.reproduce.verdicts import check_claims
from sinkexp.reproduce.write import figures, passing, table_text, write_claims_report, write_findings


def reproduce(settings: ReproduceSettings, command: str = "") -> pd.DataFrame:
    """Run (or resume) every experiment of the settings' papers, check their claims, write claims.csv,
    REPORT.md and figures into its root folder (one paper: root/<paper>/), print the table; returns
    the claims table. Every job is checked before the first one trains (ConfigError on the first bad
    one); the settings say whether each job trains its seeds and values together (`pack`). Checkpoints
    are measured where their weights are here (checkpoints.py; `weights`: a folder of them). With a
    `docs` folder, the findings tables also go into the marked parts of its findings pages (write_findings)."""
    # lazy: estimate, execute and pool pull in torch (~2.4 s); --list, --docs and declaration errors answer without it
    from sinkexp.reproduce.estimate import estimate
    from sinkexp.reproduce.execute import plan_papers, planned_dirs, run_experiment
    from sinkexp.reproduce.pool import run_pool

    preemption.stop_on_signals()  # torch is loaded: a signal now raises, for the pool's and the runs' boundaries
    papers, root = list(settings.papers), settings.root
    if not any(judged_at(paper, settings.scale) or trained_at(paper, settings.scale) for paper in papers):
        # nothing to do: e.g. scale=pretrained for papers without a checkpoint
        names = ", ".join(paper.name for paper in papers)
        raise ConfigError(f"scale={settings.scale}: {names} judge no claim at this scale")
    planned = plan_papers(settings)  # planned once: the pool, the estimate and the claims read it
    plans = planned.plans
    claimed = {(paper.name, exp.name): set() for paper in papers for exp in paper.experiments}  # not trained: none
    claimed.update({key: planned_dirs(plan) for key, plan in plans.items()})  # claims read only these runs
    started, seconds, reports, results = time.perf_counter(), {}, {}, []
    if plans and settings.launcher:  # the user's launcher (slurm, ...): one sweep per experiment
        for paper in papers:
            for exp in paper.experiments:
                if (paper.name, exp.name) in plans:  # a checkpoint is measured, not trained
                    seconds[paper.name, exp.name] = run_experiment(paper, exp, plans[paper.name, exp.name], root)
    elif plans:  # every job through one pool, one progress line (none: checkpoints only, nothing to train)
        predicted = estimate(planned)
        seconds = run_pool(plans, settings, predicted[1]["job_seconds"])  # for the time left
    missing = measure_checkpoints(papers, root, settings.weights, settings.scale)
    for paper in papers:
        for name, path in figures(paper, root).items():
            reports[paper.name, name] = path
        claimed.update(planned_runs(paper, root))
        judged = judged_at(paper, settings.scale)  # at reach: the claims whose experiments have a reach size
        results += [result.row(paper) for result in check_claims(paper, root, claimed, missing)]
        results = [row for row in results if row["paper"] != paper.name or row["claim"] in judged]
    rows = pd.DataFrame(results)
    rows.insert(2, "scale", settings.scale)
    out = root / papers[0].name if len(papers) == 1 else root
    if settings.scale != "cpu":  # another scale's verdicts beside the CPU sizes', not over them
        out = out / settings.scale
    report = write_claims_report(papers, rows, out, root, command, seconds, reports)
    write_findings(papers, root, settings.docs)
    print(table_text(rows))
    print(f"{passing(rows)}; wall time {time.perf_counter() - started:.0f} s; report: {report}")
    return rows


def estimate_papers(settings: ReproduceSettings, recalibrate: bool = False) -> tuple[pd.DataFrame, dict]:
    """`--estimate`: every experiment of the settings' papers planned, and the jobs' predicted cost
    (estimate.py); nothing trains."""
    # lazy: estimate and execute pull in torch (~2.4 s); `--list` answers without it
    from sinkexp.reproduce.estimate import estimate
    from sinkexp.reproduce.execute import plan_papers

    preemption.stop_on_signals()  # torch is loaded: a signal now raises (the calibration times real jobs)
    # check_memory False: a job too large for its device is planned, and the estimate says it does not fit
    return estimate(plan_papers(settings, check_memory=False), recalibrate)


def exit_code(rows: pd.DataFrame) -> int:
    """0 when every claim holds, was not reached at the size run, or was not run for want of a
    checkpoint's weights (the runs found nothing wrong); 1 when a claim was contradicted, could not
    fail (a criterion that tests nothing is a defect of its declaration) or was not run for another
    reason (docs/reproduce.md, "The verdict")."""
    weights = rows["why"].fillna("").str.startswith("needs ")  # a checkpoint whose weights are not here
    return 0 if (rows["verdict"].isin(("holds", "not reached")) | weights).all() else 1
