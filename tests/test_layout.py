"""The house's size rules, and imports at the top of a file (README, "Layout"): a module or a test
file of at most 300 lines, a function of at most 60, and an import inside a function only with a
`# lazy: why` comment (a measured import cost or an optional extra) on it or on the block it opens;
and every script importable against the package as it is."""

import ast
from pathlib import Path

import pytest
from conftest import load_script

REPO = Path(__file__).parents[1]
SOURCES = sorted(path for folder in ("sinkexp", "scripts", "tests") for path in (REPO / folder).rglob("*.py"))


def names(paths):
    return [str(path.relative_to(REPO)) for path in paths]


def functions(tree):
    return [node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


def imports_inside(tree):
    """Every import statement inside a function, once (a nested function's counted with it)."""
    found = {}
    for function in functions(tree):
        for node in ast.walk(function):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found[node.lineno] = node
    return sorted(found.values(), key=lambda node: node.lineno)


def justified(lines: list[str], node) -> bool:
    """`# lazy` on the import, on another import of its run of imports, or on the comment line that
    opens the run."""
    i = node.lineno - 1
    while i >= 0 and (lines[i].strip().startswith(("import ", "from ", ")")) or lines[i].strip() == ""):
        if "# lazy" in lines[i]:
            return True
        i -= 1
    return "# lazy" in "".join(lines[node.lineno - 1 : node.end_lineno]) or (
        i >= 0 and lines[i].strip().startswith("# lazy")
    )


def test_every_module_and_test_file_is_at_most_300_lines():
    long = {name: len(path.read_text().splitlines()) for name, path in zip(names(SOURCES), SOURCES)}
    assert {name: n for name, n in long.items() if n > 300} == {}


def test_every_function_is_at_most_60_lines():
    long = {}
    for name, path in zip(names(SOURCES), SOURCES):
        for function in functions(ast.parse(path.read_text())):
            if function.end_lineno - function.lineno + 1 > 60:
                long[f"{name}:{function.lineno} {function.name}"] = function.end_lineno - function.lineno + 1
    assert long == {}


@pytest.mark.parametrize("folder", ["sinkexp", "scripts"])
def test_an_import_inside_a_function_says_why_it_is_there(folder):
    unexplained = []
    for path in sorted((REPO / folder).rglob("*.py")):
        text = path.read_text()
        lines = text.splitlines()
        for node in imports_inside(ast.parse(text)):
            if not justified(lines, node):
                unexplained.append(f"{path.relative_to(REPO)}:{node.lineno}: {lines[node.lineno - 1].strip()}")
    assert unexplained == []


def test_the_import_rule_catches_an_unexplained_import_and_takes_a_reason():
    bare = "def f():\n    import torch\n    return torch\n"
    said = "def f():\n    import torch  # lazy: 2.4 s\n    return torch\n"
    block = "def f():\n    # lazy: torch (2.4 s)\n    import torch\n\n    from x import y\n    return y\n"
    run = "def f():\n    import torch  # lazy: 2.4 s\n    import numpy\n    x = 1\n    import pandas\n"
    verdicts = [
        [justified(code.splitlines(), node) for node in imports_inside(ast.parse(code))]
        for code in (bare, said, block, run)
    ]
    assert verdicts == [[False], [True], [True, True], [True, True, False]]


@pytest.mark.parametrize("script", sorted(path.stem for path in (REPO / "scripts").glob("*.py")))
def test_every_script_imports_what_the_package_has_now(script):
    """A script's imports resolve against the package as it is (a module split or renamed under a
    benchmark breaks it at its first run, not here, otherwise); nothing runs: each has a main guard."""
    assert '__name__ == "__main__"' in (REPO / "scripts" / f"{script}.py").read_text()
    load_script(script)
