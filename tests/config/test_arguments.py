"""The command line every command shares (config/arguments.py and cli.py): --help, completion and a
key or flag given twice, for each of the six commands; a hand-built declaration read as declared;
Hydra's public API only. What --help and completion show of a declaration: test_helptext.py."""

import ast
import re
from pathlib import Path

import pytest
from helpers import sinkexp
from toy import TOY, Flags

from sinkexp.cli import COMMANDS
from sinkexp.config.arguments import Given, read, repeated, usage
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
    "sinkexp measure -": ["--help", "-m"],
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
    cfg = read(COMMANDS["intervene"], ["R", "--layer", "0", "2", "--unfinished"]).flags
    assert cfg == InterveneConfig(run="R", layer=[0, 2], seed=0, unfinished=True, sequences=None)
    with pytest.raises(ConfigError, match=re.escape("argument --seed: invalid int value: 'x' (sinkexp intervene")):
        read(COMMANDS["intervene"], ["R", "--seed", "x"])
    assert repeated(["-m", "-m", "a=1", "b=1", "--x", "1"]) is None  # a switch twice is no conflict
    assert (
        repeated(["a=1", "~a"]) is None and repeated(["+a=1", "a=2"]) == "a is given twice (+a=1 and a=2); give it once"
    )


def test_a_hand_built_declaration_is_read_as_declared():
    """Toy (tests/config/toy.py): RUN, then MODEL (a key as well), keys, and flags of every kind."""
    given = read(TOY, ["-m", "R", "M", "n=3,4", "--layer", "0", "2", "--dpi", "7", "--no-pack", "-i"])
    assert given == Given(
        Flags(run="R", layer=[0, 2], dpi=7, pack=False, info="all"), ["model=M", "n=3,4"], ["R", "M", "n=3,4"], True
    )
    assert (
        read(TOY, ["n=3,4", "--dpi", "7", "R", "-m", "M"]).flags
        == read(TOY, ["R", "M", "-m", "n=3,4", "--dpi=7"]).flags
    )
    assert read(TOY, ["R", "--info", "config", "--old"]).flags == Flags(run="R", info="config", old=True)
    assert read(TOY, ["R"]).flags == Flags(run="R") and read(TOY, ["--help"]) == Given(None, [], [], help=True)


@pytest.mark.parametrize(
    "argv,line",
    [
        (["R", "M", "model=N"], "model is given twice (model=M and model=N); give it once"),
        (["R", "--pack", "--no-pack"], "--pack is given twice (--pack and --no-pack); give it once"),
        (["R", "M", "X"], "one MODEL at a time (M, X); sweep several with -m model=A,B"),
        (["n=2"], f"RUN is missing: {usage(TOY)} (sinkexp toy --help)"),
        (["R", "--dpi", "x"], "argument --dpi: invalid int value: 'x' (sinkexp toy --help)"),
        (["R", "--info", "nope"], "argument --info/-i: invalid choice: 'nope' (choose from 'all', 'config')"),
        (["R", "--nope"], "unrecognized arguments: --nope (sinkexp toy --help)"),
    ],
)
def test_a_hand_built_declaration_refuses_in_one_line(argv, line):
    with pytest.raises(ConfigError) as refused:
        read(TOY, argv)
    assert str(refused.value).startswith(line), refused.value


def test_a_bare_word_where_only_keys_go_says_what_a_key_looks_like():
    with pytest.raises(
        ConfigError, match=re.escape("unexpected argument 'relu' (a setting is KEY=VALUE, e.g. task=trigger)")
    ):
        read(COMMANDS["train"], ["task=trigger", "relu"])


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
