"""The one error type a user sees for a bad setting: a single line naming the key."""

import difflib
from typing import Any, Iterable


class ConfigError(ValueError):
    """A value the user chose cannot run; the message is one line naming the key."""


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


def omegaconf_message(err: Exception) -> str:
    """One line from an OmegaConf error: its first line plus the full key it names."""
    first = str(err).splitlines()[0]
    key = getattr(err, "full_key", None)
    return f"{key}: {first}" if key and key not in first else first
