"""A scheduler's pre-timeout or preemption signal: checkpoint where the run is, then requeue; and
the signals that stop a run (`Interrupted`).

Under submitit (hydra/launcher=slurm or submitit_local) the scheduler sends a signal (USR2 unless
SUBMITIT_PREEMPT_SIGNAL names another) some time before it kills a job. submitit's own handler
would resubmit the job at once, losing the steps since the last checkpoint. `watch()` puts a
handler in its place that only records the request; the training loop asks `requested()` at every
step and, at the next step that has no data drawn ahead, writes a checkpoint and raises `stopped(step)`,
a `Requeue`; `requeue()` then hands over to submitit's handler, which resubmits the job (while the launcher's
`max_num_timeout` budget lasts) and exits. The requeued job resumes from that checkpoint and ends
with the tables of an uninterrupted run. docs/rundir.md ("Requeue") is the contract.

Outside submitit nobody requeues: SIGUSR2 (SLURM's `--signal=USR2@N` around a plain `sinkexp train`)
is recorded the same way, and at that step, its checkpoint written, the run stops as Ctrl-C and
SIGTERM stop it (`Interrupted`: FAILED says by what and at which step; the same command resumes it).
SIGTERM is not the requeue signal: outside a requeue it stops a run where it is (jobs/launch.py).

A stopping signal's exception can be lost: raised while Python runs a finaliser (an object's
`__del__`, a generator closed by the garbage collector: `importlib.metadata.version` reading
meta.json's versions, a zipfile's `__del__` after torch.save), it is printed as "Exception
ignored" and dropped, and the handler has already set later signals to be ignored. The stop is
recorded first, so `check()` raises it again where a run would claim its directory, train another
step or write DONE: no stop ends in a finished run (docs/rundir.md, "What may happen to it").
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys


class Requeue(Exception):
    """The run stopped at a checkpoint for the scheduler to requeue it; nothing failed."""

    def __init__(self, step: int):
        super().__init__(f"stopped at step {step} for a requeue (checkpoint written)")
        self.step = step


class Interrupted(KeyboardInterrupt):
    """A run stopped by a signal: Ctrl-C (SIGINT), SIGTERM (`kill`, `scancel`) where the run is, or
    SIGUSR2 outside submitit at a checkpoint. FAILED holds the message; the process exits with
    128 + the signal's number, as the signal's default action would."""

    def __init__(self, signum: int = signal.SIGINT, step: int | None = None, checkpointed: bool = False):
        self.signum, self.step, self.checkpointed = signum, step, checkpointed
        how = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        super().__init__(
            f"stopped by {how}"
            + (f" at step {step}" if step is not None else "")
            + (", a checkpoint written there" if checkpointed else "")
        )

    def __reduce__(self):
        return type(self), (self.signum, self.step, self.checkpointed)

    @classmethod
    def at(cls, err: KeyboardInterrupt, step: int | None = None) -> "Interrupted":
        """`err` (a plain KeyboardInterrupt is Ctrl-C) as an Interrupted that names `step`, unless it names one."""
        if isinstance(err, cls) and (err.step is not None or step is None):
            return err
        return cls(getattr(err, "signum", signal.SIGINT), step, getattr(err, "checkpointed", False))


STOPPING = (signal.SIGINT, signal.SIGTERM)
STARTING = "while starting (nothing written)"
_stopping: int | None = None  # the first stopping signal that arrived
_at_once: str | None = None  # start-up (or the end): a stopping signal ends the process where it is, saying this


def stop_on_signals(signals: tuple = STOPPING, at_once: bool | str = False) -> None:
    """From now on Ctrl-C (SIGINT) and SIGTERM (`kill`, `scancel`) stop the process, the first of them
    only: later ones are ignored, so that a second Ctrl-C cannot cut short the FAILED marker, a pool's
    shutdown or the one line that says what happened.

    `at_once` (the console script's first instructions, sinkexp/__main__.py, and cli.main): the
    command is starting up (imports, the plan) and has written nothing, so the signal prints its
    one line (`STARTING`, or the text given: cli.main's once the command's work is done) and ends
    the process at once; raising an exception there could land inside a C extension's import
    (torch's) and leave it broken. Otherwise (once a command's modules are loaded, and in a
    launcher's worker, which has no cli.main) the signal raises Interrupted where the process is,
    for the run's own boundary to write FAILED (jobs/launch.py); where that exception is lost in a
    finaliser, it is not printed (`_unraisable`) and `check()` raises it again."""
    global _at_once, _previous_hook
    _at_once = (STARTING if at_once is True else at_once) or None
    if sys.unraisablehook is not _unraisable:
        _previous_hook, sys.unraisablehook = sys.unraisablehook, _unraisable
    for signum in signals:
        try:
            signal.signal(signum, _interrupt)
        except ValueError:  # not the main thread (some launchers): leave the default
            pass


def _interrupt(signum, frame) -> None:
    global _stopping
    ignore_stopping_signals()
    _stopping = signum if _stopping is None else _stopping
    if _at_once:
        sys.stderr.write(f"sinkexp: {Interrupted(signum)} {_at_once}\n")
        sys.stderr.flush()
        os._exit(128 + signum)
    raise Interrupted(signum)


_previous_hook = sys.unraisablehook  # the one stop_on_signals found in place


def _unraisable(unraisable) -> None:
    """Python's hook for an exception a finaliser cannot raise: a stop's Interrupted is recorded
    already (check() raises it where the run can stop), so it is not printed; the rest as before."""
    if not isinstance(unraisable.exc_value, Interrupted):
        _previous_hook(unraisable)


def stopping() -> int | None:
    """The stopping signal that arrived, if one did: an error raised after it (an import it cut
    short, say) is read as that stop."""
    return _stopping


def check(step: int | None = None) -> None:
    """Raise the stop that arrived (Interrupted, naming `step`), if one did and its own exception was
    lost in a finaliser; nothing otherwise."""
    if _stopping is not None:
        raise Interrupted(_stopping, step)


def ignore_stopping_signals() -> None:
    """The process is stopping: a further Ctrl-C or SIGTERM changes nothing."""
    for signum in STOPPING:
        try:
            signal.signal(signum, signal.SIG_IGN)
        except ValueError:
            pass


_request: tuple | None = None  # (signal number, frame) once the signal has arrived
_handlers: dict = {}  # submitit's handlers, by signal, while watch() replaces them


def requested() -> bool:
    return _request is not None


def watch() -> bool:
    """Record the scheduler's signal instead of acting on it: submitit's (its handler installed) when
    this process is a submitit job, else SIGUSR2; returns whether it is a submitit job."""
    global _request
    if "SUBMITIT_EXECUTOR" not in os.environ:
        try:
            if signal.getsignal(signal.SIGUSR2) is not _record:
                _request = None
                signal.signal(signal.SIGUSR2, _record)
        except ValueError:  # not the main thread (some launchers): leave the default
            pass
        return False
    from submitit import JobEnvironment  # lazy: submitit comes with the slurm extra

    usr = JobEnvironment._usr_sig()
    current = signal.getsignal(usr)
    if not callable(current) or current is _record:  # submitit's handler is not there, or already ours
        return current is _record
    _request = None
    _handlers.update({usr: current, signal.SIGTERM: signal.getsignal(signal.SIGTERM)})
    signal.signal(usr, _record)
    return True


def _record(signum, frame) -> None:
    global _request
    _request = (signum, frame)


def stopped(step: int) -> BaseException:
    """What the training loop raises once it has checkpointed at `step` for the recorded signal:
    Requeue when submitit will requeue the job, else Interrupted (the run stops, FAILED written)."""
    signum = _request[0]
    return Requeue(step) if signum in _handlers else Interrupted(signum, step, checkpointed=True)


def requeue() -> None:
    """Hand the recorded signal to submitit's handler: it resubmits this job and exits the process
    (SystemExit), or raises submitit's UncompletedJobError once the requeue budget is spent.
    SIGTERM goes back to submitit's handler first: a scheduler that requeues a job also sends it
    SIGTERM, which must not mark the run FAILED."""
    signum, frame = _request
    signal.signal(signal.SIGTERM, _handlers[signal.SIGTERM])
    _handlers[signum](signum, frame)


@contextlib.contextmanager
def sigterm_stops_children():
    """While a process pool runs (sinkexp reproduce's), SIGTERM to this process alone (`kill PID`;
    Ctrl-C and scancel reach the workers too) is passed on to the pool's workers, whose runs stop as
    SIGTERM stops a run (FAILED written, resumable), and this process stops with `Interrupted`, as
    on Ctrl-C, instead of leaving its workers training on their own."""

    import multiprocessing  # lazy: 6 ms of the console script's first import, before its signal handlers

    def stop_workers(signum, frame):
        global _stopping
        ignore_stopping_signals()
        _stopping = signal.SIGTERM if _stopping is None else _stopping
        for worker in multiprocessing.active_children():
            worker.terminate()
        raise Interrupted(signal.SIGTERM)

    try:
        before = signal.signal(signal.SIGTERM, stop_workers)
    except ValueError:  # not the main thread: the signal is not ours to handle
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)
