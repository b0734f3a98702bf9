"""The command's standard output when its reader goes away: `sinkexp reproduce --list | head -3`,
`sinkexp train ... | head -1`, a pager quit early.

Python ignores SIGPIPE and raises BrokenPipeError at the write that finds the pipe closed, wherever
that write is: in a listing, or between a run's steps, where the run's boundary would read it as a
fault on its files. `Console` takes the place of sys.stdout for the command (cli.main, and the
workers of a Hydra launcher, which print to the same pipe; reproduce's pool workers print into a
buffer of their own): the write that finds the reader gone sends the rest of the output to
os.devnull, and the command goes on, its runs written as they would be; cli.main then ends with
exit status 141 (128 + SIGPIPE, the status of a tool that SIGPIPE ends) instead of 0.
docs/rundir.md ("What may happen to it").
"""

from __future__ import annotations

import os
import signal
import sys
from typing import TextIO

READER_GONE = 128 + signal.SIGPIPE


class Console:
    """`stream` (sys.stdout), whose writes and flushes go to os.devnull once its reader is gone (`gone`)."""

    def __init__(self, stream: TextIO):
        self.stream, self.gone = stream, False

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)
        except BrokenPipeError:
            self._to_devnull()
            return len(text)

    def flush(self) -> None:
        try:
            self.stream.flush()
        except BrokenPipeError:
            self._to_devnull()

    def _to_devnull(self) -> None:
        """The descriptor now writes to os.devnull: what the stream still buffers is flushed there."""
        self.gone = True
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, self.stream.fileno())
        os.close(devnull)
        self.stream.flush()

    def __getattr__(self, name: str):  # isatty, fileno, encoding, ...: the stream's own
        if name == "stream":  # not set yet (a copy being made): no recursion through this method
            raise AttributeError(name)
        return getattr(self.stream, name)


def guard_stdout() -> Console:
    """sys.stdout as a Console, put in place once per process."""
    if not isinstance(sys.stdout, Console):
        sys.stdout = Console(sys.stdout)
    return sys.stdout
