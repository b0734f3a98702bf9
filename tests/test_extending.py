"""docs/extending.md's recipes, followed as written, each in a scratch copy of the repository: every
edit the page shows is made (a new file; lines at the end of a file, or after, before or instead of
a line it quotes, which must occur once), every `$` command is run there and must exit 0 and print
the lines shown under it (or fail, where the lines shown are pytest's failure). A recipe that no
longer fits the code fails here, naming its command.

The copy is the repository's files (git's list: a few MB, tens of milliseconds); its own `sinkexp`
is the one imported there (PYTHONPATH, and `sinkexp/conf` linked to `configs/`, the layout the
installed package has), with this environment's packages. Cost: the page's commands, 14 Python processes
(a start with torch each, about 3 s) training seven small models and measuring two; about 70 s of CPU
in all on the 2-core machine, spread over the suite's two workers."""

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).parents[1]
PAGE = REPO / "docs" / "extending.md"
BIN = Path(sys.executable).parent  # the `.venv/bin/` of the page's commands
FAILED = re.compile(r"FAILED |=* ?\d+ failed")  # pytest's summary: the command is shown failing
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.M | re.S)
PLACES = {  # the sentence that ends the paragraph before an edit's block
    "new": re.compile(r"[Nn]ew file `([^`]+)`:$"),
    "end": re.compile(r"[Aa]t the end of `([^`]+)`:$"),
    "line": re.compile(r"[Ii]n `([^`]+)`, (after|before) the line (`+) ?(.+?) ?\3:$"),
    "becomes": re.compile(r"[Ii]n `([^`]+)`, the line (`+) ?(.+?) ?\2 becomes:$"),
}


@dataclass
class Edit:
    path: str
    how: str  # new, end, after, before, becomes
    text: str
    anchor: str = ""  # the start of the one line it goes after, before or instead of


@dataclass
class Command:
    line: str
    shown: list[str] = field(default_factory=list)  # lines its output must hold


def edit(paragraph: str, text: str) -> Edit:
    """The edit a block makes, from the sentence that ends the paragraph before it."""
    for how, pattern in PLACES.items():
        found = pattern.search(paragraph)
        if found and how in ("new", "end"):
            return Edit(found[1], how, text)
        if found and how == "line":
            return Edit(found[1], found[2], text, found[4])
        if found:
            return Edit(found[1], how, text, found[3])
    raise ValueError(f"a block follows {paragraph[-80:]!r}, which names no file and place for it")


def commands(text: str) -> list[Command]:
    found = []
    for line in text.splitlines():
        if line.startswith("$ "):
            found.append(Command(line[2:]))
        elif line.strip():
            found[-1].shown.append(line)
    return found


def recipes(page: str) -> dict[str, list[Edit | Command]]:
    """{a `##` section's title: its edits and commands in order}, for every section with a block."""
    found = {}
    for section in re.split(r"^## ", page, flags=re.M)[1:]:
        title, _, body = section.partition("\n")
        steps, start = [], 0
        for block in FENCE.finditer(body):
            paragraph = " ".join(body[start : block.start()].strip().split("\n\n")[-1].split())
            start = block.end()
            steps += commands(block[2]) if block[1] == "console" else [edit(paragraph, block[2])]
        if steps:
            found[title] = steps
    return found


def apply(step: Edit, root: Path) -> None:
    path = root / step.path
    if step.how == "new":
        assert not path.exists(), f"{step.path} exists already"
        path.write_text(step.text)
        return
    text = path.read_text()
    if step.how == "end":
        path.write_text(text + step.text)
        return
    lines = text.splitlines(keepends=True)
    hits = [i for i, line in enumerate(lines) if line.strip().startswith(step.anchor)]
    assert len(hits) == 1, f"{step.path}: the line {step.anchor!r} occurs {len(hits)} times, not once"
    at = hits[0] + (step.how == "after")
    lines[at : at + (step.how == "becomes")] = [step.text]
    path.write_text("".join(lines))


def scratch_copy(root: Path) -> Path:
    """The repository's files (tracked, or new and not ignored) copied to `root`."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for name in filter(None, listed.split("\0")):
        if (REPO / name).is_file():  # a tracked file deleted in the work tree is left out
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, root / name)
    (root / "sinkexp" / "conf").symlink_to(Path("..") / "configs")
    return root


def run(command: Command, root: Path) -> tuple[int, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    env |= {"PYTHONPATH": str(root), "TQDM_DISABLE": "1"}
    line = command.line.replace(".venv/bin/", f"{BIN}/")
    result = subprocess.run(line, shell=True, cwd=root, env=env, capture_output=True, text=True, timeout=600)
    return result.returncode, result.stdout + result.stderr


def words(text: str) -> str:
    return " ".join(text.split())


RECIPES = recipes(PAGE.read_text())


def test_the_page_has_its_five_recipes_and_the_copy_imports_itself(tmp_path):
    assert list(RECIPES) == [
        "A task",
        "An attention variant",
        "A metric",
        "A claim of a paper",
        "A claim on a named checkpoint",
    ]
    assert all(any(isinstance(step, Command) for step in steps) for steps in RECIPES.values())  # each is checked
    root = scratch_copy(tmp_path)
    code, said = run(Command('.venv/bin/python -c "import sinkexp.conf; print(sinkexp.conf.__file__)"'), root)
    assert code == 0 and Path(said.strip()).resolve() == (root / "configs" / "__init__.py").resolve()


def test_an_edit_names_its_place_and_its_line_occurs_once(tmp_path):
    page = "## R\n\nIn `f.py`, after the line `b = 2`:\n\n```python\nc = 3\n```\n\n```console\n$ true\nok\n```\n"
    ((added, check),) = recipes(page).values()
    assert (added, check) == (Edit("f.py", "after", "c = 3\n", "b = 2"), Command("true", ["ok"]))
    (tmp_path / "f.py").write_text("a = 1\nb = 2\n")
    apply(added, tmp_path)
    apply(Edit("f.py", "becomes", "A = 1\n", "a = 1"), tmp_path)
    assert (tmp_path / "f.py").read_text() == "A = 1\nb = 2\nc = 3\n"
    with pytest.raises(AssertionError, match="the line 'x' occurs 0 times"):
        apply(Edit("f.py", "before", "", "x"), tmp_path)
    with pytest.raises(ValueError, match="names no file and place"):
        recipes("## R\n\nSomething:\n\n```python\nc = 3\n```\n")


@pytest.mark.parametrize("title", list(RECIPES))
def test_each_recipe_followed_in_a_scratch_copy_ends_green(title, tmp_path):
    root = scratch_copy(tmp_path)
    for step in RECIPES[title]:
        if isinstance(step, Edit):
            apply(step, root)
            continue
        code, said = run(step, root)
        missing = [line for line in step.shown if words(line) not in words(said)]
        fails = any(FAILED.match(line) for line in step.shown)  # the page shows pytest failing here
        assert not missing and (code != 0) == fails, f"`{step.line}` exited {code}:\n{said[-4000:]}"
