"""What a command's declaration (config/arguments.py `Command`) shows: its --help, and the words
shell completion offers after its name. Its usage line is arguments.usage (its errors quote it).

    print(help_text(COMMANDS["export"]))   # usage, arguments, flags, and each meaning beside its name
"""

from __future__ import annotations

from sinkexp.config.arguments import COLUMN, Command, arguments, declared_flags, fields_of, override_value, usage


def help_text(command: Command) -> str:
    """--help: the usage line, the description, then each argument, flag and key with its meaning
    (a key with its default: `n=100`), what other KEY=VALUE words are, and the examples."""
    lines = [usage(command), *([command.description] if command.description else [])]
    shown = arguments(command)
    if shown:
        values = command.choices()
        choices = f" (one of: {', '.join(values)})" if values else ""
        lines.append("arguments:")
        lines += [entry(a.metavar + (f" (or {a.name}=)" if a.key else ""), a.help) for a in shown]
        lines[-len(shown)] += choices  # the first argument's values
    lines.append("flags:")
    lines += [
        entry(", ".join([f.shown, *f.spellings[1:]]), f.help + default(f.default))
        for f in declared_flags(command)
        if not f.hidden
    ]
    if command.keys is not None:
        lines.append("keys (KEY=DEFAULT):")
        lines += [entry(f"{f.name}={override_value(f.default)}", f.metadata["help"]) for f in fields_of(command.keys)]
    if command.overrides:
        lines.append(f"KEY=VALUE: {command.overrides}")
    if command.examples:
        lines += ["e.g. " + command.examples[0], *(f"     {example}" for example in command.examples[1:])]
    return "\n".join(lines)


def default(value) -> str:
    """` (default 120)` for a flag whose default says something (not None, not False)."""
    return "" if value is None or value is False else f" (default {value})"


def entry(name: str, meaning: str) -> str:
    """`    n=100               sequences ...`: a name and its meaning in two columns; a name too long
    for its column has its meaning on the next line, in the column (as argparse lays it out)."""
    head = f"    {name}"
    return f"{head.ljust(COLUMN)}{meaning}" if len(head) < COLUMN else f"{head}\n{' ' * COLUMN}{meaning}"


def words(command: Command) -> list[str]:
    """What completion offers after the command's name: its first argument's values, its flags as
    usage shows them (--pack and --no-pack both) and each key as KEY=."""
    flags = [flag for flag in declared_flags(command) if not flag.hidden]
    shown = [spelled for flag in flags for spelled in (flag.shown.split("|") if flag.negatable else flag.spellings[:1])]
    return [*command.choices(), *shown, *(f"{field.name}=" for field in fields_of(command.keys))]
