"""What `sinkexp reproduce` writes: claims.csv, REPORT.md, each experiment's figures, and with
`--docs DIR` the repository's results page (DIR/results.md) and the README's headline.

results.md and the headline are functions of claims.csv alone, so a test can check that the
committed page is what the committed claims.csv gives (docs/reproduce.md lists every file).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pandas as pd

from sinkexp.report.runs import write_report as report_folder
from sinkexp.reproduce.declare import Paper
from sinkexp.reproduce.scales import CLAIM_SCALES, PRETRAINED, at_largest, declarations, side_by_side, with_scale
from sinkexp.reproduce.verdicts import VERDICTS
from sinkexp.rundir.files import write_csv, write_text

CLAIMS = "claims.csv"
RESULTS = "results.md"
WRITTEN_AS_TEXT = ("declaration", "commits", "versions", "devices", "threads")
HEADLINE = re.compile(r"(<!-- results-headline:[^\n]*-->\n)(.*?)(<!-- /results-headline -->)", re.S)


def read_claims(path: Path) -> pd.DataFrame:
    """A claims.csv as written: the digests, commits and thread counts stay text (left to pandas, a
    column of "1" reads as 1.0 and a commit 1e68896 as inf)."""
    return pd.read_csv(path, dtype=dict.fromkeys(WRITTEN_AS_TEXT, str))


def text(value) -> str:
    """A claims.csv cell as text (an empty cell reads back as NaN)."""
    return value if isinstance(value, str) else ""


def table_text(rows: pd.DataFrame) -> str:
    """The console / REPORT.md table: one line per claim, per-run values (trained and untrained) included."""
    lines = [
        "| paper | claim | kind | source | paper | measured mean +- std [min, max] (n) | per run | untrained "
        "| criterion | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for _, r in rows.iterrows():
        measured = f"{r['mean']:.4g} +- {r['std']:.2g} [{r['min']:.4g}, {r['max']:.4g}] ({r['n']})" if r["n"] else "-"
        verdict = f"**{r['verdict']}**" + (f" ({r['why']})" if text(r.get("why")) else "")
        verdict += f" (not counted: {r['excluded']})" if text(r.get("excluded")) else ""
        lines.append(
            f"| {r['paper']} | {r['claim']} | {r['kind']} | {r['source']} | {r['paper_value']} | "
            f"{measured} | {text(r['values'])}{per_run_detail(r)} | {text(r.get('untrained'))} | "
            f"{r['measure']} {r['criterion']} | {verdict} |"
        )
    return "\n".join(lines)


def per_run_detail(row) -> str:
    """' (detail: ...)' where the measure says what each run's value is made of (a split sink's keys)."""
    return f" (detail: {text(row.get('detail'))})" if text(row.get("detail")) else ""


def counted(rows: pd.DataFrame) -> str:
    """'12 hold, 3 contradicted, 25 not reached, 2 cannot fail' (and 'not run' where any is)."""
    words = {"holds": "hold"}
    counts = rows["verdict"].value_counts()
    return ", ".join(f"{counts.get(v, 0)} {words.get(v, v)}" for v in VERDICTS if v != "not run" or counts.get(v, 0))


def passing(rows: pd.DataFrame) -> str:
    """The verdicts counted apart by kind: a paper's own claims are never mixed with sinkexp's."""
    parts = []
    for kind, label in (("paper", "paper claims"), ("extension", "extensions"), ("control", "controls")):
        chosen = rows[rows["kind"] == kind]
        if len(chosen):
            parts.append(f"{label}: {counted(chosen)}")
    return "; ".join(parts)


def provenance_lines(rows: pd.DataFrame) -> list[str]:
    """What produced the verdicts: the runs' distinct commits, versions, devices and thread counts."""

    def seen(column: str) -> list[str]:  # a cell lists a claim's runs' values, "; " between them
        return sorted({part for cell in rows[column].map(text) for part in cell.split("; ") if part})

    lines = [
        f"- {what}: {', '.join(seen(column)) or 'not recorded'}"
        for column, what in (
            ("commits", "commits"),
            ("versions", "versions"),
            ("devices", "devices"),
            ("threads", "torch threads"),
        )
    ]
    if len(seen("commits")) > 1:
        lines.append("- the runs come from more than one commit (the `commits` column says which per claim)")
    lines.append(
        "- per-run values are bit-identical on one machine at one thread count; another machine or "
        "thread count moves chaotic runs in their 2nd-3rd digit (docs/rundir.md)"
    )
    return lines


