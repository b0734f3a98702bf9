"""What a command's declaration shows (config/helptext.py, and arguments.usage): the usage line,
--help and completion of a hand-built declaration, line for line; and for every command, that what
completion offers is what its parser takes and its --help describes."""

from pathlib import Path

import pytest
from toy import TOY

from sinkexp.cli import COMMANDS
from sinkexp.config.arguments import arguments, declared_flags, fields_of, override_value, read, usage
from sinkexp.config.helptext import entry, help_text, words


def test_the_usage_line_has_each_argument_key_and_flag_as_declared():
    assert usage(TOY) == (
        "usage: sinkexp toy [-m] RUN [MODEL] [KEY=VALUE ...] [--layer L ...] [--dpi N] [--pack|--no-pack] "
        "[--info [all|config]]"
    )


def test_help_is_each_argument_flag_and_key_with_its_meaning():
    assert help_text(TOY).splitlines() == [
        usage(TOY),
        "A toy command.",
        "arguments:",
        "    RUN                 a run (one of: a, b)",
        "    MODEL (or model=)   a model",
        "flags:",
        "    --help, -h          this help",
        "    -m, --multirun      a sweep: a job for every combination of comma-separated values",
        "    --layer L ...       layers",
        "    --dpi N             pixels (default 120)",
        "    --pack|--no-pack    pack",
        "    --info [all|config], -i",  # too long for its column: the meaning on the next line
        "                        print",
        "    --rare              in --help only",
        "keys (KEY=DEFAULT):",
        "    model=null          a model",
        "    n=100               sequences",
        "    perturb=false       perturbed too",
        "e.g. sinkexp toy R",
        "     sinkexp toy -m R n=1,2",
    ]


def test_completion_offers_the_values_flags_and_keys_but_not_a_hidden_flag():
    assert words(TOY) == ["a", "b", "--help", "-m", "--layer", "--dpi", "--pack", "--no-pack", "--info", "--rare"] + [
        "model=",
        "n=",
        "perturb=",
    ]


SAMPLE = {int: "3", str: "x", Path: "x"}  # a value of each type a flag takes, as typed


@pytest.mark.parametrize("name", [name for name in COMMANDS if name != "train"])  # train's: Hydra's, from its config
def test_each_flag_and_key_is_offered_described_and_parsed(name):
    """Every declared flag and key: completion offers it, --help shows it, and the parser sets its
    field (a flag) or passes it on (a key)."""
    command = COMMANDS[name]
    offered, helped = words(command), help_text(command).splitlines()
    required = ["R" for argument in arguments(command) if not argument.optional and not argument.key]
    for flag in declared_flags(command):
        assert not flag.hidden or flag.spellings[0] not in offered
        if flag.hidden or flag.dest in ("help", "multirun"):
            continue
        spelled = flag.shown.split("|") if flag.negatable else flag.spellings[:1]
        assert set(spelled) <= set(offered) and any(line.startswith(f"    {flag.shown}") for line in helped)
        value = flag.choices[0] if flag.choices else SAMPLE.get(flag.kind)
        parsed = getattr(read(command, [*required, flag.spellings[0], *([value] if value else [])]).flags, flag.dest)
        assert parsed == (True if value is None else [int(value)] if flag.listed else flag.kind(value))
    for field in fields_of(command.keys):
        assert (
            f"{field.name}=" in offered
            and entry(f"{field.name}={override_value(field.default)}", field.metadata["help"]) in helped
        )
        assert read(command, [*required, f"{field.name}=v"]).keys == [f"{field.name}=v"]


def test_the_train_flags_are_hydras_spellings():
    given = read(COMMANDS["train"], ["-c", "job", "--resolve", "seed=1", "-m", "-cn", "config"])
    assert (given.flags.cfg, given.flags.resolve, given.flags.config_name, given.keys, given.multirun) == (
        "job",
        True,
        "config",
        ["seed=1"],
        True,
    )
    assert (
        read(COMMANDS["train"], ["--info"]).flags.info == "all"
        and read(COMMANDS["train"], ["-sc"]).flags.shell_completion
    )
