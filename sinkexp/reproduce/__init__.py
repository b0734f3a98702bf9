"""`sinkexp reproduce PAPER|all|--list [KEY=VALUE ...]`: run a paper's experiments, check its claims.

A paper is one file in sinkexp/reproduce/papers/ holding a `Paper`: its experiments (fixed
overrides plus a swept grid, the seeds and structure seeds included) and its claims (the statement,
the source's figure and where it is, the measure, the criterion). Each experiment is one
`sinkexp train -m` multirun into outputs/reproduce/<paper>/<experiment>/, so a rerun skips finished
runs and resumes interrupted ones, and any Hydra launcher works (parallel by default when installed).

A claim is checked on every run it selects (every seed and structure draw), never on their mean
alone: it PASSes only when every run meets the criterion and no selected run failed. docs/reproduce.md
describes the files written (claims.csv, REPORT.md, figures).
"""
from __future__ import annotations

import contextlib
import importlib.util
import io
import math
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Callable

import pandas as pd

OUTPUT_ROOT = Path("outputs/reproduce")
PAIR_KEYS = ("seed", "task.structure_seed")   # a comparison pairs runs that share these


@dataclass(frozen=True)
class Experiment:
    name: str                        # its folder under outputs/reproduce/<paper>/
    overrides: tuple[str, ...]       # fixed overrides, e.g. ("task=damping",)
    grid: dict[str, str]             # swept keys -> Hydra sweep values, e.g. {"seed": "0,1,2"}
    cpu: tuple[str, ...] = ()        # sizes for the CPU (dropped with scale=paper: the source's sizes)


@dataclass
class Run:
    """One finished run as a measure sees it: its settings (dotted keys) and its tables."""
    path: Path
    settings: dict
    finals: pd.DataFrame             # final values: layer, query_type, metric, value (mean over heads)
    analyses: dict = field(default_factory=dict, repr=False)     # (analysis, args) -> its result
    experiment: str = ""             # the experiment (folder below the paper) the run belongs to

    @cached_property
    def metrics(self) -> pd.DataFrame:   # every evaluated step, per head (metrics.csv)
        return pd.read_csv(self.path / "metrics.csv")

    @cached_property
    def loaded(self):                    # the trained model and held-out batch (sinkexp.load.load_run)
        from sinkexp.load import load_run
        return load_run(self.path)

    def analysis(self, fn: Callable, *args):
        """fn(the loaded run, *args), a sinkexp.interventions analysis, computed once per run and args
        (several claims read one analysis)."""
        key = (fn.__name__, args)
        if key not in self.analyses:
            self.analyses[key] = fn(self.loaded, *args)
        return self.analyses[key]

    def final(self, metric: str, layer: int = -1, query_type: str = "all") -> float:
        rows = self.finals[(self.finals["metric"] == metric) & (self.finals["layer"] == layer)
                           & (self.finals["query_type"] == query_type)]
        return float(rows["value"].iloc[0]) if len(rows) else math.nan


@dataclass(frozen=True)
class Measure:
    """What a claim measures on one run: a description (printed with the claim) and the function."""
    describe: str
    of: Callable[[Run], float]


def final(metric: str, layer: int | str = 0, query_type: str = "all") -> Measure:
    """A final value (mean over heads); layer "max" / "min": the extreme over the model's layers."""
    if isinstance(layer, int):
        return Measure(f"{metric}[layer {layer}, {query_type}]", lambda run: run.final(metric, layer, query_type))
    pick = {"max": max, "min": min}[layer]

    def extreme(run: Run) -> float:
        layers = sorted(set(run.finals["layer"]) - {-1})
        return pick(run.final(metric, lay, query_type) for lay in layers)
    return Measure(f"{layer} over layers of {metric}[{query_type}]", extreme)