def figures(paper: Paper, root: Path) -> dict[str, Path]:
    """`sinkexp report` of each experiment folder (summary.csv and figures in <folder>/report/)."""
    return {
        exp.name: report_folder(root / paper.name / exp.name)[0]
        for exp in paper.experiments
        if (root / paper.name / exp.name).is_dir()
    }


def write_claims_report(
    papers: list[Paper], rows: pd.DataFrame, out: Path, root: Path, command: str, seconds: dict, reports: dict
) -> Path:
    """claims.csv and REPORT.md into `out` (runs below root/<paper>/<experiment>/; links relative to `out`)."""
    write_csv(out / CLAIMS, rows)
    lines = [
        f"# sinkexp reproduce: {', '.join(p.name for p in papers)}",
        "",
        f"Command: `{command}`",
        "",
        f"{passing(rows)}. Every claim is checked on every run it selects (per run: s<seed>/t<structure "
        "seed>), trained and untrained (step 0); the verdicts are docs/reproduce.md's.",
        "",
        "Declarations: " + ", ".join(f"{p.name} {p.digest}" for p in papers) + ". Runs read:",
        "",
        *provenance_lines(rows),
        "",
        table_text(rows),
        "",
    ]
    for paper in papers:
        lines += [f"## {paper.name}: {paper.title}", ""]
        for claim in paper.claims:
            lines.append(
                f"- **{claim.name}** ({claim.source}): {claim.statement}" + (f" *{claim.note}*" if claim.note else "")
            )
        lines.append("")
        for exp in paper.experiments:
            folder = os.path.relpath(root / paper.name / exp.name, out)
            took = f", {seconds[(paper.name, exp.name)]:.0f} s" if (paper.name, exp.name) in seconds else ""
            lines.append(f"### {exp.name}{took}")
            sizes = (("CPU sizes", exp.cpu), ("reach sizes", exp.reach))
            lines.append(
                f"Runs: `{folder}/` (`{' '.join(exp.argv(scale='paper'))}`"
                + "".join(
                    f", {label} `{' '.join(f'{k}={v}' for k, v in size.items())}`" for label, size in sizes if size
                )
                + ")"
            )
            if (paper.name, exp.name) in reports:
                rel = os.path.relpath(reports[(paper.name, exp.name)], out)
                lines += [
                    "",
                    f"![sink attention by layer]({rel}/sink_attn_by_layer.png)",
                    f"![dynamics]({rel}/dynamics.png)",
                ]
            lines.append("")
    path = out / "REPORT.md"
    write_text(path, "\n".join(lines))
    return path


def results_page(rows: pd.DataFrame) -> str:
    """docs/results.md: the headline, then per paper its claims with values, criterion and verdict."""
    lines = [
        "# Results",
        "",
        "<!-- generated by `sinkexp reproduce --docs docs` from docs/claims.csv; do not edit -->",
        "",
        headline(rows),
        "",
        "Each claim is checked on every run it selects (`s<seed>/t<structure seed>=value`), trained and "
        "untrained (step 0 of the same runs). **holds**: every run meets the criterion, and it could have "
        "failed; **contradicted**: what the claim is about formed, and its direction did not hold on some run "
        "(the why names each; a phenomenon that formed on other runs, or earlier on that one, counts as formed); "
        "**not reached**: what the claim needs did not form at the size run, so it was not tested; **cannot "
        "fail**: the criterion holds untrained too; **not run**: it could not be measured (its why says what is "
        "missing). Each criterion says whose threshold it is (sinkexp's, the source's, or only the source's "
        "direction). `paper`: the source's claim in its direction; "
        "`extension`: a question sinkexp asks beyond it; `control`: a setting that cannot form the effect. "
        "How claims are declared and judged: [reproduce.md](reproduce.md); why effects do not form at the "
        "CPU sizes: [findings](findings/README.md).",
        "",
        f"Declarations: {declarations(rows)}. Runs read:",
        "",
        *provenance_lines(rows),
        "",
    ]
    rows = with_scale(rows)
    for paper, claims in rows.groupby("paper", sort=False):
        if claims["scale"].nunique() == 1:
            lines += [f"## {paper} ({passing(claims)})", "", table_text(claims), ""]
        else:  # each claim's verdict at each scale, then each scale's table
            lines += [f"## {paper} (at the largest scale run: {passing(at_largest(claims))})", ""]
            lines += side_by_side(claims)
            for scale, at in claims.groupby("scale", sort=False):
                lines += ["", f"### scale={scale} ({passing(at)})", "", table_text(at)]
            lines.append("")
            claims = claims.drop_duplicates("claim")
        notes = [f"- **{r['claim']}**: {r['note']}" for _, r in claims.iterrows() if text(r["note"])]
        if notes:
            lines += ["Notes:", "", *notes, ""]
    return "\n".join(lines)


