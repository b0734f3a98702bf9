"""The documents as a newcomer reads them: the README stays a short guide, every relative link and
anchor in README.md and docs/ leads somewhere, the preset and model-axis tables (each kept in one
place, docs/models.md) list what the code has, and every paper has its findings page."""

import dataclasses
import re
from pathlib import Path

REPO = Path(__file__).parents[1]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = "```"


def prose(path: Path) -> list[str]:
    """The lines of a Markdown file outside fenced code blocks."""
    lines, fenced = [], False
    for line in path.read_text().splitlines():
        if line.lstrip().startswith(FENCE):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but '-' and '_' dropped, spaces to '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading's anchor in a Markdown file (a repeated heading gets -1, -2, ... as on GitHub)."""
    found, count = set(), {}
    for line in prose(path):
        match = re.match(r"#{1,6} (.+)", line)
        if match:
            base = slug(match.group(1))
            found.add(f"{base}-{count[base]}" if base in count else base)
            count[base] = count.get(base, 0) + 1
    return found


def broken_links(path: Path) -> list[str]:
    """`file: target` for each relative link of `path` whose file or anchor does not exist."""
    broken = []
    for line in prose(path):
        for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
            if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
                continue
            file, _, anchor = target.partition("#")
            linked = (path.parent / file).resolve() if file else path
            if not linked.exists() or (anchor and linked.suffix == ".md" and anchor not in anchors(linked)):
                broken.append(f"{path.relative_to(REPO) if path.is_relative_to(REPO) else path.name}: {target}")
    return broken


def documents() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def table_keys(path: Path, heading: str) -> set[str]:
    """The backquoted names in the first column of the first table under `heading`."""
    lines = prose(path)
    start = next(i for i, line in enumerate(lines) if line.startswith("#") and heading in line)
    rows = []
    for line in lines[start + 1 :]:
        if line.startswith("|"):
            rows.append(line)
        elif rows:
            break
    return {name for row in rows[2:] for name in re.findall(r"`([^`]+)`", row.split("|")[1])}


def test_the_readme_is_at_most_300_lines():
    assert len((REPO / "README.md").read_text().splitlines()) <= 300


def test_every_relative_link_in_the_readme_and_docs_leads_to_a_file_and_heading():
    assert [link for path in documents() for link in broken_links(path)] == []


def test_anchors_are_githubs():
    assert slug("Causal interventions (`sinkexp intervene`)") == "causal-interventions-sinkexp-intervene"
    heading = "Many models per step: `train.replicas=K` and `pack=`"
    assert slug(heading) == "many-models-per-step-trainreplicask-and-pack"
    assert slug("The gamma sweep in the source's form") == "the-gamma-sweep-in-the-sources-form"


def test_a_missing_file_a_missing_heading_and_a_repeated_heading_are_told_apart(tmp_path):
    (tmp_path / "other.md").write_text("# Notes\n## Notes\n```\n# not a heading\n```\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[a](other.md#notes) [b](other.md#notes-1) [c](other.md#notes-2) [d](gone.md)\n"
        "[e](#here) [f](other.md#not-a-heading) `[g](gone.md)` [h](https://example.org)\n# Here\n"
    )
    assert broken_links(page) == ["page.md: other.md#notes-2", "page.md: gone.md", "page.md: other.md#not-a-heading"]


def test_the_preset_table_lists_every_attention_preset():
    presets = {path.stem for path in (REPO / "configs" / "attn").glob("*.yaml")}
    assert table_keys(REPO / "docs" / "models.md", "Attention variants") == presets


def test_the_model_axes_table_lists_every_model_key():
    from sinkexp.config.schema import ModelConfig

    keys = {field.name for field in dataclasses.fields(ModelConfig)}
    assert table_keys(REPO / "docs" / "models.md", "Model axes") == keys


def test_every_paper_has_one_findings_page_linked_from_the_index():
    from sinkexp.reproduce.papers import PAPERS

    findings = REPO / "docs" / "findings"
    assert {path.stem for path in findings.glob("*.md")} == {*PAPERS, "README"}
    index = " ".join(prose(findings / "README.md"))
    assert all(f"]({paper}.md)" in index for paper in PAPERS)


def test_reproduce_md_is_reference_without_dated_sections():
    headings = [line for line in prose(REPO / "docs" / "reproduce.md") if line.startswith("#")]
    assert len(headings) > 3 and [h for h in headings if re.search(r"\d{4}-\d{2}-\d{2}", h)] == []


def test_ci_runs_exactly_the_readmes_test_command():
    lint = ".venv/bin/ruff check . && .venv/bin/ruff format --check ."
    command = f"bash scripts/setup.sh && {lint} && .venv/bin/python -m pytest"
    assert f"```\n{command}\n```" in (REPO / "README.md").read_text()
    assert (REPO / ".ci" / "run").read_text().splitlines()[-1] == command
