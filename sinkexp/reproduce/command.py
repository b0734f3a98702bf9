"""`sinkexp reproduce`'s command line, as COMMANDS declares it (sinkexp/commands/: its paper and
flags a ReproduceFlags, its KEY=VALUE words the overrides every run gets), and every input error as
one line with exit code 2 (docs/reproduce.md).

    sinkexp reproduce PAPER|all [KEY=VALUE ...] [weights=DIR] [--docs DIR] [--pack|--no-pack]
    sinkexp reproduce PAPER|all [KEY=VALUE ...] --estimate [--recalibrate]
    sinkexp reproduce --list
    sinkexp reproduce --docs DIR
"""

from __future__ import annotations

import shutil
import sys
import time
from dataclasses import replace
from pathlib import Path

import pandas as pd

from sinkexp.commands import COMMANDS
from sinkexp.config.arguments import read
from sinkexp.config.compose import parse
from sinkexp.config.helptext import help_text
from sinkexp.config.settings import OUTPUT_ROOT, ReproduceFlags, ReproduceSettings
from sinkexp.errors import ConfigError, refuse
from sinkexp.reproduce.declare import DeclarationError, Paper
from sinkexp.reproduce.run import estimate_papers, exit_code, reproduce
from sinkexp.reproduce.scales import with_scale
from sinkexp.reproduce.verdicts import VERDICTS
from sinkexp.reproduce.write import CLAIMS, passing, read_claims, write_docs

N_JOBS = "hydra.launcher.n_jobs"
REPRODUCE = COMMANDS["reproduce"]  # its usage, --help and completion: from ReproduceFlags (config/settings.py)
STARTED = time.perf_counter()  # imported as the command starts: --estimate says how long it took


def decided(
    words: list[str], papers=(), docs: Path | None = None, root: Path = OUTPUT_ROOT, pack: bool | None = None
) -> ReproduceSettings:
    """The KEY=VALUE words (weights=DIR among them) read once, with Hydra's parser, into what
    reproduce decides by them, with the papers (declare.Paper), the --docs folder and the output
    folder; each experiment of the papers read into its Sweep and the packing decided (`pack` None:
    where it pays; sweeps.with_sweeps). hydra.launcher.n_jobs is reproduce's own pool size, passed on
    only to a launcher the user chose."""
    overrides = [word for word in words if not word.startswith("weights=")]
    weights = next((Path(w.split("=", 1)[1]) for w in reversed(words) if w.startswith("weights=")), None)
    settings = replace(read_overrides(overrides), papers=tuple(papers), docs=docs, weights=weights, root=root)
    if not papers:
        return settings
    from sinkexp.reproduce.sweeps import with_sweeps  # lazy: imports torch (2.4 s); --list and --help answer without

    return with_sweeps(settings, pack)


def read_overrides(overrides: list[str]) -> ReproduceSettings:
    """What reproduce itself reads of the overrides (scale, device, hydra.launcher.n_jobs, a launcher
    of the user's), each override kept with its key for every run."""
    parsed = [(override.key_or_group, override) for override in parse(overrides)]
    read = ("scale", "device", N_JOBS)  # what reproduce itself reads; any other key is the runs' alone
    given = {key: o.get_value_element_as_str() for key, o in parsed if key in read and not o.is_delete()}
    launcher = any(key.startswith(("hydra/launcher", "hydra.launcher.")) and key != N_JOBS for key, _ in parsed)
    return ReproduceSettings(
        overrides=tuple((key, o.input_line) for key, o in parsed if launcher or key != N_JOBS),
        scale=given.get("scale", "cpu"),
        device=given.get("device", "auto"),
        workers=int(given[N_JOBS]) if int(given.get(N_JOBS, "0")) > 0 else None,
        launcher=launcher,
    )


def last_verdicts(names, root: Path = OUTPUT_ROOT) -> pd.DataFrame:
    """The verdicts of the last `reproduce` at the CPU sizes below `root` (root/claims.csv and
    root/<paper>/claims.csv for the papers `names`, not another scale's root/<scale>/claims.csv;
    the newest row of a claim wins), for `--list`; empty before any."""
    tables = [path for path in (root / CLAIMS, *(root / name / CLAIMS for name in names)) if path.is_file()]
    tables = sorted(tables, key=lambda path: path.stat().st_mtime)
    rows = [read_claims(path) for path in tables]
    if not rows:
        return pd.DataFrame(columns=["paper", "claim", "kind", "verdict"])
    return pd.concat(rows).drop_duplicates(["paper", "claim"], keep="last")


RECORDED = Path(__file__).resolve().parents[2] / "docs" / CLAIMS  # the repository's table, in a clone


def recorded_verdicts(path: Path = RECORDED) -> dict[tuple[str, str], str]:
    """{(paper, claim): "cpu holds, reach contradicted"}: the verdicts the repository records per
    scale (docs/claims.csv, as `reproduce --docs docs` wrote it); {} where there is none."""
    if not path.is_file():
        return {}
    rows = with_scale(read_claims(path))
    return {
        key: ", ".join(f"{row.scale} {row.verdict}" for row in group.itertuples())
        for key, group in rows.groupby(["paper", "claim"], sort=False)
    }


