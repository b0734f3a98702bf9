"""The one error type a user sees for a bad setting (a single line naming the key), and the one line a
command's main prints when it refuses (`refuse`)."""

import difflib
import re
import sys
from typing import Any, Iterable

from sinkexp.machine import preemption


class ConfigError(ValueError):
    """A value the user chose cannot run; the message is one line naming the key."""


def refuse(message: Any, code: int = 2) -> int:
    """Print `sinkexp: error: MESSAGE` on stderr and return the exit code a command's main returns
    with it: 2 for bad input (the default), 1 for a run or a file that failed.

    A refusal after Ctrl-C or SIGTERM is that stop's doing (its exception lost in a finaliser, the
    state it cut short failing later: Hydra's composition, say), so the stop is raised instead, for
    cli.main's one line and exit status 128 + the signal (machine/preemption.py)."""
    preemption.check()
    print(f"sinkexp: error: {message}", file=sys.stderr)
    return code


def choices_error(key: str, value: Any, choices: Iterable) -> ConfigError:
    choices = [str(choice) for choice in choices]
    return ConfigError(f"{key}={value!r} is not valid{closest(value, choices)}; choose one of: {', '.join(choices)}")


def nearest(given: Any, choices: Iterable[str]) -> str | None:
    """The choice closest to `given` when one is close (difflib's ratio >= 0.6, sinkexp's threshold), else None."""
    match = difflib.get_close_matches(str(given), list(choices), n=1, cutoff=0.6)
    return match[0] if match else None


def closest(given: Any, choices: Iterable[str], prefix: str = "") -> str:
    """` (did you mean PREFIX+X?)` for the nearest choice X, or '' when none is close."""
    match = nearest(given, choices)
    return f" (did you mean {prefix}{match}?)" if match else ""


def unknown_key(
    key: str, valid: Iterable[str], parent: str, among: Iterable[str] | None = None, meant: str | None = None
) -> ConfigError:
    """`KEY: unknown key (did you mean ...?); valid keys under 'PARENT': ...`: the closest of `valid` to
    the key's last part, or of `among` (every dotted key) to the whole key when its section is misspelt,
    or `meant` where the caller knows (another command's name for one of these keys)."""
    valid = sorted(valid)
    where = f"under '{parent}'" if parent else "at the top level"
    leaf = key[len(parent) + 1 :] if parent else key
    hint = closest(key, among) if among is not None else closest(leaf, valid, f"{parent}." if parent else "")
    hint = f" (did you mean {meant}?)" if meant else hint
    return ConfigError(f"{key}: unknown key{hint}; valid keys {where}: {', '.join(valid)}")


# OmegaConf's words for a value its schema type cannot take, as a user would say what is wanted
WANTED = {"Integer": "a whole number (e.g. 1000 or 1e3)", "Float": "a number", "Boolean": "true or false"}
NOT_CONVERTED = re.compile(r"Value '(.*)' (?:of type '\w+' could not be converted to (\w+)|is not a valid (bool))")


def omegaconf_message(err: Exception) -> str:
    """One line from an OmegaConf error: its first line plus the full key it names; a value its
    type cannot take as `KEY=VALUE is not valid; it must be ...`."""
    first = str(err).splitlines()[0]
    key = getattr(err, "full_key", None)
    refused = NOT_CONVERTED.search(first)
    wanted = refused and WANTED.get(refused.group(2) or "Boolean")  # group 3: "bool"
    if key and wanted:
        return f"{key}={refused.group(1)!r} is not valid; it must be {wanted}"
    return f"{key}: {first}" if key and key not in first else first
