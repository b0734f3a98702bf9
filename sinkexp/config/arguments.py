"""What every command's command line shares, decided here once: a flag or key given twice is refused
in one line (Hydra and argparse would each keep the last silently), a bad flag is one line too, and
a command whose settings are a dataclass (config/settings.py) gets its flags, --help and completion
from the dataclass's fields.

    parser = flags_of(InterveneConfig, "sinkexp intervene", description)   # argparse, from the fields
    cfg = settings(parser, InterveneConfig, argv)                        # the typed, checked settings
"""

from __future__ import annotations

import argparse
import dataclasses
import typing

from sinkexp.config.typed import typed
from sinkexp.errors import ConfigError


class OneLine(argparse.ArgumentParser):
    """argparse, but what it would print with its usage (two lines and more) is one ConfigError."""

    def error(self, message: str):
        raise ConfigError(f"{message} ({self.prog} --help)")


def repeated(argv: list[str]) -> str | None:
    """What is wrong when `argv` gives a flag (`--dpi`) or a key (`n=`, `+seed=`) twice, else None."""
    seen: dict[str, str] = {}
    for at, word in enumerate(argv):
        if word.startswith("--"):
            name, value = word.partition("=")[0], argv[at + 1 : at + 2]
            shown = word if "=" in word or not value or value[0].startswith("-") else f"{word} {value[0]}"
        elif "=" in word and not word.startswith("-"):
            name, shown = word.partition("=")[0].lstrip("+~"), word
        else:
            continue
        if name in seen:
            return f"{name} is given twice ({seen[name]} and {shown}); give it once"
        seen[name] = shown
    return None


def flags_of(schema: type, prog: str, description: str, epilog: str | None = None) -> OneLine:
    """An argparse parser whose arguments are the dataclass's fields: a field marked `positional`
    (its metadata) an argument, the others --flags; a bool a switch, a list several values. Each
    field's metadata `help` and `metavar` are what --help shows."""
    parser = OneLine(prog=prog, description=description, epilog=epilog, formatter_class=Raw, allow_abbrev=False)
    hints = typing.get_type_hints(schema)
    for field in dataclasses.fields(schema):
        about, kind = dict(field.metadata), hints[field.name]
        inner = [arg for arg in typing.get_args(kind) if arg is not type(None)]
        listed = typing.get_origin(inner[0] if inner else kind) is list
        base = typing.get_args(inner[0])[0] if listed else (inner[0] if inner else kind)
        options = {"help": about.get("help"), "metavar": about.get("metavar")}
        if about.get("positional"):
            optional = field.default is not dataclasses.MISSING
            parser.add_argument(field.name, nargs="?" if optional else None, **options)
        elif base is bool:
            parser.add_argument(f"--{field.name}", action="store_true", help=options["help"])
        else:
            parser.add_argument(f"--{field.name}", type=base, nargs="*" if listed else None, **options)
    return parser


class Raw(argparse.RawDescriptionHelpFormatter):
    """The description and epilog's lines as they are (a legend's columns)."""


def options(parser: argparse.ArgumentParser) -> list[str]:
    """A parser's --flags but those it hides, for completion (argparse has no public list of them)."""
    shown = [action for action in parser._actions if action.help != argparse.SUPPRESS]
    return [flag for action in shown for flag in action.option_strings if flag.startswith("--")]


def settings(parser: argparse.ArgumentParser, schema: type, argv: list[str]):
    """The dataclass `schema` from the command line `argv`, typed and checked as every command's
    settings are (config/typed.py); ConfigError, one line, for anything wrong."""
    problem = repeated(argv)
    if problem:
        raise ConfigError(problem)
    given = {key: value for key, value in vars(parser.parse_args(argv)).items() if value is not None}
    return typed(schema, given)
