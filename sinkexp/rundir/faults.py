"""A fault on a run's own files, as one line: the file, the cause, and what to do.

Every OSError a run meets on its files (the lock, config.yaml, the tables, the checkpoint, the
FAILED and DONE markers, train.log, the temporary files of atomic writes), at any point of its life,
ends as a RunFileError, which launch._stop prints as one line (exit status 1). The writers name the
file they were writing, since a failed write's OSError names none, or names the temporary file:
files._atomic (every file of the run directory), files.take_lock (.lock) and LogFile
(train.log). Any other OSError reaches launch._stop with its file name and is turned into one there,
by `run_file_error`. Nothing is lost: every write is atomic, so the file it would have replaced (the
last checkpoint too) is untouched, and the same command resumes the run from that checkpoint, where
one was written (the boundary's line says which: rundir/claim.py's `resumes`).
docs/rundir.md ("Faults") is the contract.
"""

from __future__ import annotations

import errno
import logging
import os
import sys

# errno -> (the cause, what to do). {folder}: the folder of the file; {access}: read or write.
PERMISSION = (
    "no permission",
    "give yourself {access} permission on {folder} and its files "
    "(chmod -R u+{flag} {folder}), or choose another hydra.run.dir or hydra.sweep.dir",
)
CAUSES = {
    errno.ENOSPC: ("no space left on the device", "free space on it"),
    errno.EDQUOT: ("the disk quota is spent", "free space within the quota, or have it raised"),
    errno.EROFS: (
        "the file system is read-only",
        "remount it read-write, or copy the outputs to a writable "
        "disk and point hydra.run.dir or hydra.sweep.dir at the copy",
    ),
    errno.EACCES: PERMISSION,
    errno.EPERM: PERMISSION,
}


class RunFileError(OSError):
    """An OSError on a run's file, with the one line that names the file, the cause and what to do."""

    def __init__(self, err: OSError, path, doing: str):
        super().__init__(err.errno, err.strerror, str(path))
        default = (err.strerror or f"{err.__class__.__name__}: {err}", "check the file system")
        cause, fix = CAUSES.get(err.errno, default)
        access = {"read": ("read", "r")}.get(doing, ("write", "w"))
        self.cause = cause
        self.line = (
            f"cannot {doing} {path}: {cause}"
            + (f" ({errno.errorcode[err.errno]})" if err.errno in CAUSES else "")
            + "; "
            + fix.format(folder=os.path.dirname(path) or ".", access=access[0], flag=access[1])
        )  # what the same command then does is the boundary's to say (claim.resumes): it knows the run

    def __str__(self) -> str:
        return self.line

    def __reduce__(self):  # a launcher's worker process sends it back pickled
        return _rebuild, (self.errno, self.strerror, self.filename, self.cause, self.line)


def _rebuild(number, strerror, filename, cause, line) -> RunFileError:
    err = RunFileError(OSError(number, strerror), filename, "access")
    err.cause, err.line = cause, line
    return err


def run_file_error(err: OSError, path=None, doing: str = "access") -> RunFileError:
    """`err` as a RunFileError naming `path` (default: the file the OSError names)."""
    if isinstance(err, RunFileError):
        return err
    return RunFileError(err, path if path is not None else (err.filename or "a file"), doing)


def note(err: BaseException, text: str) -> None:
    """Add a note to an exception as it propagates (BaseException.add_note of Python 3.11, for 3.10)."""
    err.__notes__ = [*getattr(err, "__notes__", ()), text]


def marked(err: BaseException) -> str:
    """What the run directories say about `err`: its notes (RunDir.fail: FAILED written or not), or
    "nothing written" for a stop before any run was claimed (rundir/claim.py's `left_behind` says
    what a claimed run's directory holds)."""
    return "; ".join(dict.fromkeys(getattr(err, "__notes__", ()))) or "nothing written"


class LogFile(logging.FileHandler):
    """train.log (configs/hydra/job_logging/sinkexp.yaml). A line it cannot write ends the run as
    any run file's fault does: a RunFileError from the logging call (logging's own handler would
    print a traceback and go on). The lines after it are dropped, so the process's other logging
    goes on."""

    broken = False

    def emit(self, record: logging.LogRecord) -> None:
        if self.broken:
            return
        try:
            super().emit(record)
        except OSError as err:
            self.broken = True
            raise run_file_error(err, self.baseFilename, "write") from None

    def handleError(self, record: logging.LogRecord) -> None:
        if isinstance(sys.exc_info()[1], OSError):  # called inside emit's own except: to emit above
            raise
        super().handleError(record)
