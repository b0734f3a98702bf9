"""The one error type a user sees for a bad setting: a single line naming the key."""

from typing import Any, Iterable


class ConfigError(ValueError):
    """A value the user chose cannot run; the message is one line naming the key."""


def choices_error(key: str, value: Any, choices: Iterable) -> ConfigError:
    return ConfigError(f"{key}={value!r} is not valid; choose one of: {', '.join(map(str, choices))}")


def omegaconf_message(err: Exception) -> str:
    """One line from an OmegaConf error: its first line plus the full key it names."""
    first = str(err).splitlines()[0]
    key = getattr(err, "full_key", None)
    return f"{key}: {first}" if key and key not in first else first