def list_papers(
    papers: dict[str, Paper], root: Path = OUTPUT_ROOT, recorded: Path = RECORDED, columns: int | None = None
) -> str:
    """Every claim with its source and criterion, its verdict in the last run below `root`, counted
    per kind for each paper, and the verdicts docs/claims.csv records for it at each scale; each line
    cut to `columns` (None: whole), with a last line saying how to see them whole."""
    last = last_verdicts(papers, root).set_index(["paper", "claim"])
    kept = recorded_verdicts(recorded)
    lines = []
    for paper in papers.values():
        runs = sum(exp.runs for exp in paper.experiments)
        weights = {e.name: e.model for e in paper.experiments if hasattr(e, "model")}  # checkpoints
        verdicts = [last["verdict"].get((paper.name, c.name), "not run yet") for c in paper.claims]
        counts = pd.DataFrame({"kind": [c.kind for c in paper.claims], "verdict": verdicts})
        ran = f"last run: {passing(counts)}" if counts["verdict"].isin(VERDICTS).any() else "not run yet"
        lines.append(f"{paper.name}: {paper.title} ({len(paper.experiments)} experiments, {runs} runs; {ran})")
        width = max(len(c.name) for c in paper.claims)  # the names' column, per paper
        for c, verdict in zip(paper.claims, verdicts):
            if verdict.startswith("not run") and c.experiments[0] in weights:  # a checkpoint not measured
                verdict += f", needs weights: {weights[c.experiments[0]]}"
            if (paper.name, c.name) in kept:
                verdict += f" (recorded: {kept[paper.name, c.name]})"
            lines.append(
                f"  {c.name:<{width}} [{c.kind}] {verdict}: {c.source}: {c.describe()} {c.criterion} "
                f"(paper: {c.paper_value})"
            )
    if columns is None or all(len(line) <= columns for line in lines):
        return "\n".join(lines)
    cut = [line if len(line) <= columns else line[: columns - 3] + "..." for line in lines]
    return "\n".join(
        [*cut, f"(lines cut at the terminal's {columns} columns; --wide, or a pipe or file, shows them whole)"]
    )


def main(argv: list[str]) -> int:
    try:
        given = read(REPRODUCE, argv)
    except ConfigError as err:
        return refuse(err)
    args = given.flags or ReproduceFlags()  # --help: nothing else read
    if args.plan:  # docs/glossary.md: a plan is the checked list of jobs; the flag prints a cost estimate
        return refuse("--plan is now --estimate (the cost estimate: jobs, FLOPs, predicted time; nothing trains)")
    try:  # a paper file's declaration mistake is found on import, told in one line
        from sinkexp.reproduce.papers import PAPERS  # lazy: to catch that mistake here
    except DeclarationError as err:
        return refuse(err)
    if args.docs is not None and not given.words and not args.list:
        print(f"written: {write_docs(args.docs)}")
        return 0
    if given.help or not (given.words or args.list):
        print(help_text(REPRODUCE))
        return 0 if given.help else 2
    if args.list:  # on a terminal, fitted to its width as `report --list` is; whole into a pipe or file
        fitted = sys.stdout.isatty() and not args.wide
        print(list_papers(PAPERS, columns=shutil.get_terminal_size((120, 24)).columns if fitted else None))
        return 0
    name = args.paper
    if name is None:  # KEY=VALUE words without a paper
        return refuse(
            f"which paper? sinkexp reproduce PAPER|all [KEY=VALUE ...]; choose one of: all, {', '.join(PAPERS)}"
        )
    if name != "all" and name not in PAPERS:
        return refuse(f"unknown paper {name!r}; choose one of: all, {', '.join(PAPERS)}")
    papers = list(PAPERS.values()) if name == "all" else [PAPERS[name]]
    if args.recalibrate and not args.estimate:
        return refuse("--recalibrate goes with --estimate (it times the planned jobs again)")
    return estimate_or_reproduce(args, papers, given.keys, command=" ".join(given.words))


def estimate_or_reproduce(args: ReproduceFlags, papers: list[Paper], words: list[str], command: str) -> int:
    """--estimate's cost estimate, or the papers reproduced (and with --docs the results page written)."""
    try:
        # decided once, here: everything below reads these settings (the docs folder: the findings
        # pages' generated tables, from the tables reproduce makes)
        settings = decided(words, papers, docs=args.docs, pack=args.pack)
        if args.estimate:
            # lazy: estimate.py pulls in torch (~2.4 s); --list, --help and input errors answer without it
            from sinkexp.reproduce.estimate import format_estimate

            estimated = estimate_papers(settings, args.recalibrate)
            print(format_estimate(*estimated, took=time.perf_counter() - STARTED))
            return 0
        rows = reproduce(settings, command=f"sinkexp reproduce {command}")
    except ConfigError as err:
        return refuse(err)
    if args.docs is not None:
        print(f"written: {write_docs(args.docs, rows)}")
    return exit_code(rows)