def head_extreme(metric: str, layer: int, query_type: str = "all", how: str = "max") -> Measure:
    """The extreme over one layer's heads of a final per-head value (metrics.csv, last step)."""
    def extreme(run: Run) -> float:
        m = run.metrics
        rows = m[(m["step"] == m["step"].max()) & (m["metric"] == metric) & (m["layer"] == layer)
                 & (m["query_type"] == query_type) & (m["head"] >= 0)]
        return float(rows["value"].agg(how)) if len(rows) else math.nan
    return Measure(f"{how} over heads of {metric}[layer {layer}, {query_type}]", extreme)


def loss_ratio(query_type: str) -> Measure:
    """Final eval loss over the reference predictor's (the task's baseline): <= 0.1 is 'solved'."""
    return Measure(f"loss / reference loss [{query_type}]",
                   lambda run: run.final("loss_eval", -1, query_type) / run.final("loss_baseline", -1, query_type))


def intervention(name: str, layer: int, query_type: str = "all") -> Measure:
    """Loss with one causal intervention on `layer` over the unchanged model's loss (1: no effect)."""
    def ratio(run: Run) -> float:
        from sinkexp.interventions import run_interventions
        table = run.analysis(run_interventions, layer).set_index(["intervention", "query_type"])["loss"]
        return float(table[(name, query_type)] / table[("none", query_type)])
    return Measure(f"loss with {name}[layer {layer}] / loss [{query_type}]", ratio)


def payload_transfer(key: str, layer: int) -> Measure:
    """Broadcast: `cosine` or `common_energy` of the output change with the donor's sink value at
    the sink of `layer` (sinkexp.interventions.payload_transfer)."""
    def value(run: Run) -> float:
        from sinkexp.interventions import payload_transfer as transfer
        return run.analysis(transfer, layer)[key]
    return Measure(f"donor sink value [layer {layer}]: {key} of the change", value)


def bos_removed(key: str) -> Measure:
    """`first_attn` or `loss` with BOS removed at inference over its value with BOS
    (sinkexp.interventions.without_bos)."""
    def ratio(run: Run) -> float:
        from sinkexp.interventions import without_bos
        values = run.analysis(without_bos)
        return values[f"{key}_no_bos"] / values[f"{key}_bos"]
    return Measure(f"{key} without BOS / with BOS (at inference)", ratio)


def excess_loss(query_type: str) -> Measure:
    return Measure(f"loss - oracle loss [{query_type}]",
                   lambda run: run.final("loss_eval", -1, query_type) - run.final("loss_baseline", -1, query_type))


@dataclass(frozen=True)
class Criterion:
    low: float = -math.inf
    high: float = math.inf

    def holds(self, value: float) -> bool:
        return self.low <= value <= self.high      # NaN fails

    def __str__(self) -> str:
        if math.isinf(self.high):
            return f">= {self.low:g}"
        if math.isinf(self.low):
            return f"<= {self.high:g}"
        return f"in [{self.low:g}, {self.high:g}]"


def at_least(x: float) -> Criterion:
    return Criterion(low=x)


def at_most(x: float) -> Criterion:
    return Criterion(high=x)


def between(low: float, high: float) -> Criterion:
    return Criterion(low, high)


@dataclass(frozen=True)
class Claim:
    name: str                        # short id, unique within the paper
    statement: str                   # what the paper says, in one sentence
    source: str                      # where: theorem, figure, table or notebook
    paper_value: str                 # the source's figure, as the source states it
    experiment: str | tuple[str, ...]
    where: dict                      # settings the runs must have, e.g. {"attn.name": "softmax"}
    measure: Measure
    criterion: Criterion
    against: dict | None = None      # paired claim: measure(where) - measure(against), run for run
    against_in: str | None = None    # the experiment the `against` runs come from (default: the same)
    compare: str = "difference"      # paired value: "difference" or "ratio" (measure(where) / measure(against))
    note: str = ""                   # what the claim is, where it is not the paper's own
    trend: str | None = None         # a key: per draw, the Spearman rho of the measure against its value

    @property
    def own_experiments(self) -> tuple[str, ...]:
        """The experiments `where` selects from (`experiment` may name several, e.g. one per context length)."""
        return (self.experiment,) if isinstance(self.experiment, str) else tuple(self.experiment)

    @property
    def experiments(self) -> tuple[str, ...]:
        """Every experiment the claim reads: its own and `against_in`."""
        own = self.own_experiments
        return own + ((self.against_in,) if self.against_in and self.against_in not in own else ())

    def describe(self) -> str:
        if self.trend:
            return f"Spearman rho of {self.measure.describe} against {self.trend}"
        return self.measure.describe + (f" (paired {self.compare} against {self.against})" if self.against else "")


