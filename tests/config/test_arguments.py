"""The command line every command shares (config/arguments.py and cli.py): --help, completion and a
key or flag given twice, for each of the six commands; settings read from a dataclass; Hydra's
public API only."""

import ast
import re
from pathlib import Path

import pytest
from helpers import sinkexp

from sinkexp.cli import COMMANDS
from sinkexp.config.arguments import flags_of, repeated, settings
from sinkexp.config.settings import InterveneConfig
from sinkexp.errors import ConfigError

PACKAGE = Path(__file__).parents[2] / "sinkexp"
TWICE = {  # a command line giving one key or flag twice -> the one line it ends with
    "train": (["seed=1", "+seed=2"], "seed is given twice (seed=1 and +seed=2); give it once"),
    "measure": (["M", "n=8", "n=16"], "n is given twice (n=8 and n=16); give it once"),
    "reproduce": (["gu2025", "scale=cpu", "scale=reach"], "scale is given twice (scale=cpu and scale=reach)"),
    "report": ([".", "--dpi", "100", "--dpi=200"], "--dpi is given twice (--dpi 100 and --dpi=200); give it once"),
    "intervene": (["RUN", "--seed", "1", "--seed", "2"], "--seed is given twice (--seed 1 and --seed 2)"),
    "export": (["RUN", "--help", "--help"], "--help is given twice (--help and --help); give it once"),
}
COMPLETED = {  # the line as typed -> what completion offers
    "sinkexp tr": ["train"],
    "sinkexp ": list(COMMANDS),
    "sinkexp measure se": ["seq_len="],
    "sinkexp measure -": ["-m"],
    "sinkexp report --d": ["--dpi"],
    "sinkexp reproduce gu": ["guo2024", "gu2025"],
    "sinkexp reproduce --es": ["--estimate"],
    "sinkexp intervene --": ["--help", "--layer", "--seed", "--unfinished", "--sequences"],
    "sinkexp export --": ["--help"],
    "sinkexp train attn=rel": ["attn=relu", "attn=relu_len", "attn=relu_raw"],
    "sinkexp nope --": [],  # no such command: nothing, and no error on the prompt
}


def test_the_six_commands_are_these():
    completed = {line.split()[1] for line in COMPLETED if len(line.split()) > 2} - {"nope"}
    assert set(COMMANDS) == set(TWICE) == completed | {"train"} and len(COMMANDS) == 6


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_answers_help(command, tmp_path):
    result = sinkexp(command, "--help", cwd=tmp_path)
    assert result.returncode == 0 and f"usage: sinkexp {command}" in result.stdout.lower(), result.stdout[:300]
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("command", TWICE)
def test_a_key_or_flag_given_twice_is_one_line_and_exit_2(command, tmp_path):
    argv, line = TWICE[command]
    result = sinkexp(command, *argv, cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.startswith(f"sinkexp: error: {line}"), result.stderr
    assert len(result.stderr.splitlines()) == 1 and not list(tmp_path.iterdir())


@pytest.mark.parametrize("line", COMPLETED)
def test_completion_offers_the_commands_and_each_ones_keys(line, tmp_path, monkeypatch):
    monkeypatch.setenv("COMP_LINE", line)
    monkeypatch.setenv("COMP_POINT", str(len(line)))
    result = sinkexp("-sc", "query=bash", cwd=tmp_path)
    assert result.stdout.split() == COMPLETED[line] and result.stderr == ""


def test_settings_come_from_the_dataclass_typed_once():
    parser = flags_of(InterveneConfig, "sinkexp intervene", "")
    cfg = settings(parser, InterveneConfig, ["R", "--layer", "0", "2", "--unfinished"])
    assert cfg == InterveneConfig(run="R", layer=[0, 2], seed=0, unfinished=True, sequences=None)
    with pytest.raises(ConfigError, match=re.escape("argument --seed: invalid int value: 'x' (sinkexp intervene")):
        settings(parser, InterveneConfig, ["R", "--seed", "x"])
    assert repeated(["-m", "-m", "a=1", "b=1", "--x", "1"]) is None  # a switch twice is no conflict
    assert (
        repeated(["a=1", "~a"]) is None and repeated(["+a=1", "a=2"]) == "a is given twice (+a=1 and a=2); give it once"
    )


PRIVATE = re.compile(r"^\s*(from|import)\s+hydra\._internal\b", re.MULTILINE)


def test_no_module_imports_hydras_private_modules():
    """Hydra's public API only (pyproject.toml says what keeps hydra-core below 1.4). A string naming
    Hydra's basic launcher as a config's _target_ is no import."""
    assert PRIVATE.search("x = 1\n    from hydra._internal.utils import get_args_parser\n")  # the check can fail
    assert not PRIVATE.search("BASIC = 'hydra._internal.core_plugins.basic_launcher.BasicLauncher'\n")
    found = [str(path) for path in PACKAGE.rglob("*.py") if PRIVATE.search(path.read_text())]
    assert found == []


READERS = {  # the readers of override strings, by the module that defines them
    "sinkexp.config.compose": {"parse", "expand", "choices_of", "whole_numbers", "pack_first_values"},
    "sinkexp.commands.overrides": {"read_sweep"},
}
COMMAND_LAYER = {  # docs/glossary.md, command layer
    "sinkexp/cli.py",  # train's command line
    "sinkexp/commands/measure.py",
    "sinkexp/commands/overrides.py",
    "sinkexp/reproduce/command.py",
    "sinkexp/reproduce/sweeps.py",  # each reproduce experiment's overrides
}


def reads_overrides(source: str) -> bool:
    """Whether a module's source imports a reader of override strings."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and READERS.get(node.module, set()) & {a.name for a in node.names}:
            return True
    return False


def test_override_strings_are_read_in_the_command_layer_only():
    """Which modules import an override parser (config/compose.py's, or the command layer's reading
    into a Sweep): the commands' own only; jobs/plan.py and all below take the Sweep, read."""
    assert reads_overrides("def plan(sweep):\n    from sinkexp.config.compose import compose, parse\n")  # can fail
    assert reads_overrides("from sinkexp.commands.overrides import read_sweep\n")
    assert not reads_overrides("from sinkexp.config.compose import compose, initialized, sweeper_choices\n")
    readers = {
        str(path.relative_to(PACKAGE.parent)) for path in PACKAGE.rglob("*.py") if reads_overrides(path.read_text())
    }
    assert readers == COMMAND_LAYER
