"""Every command's command line, generated from its declaration (`Command`; the six are declared in
sinkexp/commands/__init__.py COMMANDS): the parser, the usage line, --help and the words shell
completion offers all read the same declaration, so a flag or key added there is parsed, shown and
completed at once. A flag or key given twice is refused in one line (Hydra and argparse would each
keep the last silently), and so is any other problem with the line (OneLine).

    given = read(COMMANDS["measure"], ["-m", "gpt2", "n=8,16"])   # Given(flags=None, keys=["model=gpt2",
                                                                  #   "n=8,16"], multirun=True, ...)
    print(help_text(COMMANDS["measure"]))                         # usage, arguments, flags, keys, examples

A command's positional arguments and --flags are the fields of its `flags` dataclass, its KEY=VALUE
words the fields of its `keys` dataclass (config/settings.py, where each field's `about` says what
--help shows); a keys field marked positional may be given bare too (measure's MODEL, or model=).
"""

from __future__ import annotations

import argparse
import dataclasses
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sinkexp.config.typed import typed
from sinkexp.errors import ConfigError

COLUMN = 24  # where --help's meanings start: `    n=100               sequences ...`


@dataclass(frozen=True)
class Command:
    """One command, declared once: its line in `sinkexp --help`, its arguments, and what runs it."""

    name: str
    summary: str  # its line in `sinkexp --help`
    description: str = ""  # --help's paragraph under the usage line
    flags: type | None = None  # a dataclass: its positional arguments (metadata positional) and --flags
    keys: type | None = None  # a dataclass whose fields are its KEY=VALUE words, each with its default
    overrides: str = ""  # what KEY=VALUE words beyond `keys` are ("": none; train's: its Hydra config's keys)
    sweeps: bool = False  # -m/--multirun: every combination of comma-separated values, one job each
    examples: tuple[str, ...] = ()
    choices: Callable[[], list[str]] = list  # the first positional argument's values (reproduce's papers)
    module: str | None = None  # whose main(argv) runs it, imported only when it runs (None: train, cli.py)
    needs_transformers: bool = False  # the hf extra (sinkexp/hf/), checked before the module is imported
    loads_torch_later: bool = False  # reproduce: torch only when it trains or estimates (reproduce/run.py)

    @property
    def takes_keys(self) -> bool:
        return self.keys is not None or bool(self.overrides)


@dataclass(frozen=True)
class Flag:
    """A --flag, from a field of a command's `flags` dataclass (or the two every command may have)."""

    dest: str
    spellings: tuple[str, ...]  # the first is what the usage line and completion show
    help: str
    kind: type = bool  # bool: a switch
    listed: bool = False  # several values (--layer 0 2)
    metavar: str | None = None
    choices: tuple | None = None
    const: Any = None  # not None: the value may be left out, meaning const (train's --info)
    negatable: bool = False  # --X and --no-X, None when neither is given (reproduce's --pack)
    hidden: bool = False  # parsed, never shown (a refused old name)
    in_usage: bool = True  # False: in --help's flags, left off the usage line (train's flags for Hydra's own uses)
    default: Any = None  # what --help says it is when not given (None, False: nothing)

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        help = argparse.SUPPRESS if self.hidden else self.help
        if self.negatable:
            parser.add_argument(self.spellings[0], dest=self.dest, action=argparse.BooleanOptionalAction, help=help)
        elif self.kind is bool:
            parser.add_argument(*self.spellings, dest=self.dest, action="store_true", help=help)
        else:
            nargs = "*" if self.listed else "?" if self.const is not None else None
            parser.add_argument(
                *self.spellings, dest=self.dest, type=self.kind, nargs=nargs, const=self.const, choices=self.choices
            )

    @property
    def shown(self) -> str:
        """`--layer L ...`, `--info [all|config|...]`, `--pack|--no-pack`: the flag as usage and --help show it."""
        name = self.spellings[0]
        if self.negatable:
            return f"{name}|--no-{name[2:]}"
        value = self.metavar or ("|".join(self.choices) if self.choices else self.dest.upper())
        if self.kind is bool:
            return name
        return f"{name} {value} ..." if self.listed else f"{name} [{value}]" if self.const else f"{name} {value}"