@dataclass(frozen=True)
class Paper:
    name: str
    title: str
    experiments: tuple[Experiment, ...]
    claims: tuple[Claim, ...]

    def experiment(self, name: str) -> Experiment:
        return next(e for e in self.experiments if e.name == name)


# --- running -----------------------------------------------------------------------------------

def launcher(overrides: list[str]) -> list[str]:
    """hydra/launcher=parallel unless the user chose one (or the joblib plugin is not installed)."""
    if any(o.startswith("hydra/launcher=") for o in overrides):
        return []
    if importlib.util.find_spec("hydra_plugins.hydra_joblib_launcher") is None:
        print("sinkexp reproduce: hydra-joblib-launcher is not installed: the runs go one at a time "
              "(pip install -e '.[parallel]')", file=sys.stderr)
        return []
    return ["hydra/launcher=parallel"]


def experiment_argv(exp: Experiment, folder: Path, overrides: list[str]) -> list[str]:
    """`sinkexp train` arguments for one experiment: the user's overrides win over its own."""
    paper_scale = "scale=paper" in overrides
    own = [*exp.overrides, *(() if paper_scale else exp.cpu), *(f"{k}={v}" for k, v in exp.grid.items())]
    given = {o.split("=", 1)[0] for o in overrides}
    own = [o for o in own if o.split("=", 1)[0] not in given]
    return ["-m", *launcher(overrides), f"hydra.sweep.dir={folder}", *own, *overrides]


def check(papers: list[Paper], overrides: list[str], root: Path) -> dict[tuple[str, str], set[Path]]:
    """Every experiment's every job checked before anything runs (ConfigError on the first problem);
    returns the run directories each (paper, experiment) plans, so that its claims read those only
    (a folder may also hold runs of an earlier declaration, e.g. other steps)."""
    from sinkexp.config import register_schema
    from sinkexp.preflight import preflight
    from sinkexp.rundir import register_resolvers

    register_schema()
    register_resolvers()
    planned = {}
    for paper in papers:
        for exp in paper.experiments:
            argv = experiment_argv(exp, root / paper.name / exp.name, overrides)
            jobs = preflight([a for a in argv if a != "-m"], multirun=True)
            planned[paper.name, exp.name] = {run_dir.resolve() for run_dir, _ in jobs}
    return planned


def copy_finished_twins(run_dirs: set[Path], root: Path) -> None:
    """Into each planned run directory that does not exist yet, copy a finished run of the same
    config from elsewhere below `root` (the name s<seed>-<config hash> says so), so that runs one
    experiment repeats from another (barbero2025's 64-token context is guo2024's one-layer
    backcopy) train once. The copy is atomic: a temporary sibling, renamed."""
    from sinkexp.rundir import DONE

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


def run_experiments(paper: Paper, overrides: list[str], root: Path, planned: dict) -> dict[str, float]:
    """Each experiment as one `sinkexp train -m`; returns seconds per experiment."""
    from sinkexp.cli import train

    seconds = {}
    for exp in paper.experiments:
        print(f"== {paper.name} / {exp.name}", flush=True)
        started = time.perf_counter()
        copy_finished_twins(planned[paper.name, exp.name], root)
        train(experiment_argv(exp, root / paper.name / exp.name, overrides))
        seconds[exp.name] = time.perf_counter() - started
    return seconds