def headline(rows: pd.DataFrame) -> str:
    """One line: the verdicts by kind, and the paper claims' verdicts per paper; each claim at the
    largest scale it was run at, the CPU sizes' counts beside them where a larger scale was run, and
    the pre-trained checkpoints' counts and models where scale=pretrained was run."""
    rows = with_scale(rows)
    largest = at_largest(rows)
    papers = largest[largest["kind"] == "paper"]
    by_paper = "; ".join(f"{paper} {counted(claims)}" for paper, claims in papers.groupby("paper", sort=False))
    if (rows["scale"] == "cpu").all():
        return f"**{passing(rows)}** (paper claims by paper: {by_paper})."
    cpu = rows[rows["scale"] == "cpu"]
    return (
        f"**{passing(largest)}**, each claim at the largest scale it was run at (at the CPU sizes alone: "
        f"{passing(cpu)}) (paper claims by paper: {by_paper}).{pretrained_counts(rows)}"
    )


def pretrained_counts(rows: pd.DataFrame) -> str:
    """' On pre-trained checkpoints (...): <counts by kind>' where scale=pretrained was run: the claims
    on checkpoints measured here and on which models, then how many wait for weights not here."""
    pretrained = rows[rows["scale"] == PRETRAINED]
    if not len(pretrained):
        return ""
    absent = pretrained["why"].map(text).str.startswith("needs ")
    measured = pretrained[~absent]
    cells = measured["model"].map(text) if "model" in measured else pd.Series(dtype=str)
    models = ", ".join(dict.fromkeys(model for cell in cells for model in cell.split("; ") if model))
    waiting = f"; {absent.sum()} more on named checkpoints whose weights are not here (not run)" if absent.any() else ""
    return f" On pre-trained checkpoints (scale=pretrained; {models or 'none measured'}): {passing(measured)}{waiting}."


FINDINGS = "findings.md"  # a paper's generated findings table (Paper.findings), beside its claims.csv
GENERATED = re.compile(r"(<!-- generated: sinkexp reproduce (\S+) -->\n)(.*?)(<!-- /generated -->)", re.S)


def write_findings(papers: list[Paper], root: Path, docs: Path | None = None) -> None:
    """Each paper's findings table (Paper.findings, from its runs below root/<paper>) into
    root/<paper>/findings.md and, with `docs`, between the generated-markers of docs/findings/<paper>.md."""
    for paper in (p for p in papers if p.findings is not None):
        table = paper.findings(root / paper.name)
        write_text(root / paper.name / FINDINGS, table + "\n")
        page = Path(docs or "") / "findings" / f"{paper.name}.md"
        if docs is not None and page.exists() and GENERATED.search(page.read_text()):
            text = GENERATED.sub(lambda m: f"{m[1]}{table}\n{m[4]}" if m[2] == paper.name else m[0], page.read_text())
            write_text(page, text)


def write_docs(docs: Path, rows: pd.DataFrame | None = None) -> Path:
    """DIR/results.md from `rows` (merged into DIR/claims.csv first: their papers' rows at their
    scale replace those papers' rows at that scale there, the others stay; per paper, scale by scale)
    or from DIR/claims.csv as it is, and the headline between the results-headline markers of the
    README beside DIR, when it has them."""
    docs = Path(docs)
    if rows is not None:
        rows = with_scale(rows)
        if (docs / CLAIMS).exists():
            kept = with_scale(read_claims(docs / CLAIMS))
            order = list(dict.fromkeys([*kept["paper"], *rows["paper"]]))
            replaced = pd.MultiIndex.from_frame(kept[["paper", "scale"]]).isin(
                pd.MultiIndex.from_frame(rows[["paper", "scale"]])
            )
            both = pd.concat([kept[~replaced], rows], ignore_index=True)
            both = both.sort_values("scale", key=lambda scale: scale.map(CLAIM_SCALES.index), kind="stable")
            rows = pd.concat([both[both["paper"] == paper] for paper in order], ignore_index=True)
        write_csv(docs / CLAIMS, rows)
    rows = read_claims(docs / CLAIMS)
    write_text(docs / RESULTS, results_page(rows))
    readme = docs.parent / "README.md"
    if readme.exists() and HEADLINE.search(readme.read_text()):
        link = f"{docs.name}/{RESULTS}"
        text = HEADLINE.sub(
            lambda m: f"{m[1]}{headline(rows)} Every claim: [{link}]({link}).\n{m[3]}", readme.read_text()
        )
        write_text(readme, text)
    return docs / RESULTS