@dataclass(frozen=True)
class Argument:
    """A positional argument: a `positional` field of the flags dataclass, or of the keys dataclass
    (then a key as well: measure's MODEL is model=)."""

    name: str
    metavar: str
    help: str
    optional: bool
    key: bool = False


HELP = Flag("help", ("--help", "-h"), "this help")
SWEEP = Flag("multirun", ("-m", "--multirun"), "a sweep: a job for every combination of comma-separated values")


def declared_flags(command: Command) -> list[Flag]:
    """The command's flags, in the order --help lists them: --help, -m, then its flags dataclass's."""
    fields = [f for f in fields_of(command.flags) if not f.metadata.get("positional")]
    hints = typing.get_type_hints(command.flags) if command.flags else {}
    return [HELP, *([SWEEP] if command.sweeps else []), *(flag_of(field, hints[field.name]) for field in fields)]


def flag_of(field: dataclasses.Field, hint: Any) -> Flag:
    about = field.metadata
    inner = [arg for arg in typing.get_args(hint) if arg is not type(None)] or [hint]
    listed = typing.get_origin(inner[0]) is list
    spelled = f"--{field.name.replace('_', '-')}"
    return Flag(
        field.name,
        (spelled, *about.get("short", ())),
        about.get("help", ""),
        kind=typing.get_args(inner[0])[0] if listed else inner[0],
        listed=listed,
        metavar=about.get("metavar"),
        choices=about.get("choices"),
        const=about.get("const"),
        negatable=about.get("negatable", False),
        hidden=about.get("hidden", False),
        in_usage=about.get("usage", True),
        default=None if field.default is dataclasses.MISSING else field.default,
    )


def arguments(command: Command) -> list[Argument]:
    """The positional arguments, in order: the flags dataclass's, then the keys dataclass's."""
    return [
        Argument(
            f.name,
            f.metadata.get("metavar", f.name.upper()),
            f.metadata["help"],
            optional(f),
            key=schema is command.keys,
        )
        for schema in (command.flags, command.keys)
        for f in fields_of(schema)
        if f.metadata.get("positional")
    ]


def fields_of(schema: type | None) -> tuple[dataclasses.Field, ...]:
    return dataclasses.fields(schema) if schema is not None else ()


def optional(field: dataclasses.Field) -> bool:
    return field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING


class OneLine(argparse.ArgumentParser):
    """argparse, but what it would print with its usage (two lines and more) is one ConfigError."""

    def error(self, message: str):
        raise ConfigError(f"{message} ({self.prog} --help)")


def parser(command: Command) -> OneLine:
    """The command's argparse parser: its flags, and every other word in `words` (read sorts them)."""
    parser = OneLine(prog=f"sinkexp {command.name}", add_help=False, allow_abbrev=False)
    parser.add_argument("words", nargs="*")
    for flag in declared_flags(command):
        flag.add_to(parser)
    return parser


@dataclass(frozen=True)
class Given:
    """A command line read by its command's declaration."""

    flags: Any  # the flags dataclass, typed and checked (None for a command without one)
    keys: list[str]  # the KEY=VALUE words in their order, a key's positional word as KEY=WORD
    words: list[str]  # the positional and KEY=VALUE words as given
    multirun: bool = False
    help: bool = False