# --- checking ----------------------------------------------------------------------------------

def load_runs(folder: Path, planned: set[Path] | None = None) -> tuple[list[Run], pd.DataFrame]:
    """(finished runs, every run's settings and status) below an experiment's folder; only the
    `planned` run directories when given."""
    from sinkexp.report import collect

    if not folder.is_dir():
        return [], pd.DataFrame(columns=["run", "status"])
    table, finals = collect(folder)
    if planned is not None:
        table = table[[(folder / run).resolve() in planned for run in table["run"]]]
    done = [Run(folder / row["run"], row.to_dict(), finals[finals["run"] == row["run"]], experiment=folder.name)
            for _, row in table.iterrows() if row["status"] == "done"]
    return done, table


def setting(settings: dict, key: str):
    """A run's value of `key`; a run written before the key existed has its earlier behaviour (LATER_KEYS)."""
    from sinkexp.rundir import LATER_KEYS

    value = settings.get(key)
    missing = value is None or (isinstance(value, float) and math.isnan(value))
    return LATER_KEYS.get(key) if missing else value


def selects(settings: dict, where: dict) -> bool:
    return all(str(setting(settings, key)) == str(value) for key, value in where.items())


def label(run: Run) -> str:
    return "/".join(f"{'s' if key == 'seed' else 't'}{run.settings[key]}" for key in PAIR_KEYS if key in run.settings)


@dataclass
class Result:
    claim: Claim
    values: dict[str, float] = field(default_factory=dict)   # run label (s<seed>/t<structure seed>) -> value
    problem: str = ""                                          # why a claim could not be measured

    @property
    def passed(self) -> bool:
        return not self.problem and bool(self.values) and all(map(self.claim.criterion.holds, self.values.values()))

    def row(self, paper: Paper) -> dict:
        values = pd.Series(self.values, dtype=float)
        return {"paper": paper.name, "claim": self.claim.name, "statement": self.claim.statement,
                "source": self.claim.source, "paper_value": self.claim.paper_value,
                "measure": self.claim.describe(),
                "mean": values.mean(), "std": values.std(), "n": len(values),
                "values": " ".join(f"{k}={v:.4g}" for k, v in self.values.items()),
                "criterion": str(self.claim.criterion), "verdict": "PASS" if self.passed else "FAIL",
                "problem": self.problem, "note": self.claim.note}


PAIRINGS = {"difference": lambda a, b: a - b, "ratio": lambda a, b: a / b if b else math.nan}


def spearman(x: list[float], y: list[float]) -> float:
    """Spearman's rank correlation: Pearson's on the ranks (ties share their mean rank)."""
    return float(pd.Series(x, dtype=float).rank().corr(pd.Series(y, dtype=float).rank()))


def trend(claim: Claim, chosen: list[Run]) -> Result:
    """Per draw (seed, structure seed): rho of the measure against the `trend` key over the draw's runs."""
    draws: dict[str, list[Run]] = {}
    for run in chosen:
        draws.setdefault(label(run), []).append(run)
    short = [name for name, runs in draws.items() if len(runs) < 3]
    if short:
        return Result(claim, problem="fewer than 3 runs to rank for " + ", ".join(short))
    return Result(claim, {name: spearman([float(setting(r.settings, claim.trend)) for r in runs],
                                         [claim.measure.of(r) for r in runs]) for name, runs in draws.items()})