def read(command: Command, argv: list[str]) -> Given:
    """`argv` read by the command's declaration: a KEY=VALUE word (a command that takes keys) a key,
    any other word the next positional argument; ConfigError, one line, for a flag or key given twice,
    a bad or missing value, or a word too many. Help asked is no error: Given.help, nothing checked."""
    problem = repeated(argv)
    if problem:
        raise ConfigError(problem)
    args = vars(parser(command).parse_intermixed_args(argv))
    words, asked, multirun = args.pop("words"), args.pop("help"), args.pop("multirun", False)
    bare = [word for word in words if not (command.takes_keys and is_key(word))]
    positional = arguments(command)
    if len(bare) > len(positional):
        raise ConfigError(too_many(command, bare, positional))
    given = dict(zip(positional, bare))
    keys = [f"{a.name}={given[a]}" if a in given and a.key else word for a, word in argument_words(words, given)]
    problem = repeated(keys)  # MODEL and model= too
    if problem:
        raise ConfigError(problem)
    if asked:
        return Given(None, keys, words, multirun, help=True)
    missing = [a.metavar for a in positional if not a.optional and a not in given]
    if missing:
        raise ConfigError(f"{missing[0]} is missing: {usage(command)} (sinkexp {command.name} --help)")
    values = {a.name: word for a, word in given.items() if not a.key}
    values.update({key: value for key, value in args.items() if value is not None})
    return Given(typed(command.flags, values) if command.flags else None, keys, words, multirun)


def argument_words(words: list[str], given: dict[Argument, str]) -> list[tuple[Argument | None, str]]:
    """The KEY=VALUE words and the keys' positional words, in their order, each with its argument."""
    of = {word: argument for argument, word in given.items()}
    return [(of.get(word), word) for word in words if word not in of or of[word].key]


def is_key(word: str) -> bool:
    """KEY=VALUE, +KEY=VALUE, or Hydra's ~KEY (delete)."""
    return ("=" in word or word.startswith("~")) and not word.startswith("-")


def too_many(command: Command, bare: list[str], positional: list[Argument]) -> str:
    if not positional:  # a command of KEY=VALUE words only (train): a bare word is likely a key without its name
        keys = [word for example in command.examples for word in example.split() if is_key(word)]
        shape = f" (a setting is KEY=VALUE, e.g. {keys[0]})" if command.takes_keys and keys else ""
        return f"unexpected argument {bare[0]!r}{shape}: {usage(command)}"
    last = positional[-1]
    several = f"; sweep several with -m {last.name}=A,B" if last.key and command.sweeps else ""
    return f"one {last.metavar} at a time ({', '.join(bare[len(positional) - 1 :])}){several}"


def repeated(argv: list[str]) -> str | None:
    """What is wrong when `argv` gives a flag (`--dpi`; `--pack` and `--no-pack`) or a key (`n=`,
    `+seed=`) twice, else None."""
    seen: dict[str, str] = {}
    for at, word in enumerate(argv):
        if word.startswith("--"):
            name, value = word.partition("=")[0], argv[at + 1 : at + 2]
            shown = word if "=" in word or not value or value[0].startswith("-") else f"{word} {value[0]}"
            name = name.replace("--no-", "--", 1)
        elif "=" in word and not word.startswith("-"):
            name, shown = word.partition("=")[0].lstrip("+~"), word
        else:
            continue
        if name in seen:
            return f"{name} is given twice ({seen[name]} and {shown}); give it once"
        seen[name] = shown
    return None


def usage(command: Command) -> str:
    """`usage: sinkexp measure [-m] [MODEL] [KEY=VALUE ...]`: the command, -m, its positional
    arguments, KEY=VALUE, then its flags (--help aside)."""
    words = [f"usage: sinkexp {command.name}", *(["[-m]"] if command.sweeps else [])]
    words += [f"[{a.metavar}]" if a.optional else a.metavar for a in arguments(command)]
    words += ["[KEY=VALUE ...]"] if command.takes_keys else []
    words += [
        f"[{flag.shown}]"
        for flag in declared_flags(command)[1:]
        if flag is not SWEEP and flag.in_usage and not flag.hidden
    ]
    return " ".join(words)


def override_value(value: Any) -> str:
    """A Python value as a Hydra override writes it (True -> true, None -> null)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "null" if value is None else str(value)