def evaluate(claim: Claim, runs: list[Run], table: pd.DataFrame) -> Result:
    """The claim's value on every run it selects (paired: the difference to the `against` run of the
    same seed and structure seed); `problem` says why there is none. `where` selects among the runs of
    the claim's own experiments, `against` among those of `against_in` (default: the same)."""
    arms = [claim.where] + ([claim.against] if claim.against else [])
    unfinished = sum(row["status"] != "done" and any(selects(row, arm) for arm in arms)
                     for row in table.to_dict("records"))
    home = claim.own_experiments
    away = (claim.against_in,) if claim.against_in else home
    chosen = sorted((r for r in runs if r.experiment in home and selects(r.settings, claim.where)), key=label)
    others = {label(r): r for r in runs
              if claim.against and r.experiment in away and selects(r.settings, claim.against)}
    labels = [label(r) for r in chosen]
    if unfinished:
        return Result(claim, problem=f"{unfinished} selected runs did not finish")
    if not chosen:
        return Result(claim, problem="no run selected")
    if claim.trend:
        return trend(claim, chosen)
    if len(set(labels)) < len(labels):
        return Result(claim, problem="several selected runs share a seed and structure seed; narrow `where`")
    if claim.against is None:
        return Result(claim, {name: claim.measure.of(r) for name, r in zip(labels, chosen)})
    missing = [name for name in labels if name not in others]
    if missing:
        return Result(claim, problem="no paired run for " + ", ".join(missing))
    pair = PAIRINGS[claim.compare]
    return Result(claim, {name: pair(claim.measure.of(r), claim.measure.of(others[name])) for name, r in zip(labels, chosen)})


def check_claims(paper: Paper, root: Path, planned: dict | None = None) -> list[Result]:
    """Every claim of `paper` on the runs below root/<paper>/ (those `planned` by check(), when given)."""
    loaded = {exp.name: load_runs(root / paper.name / exp.name, planned and planned[paper.name, exp.name])
              for exp in paper.experiments}
    results = []
    for claim in paper.claims:
        runs = [run for name in claim.experiments for run in loaded[name][0]]
        table = pd.concat([loaded[name][1] for name in claim.experiments], ignore_index=True)
        results.append(evaluate(claim, runs, table))
    return results


# --- reporting ---------------------------------------------------------------------------------

def table_text(rows: pd.DataFrame) -> str:
    """The console / REPORT.md table: one line per claim, per-run values included."""
    lines = ["| paper | claim | source | paper | measured mean +- std (n) | per run | criterion | verdict |",
             "|---|---|---|---|---|---|---|---|"]
    for _, r in rows.iterrows():
        measured = f"{r['mean']:.4g} +- {r['std']:.2g} ({r['n']})" if r["n"] else "-"
        verdict = r["verdict"] + (f" ({r['problem']})" if r["problem"] else "")
        lines.append(f"| {r['paper']} | {r['claim']} | {r['source']} | {r['paper_value']} | {measured} | "
                     f"{r['values']} | {r['measure']} {r['criterion']} | {verdict} |")
    return "\n".join(lines)


def figures(paper: Paper, root: Path) -> dict[str, Path]:
    """`sinkexp report` of each experiment folder (summary.csv and figures in <folder>/report/)."""
    from sinkexp.report import report

    made = {}
    for exp in paper.experiments:
        folder = root / paper.name / exp.name
        if folder.is_dir():
            with contextlib.redirect_stdout(io.StringIO()):
                made[exp.name] = report(folder)
    return made


def write_report(papers: list[Paper], rows: pd.DataFrame, out: Path, root: Path, command: str, seconds: dict,
                 reports: dict) -> Path:
    """claims.csv and REPORT.md into `out` (runs below root/<paper>/<experiment>/; links relative to `out`)."""
    from sinkexp.rundir import write_csv, write_text

    write_csv(out / "claims.csv", rows)
    lines = [f"# sinkexp reproduce: {', '.join(p.name for p in papers)}", "",
             f"Command: `{command}`", "",
             f"{(rows['verdict'] == 'PASS').sum()} of {len(rows)} claims pass. Every claim is checked on every run "
             "it selects (per run: s<seed>/t<structure seed>); it passes only if each run meets the criterion.", "",
             table_text(rows), ""]
    for paper in papers:
        lines += [f"## {paper.name}: {paper.title}", ""]
        for claim in paper.claims:
            lines.append(f"- **{claim.name}** ({claim.source}): {claim.statement}"
                         + (f" *{claim.note}*" if claim.note else ""))
        lines.append("")
        for exp in paper.experiments:
            folder = os.path.relpath(root / paper.name / exp.name, out)
            took = f", {seconds[(paper.name, exp.name)]:.0f} s" if (paper.name, exp.name) in seconds else ""
            lines.append(f"### {exp.name}{took}")
            lines.append(f"Runs: `{folder}/` (`{' '.join([*exp.overrides, *(f'{k}={v}' for k, v in exp.grid.items())])}`"
                         + (f", CPU sizes `{' '.join(exp.cpu)}`" if exp.cpu else "") + ")")
            if (paper.name, exp.name) in reports:
                rel = os.path.relpath(reports[(paper.name, exp.name)], out)
                lines += ["", f"![sink attention by layer]({rel}/sink_attn_by_layer.png)",
                          f"![dynamics]({rel}/dynamics.png)"]
            lines.append("")
    path = out / "REPORT.md"
    write_text(path, "\n".join(lines))
    return path


def list_papers(papers: dict[str, Paper]) -> str:
    lines = []
    width = max(len(c.name) for paper in papers.values() for c in paper.claims)
    for paper in papers.values():
        runs = sum(math.prod(len(v.split(",")) for v in e.grid.values()) for e in paper.experiments)
        lines.append(f"{paper.name}: {paper.title} ({len(paper.experiments)} experiments, {runs} runs)")
        for c in paper.claims:
            lines.append(f"  {c.name:<{width}} {c.source}: {c.describe()} {c.criterion} "
                         f"(paper: {c.paper_value})")
    return "\n".join(lines)


def reproduce(papers: list[Paper], overrides: list[str], root: Path = OUTPUT_ROOT, command: str = "") -> pd.DataFrame:
    """Run (or resume) every experiment of `papers`, check their claims, write claims.csv, REPORT.md
    and figures into `root` (one paper: root/<paper>/), print the table; returns the claims table."""
    planned = check(papers, overrides, root)
    started, seconds, reports, results = time.perf_counter(), {}, {}, []
    for paper in papers:
        for name, took in run_experiments(paper, overrides, root, planned).items():
            seconds[(paper.name, name)] = took
        for name, path in figures(paper, root).items():
            reports[(paper.name, name)] = path
        results += [r.row(paper) for r in check_claims(paper, root, planned)]
    rows = pd.DataFrame(results)
    out = root / papers[0].name if len(papers) == 1 else root
    report = write_report(papers, rows, out, root, command, seconds, reports)
    print(table_text(rows))
    print(f"{(rows['verdict'] == 'PASS').sum()} of {len(rows)} claims pass; wall time {time.perf_counter() - started:.0f} s; "
          f"report: {report}")
    return rows


def main(argv: list[str]) -> int:
    from sinkexp.errors import ConfigError
    from sinkexp.reproduce.papers import PAPERS

    if not argv or argv[0] in ("-h", "--help"):
        print("usage: sinkexp reproduce PAPER|all [KEY=VALUE ...]   (overrides apply to every run, e.g. scale=paper)\n"
              "       sinkexp reproduce --list\n"
              f"papers: {', '.join(PAPERS)}")
        return 0 if argv else 2
    if argv[0] == "--list":
        print(list_papers(PAPERS))
        return 0
    name, overrides = argv[0], argv[1:]
    if name != "all" and name not in PAPERS:
        print(f"sinkexp: error: unknown paper {name!r}; choose one of: all, {', '.join(PAPERS)}", file=sys.stderr)
        return 2
    papers = list(PAPERS.values()) if name == "all" else [PAPERS[name]]
    try:
        rows = reproduce(papers, overrides, command="sinkexp reproduce " + " ".join(argv))
    except ConfigError as err:
        print(f"sinkexp: error: {err}", file=sys.stderr)
        return 2
    return 0 if (rows["verdict"] == "PASS").all() else 1
