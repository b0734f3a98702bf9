"""A scheduler's pre-timeout or preemption signal: checkpoint where the run is, then requeue.

Under submitit (hydra/launcher=slurm or submitit_local) the scheduler sends a signal (USR2 unless
SUBMITIT_PREEMPT_SIGNAL names another) some time before it kills a job. submitit's own handler
would resubmit the job at once, losing the steps since the last checkpoint. `watch()` puts a
handler in its place that only records the request; the training loop asks `requested()` at every
step and, at the next step that has no data drawn ahead, writes a checkpoint and raises `Requeue`;
`requeue()` then hands over to submitit's handler, which resubmits the job (while the launcher's
`max_num_timeout` budget lasts) and exits. The requeued job resumes from that checkpoint and ends
with the tables of an uninterrupted run. docs/rundir.md ("Requeue") is the contract.

SIGTERM is not this signal: outside a requeue it stops a run as Ctrl-C does, FAILED written
(launch.py).
"""
from __future__ import annotations

import os
import signal


class Requeue(Exception):
    """The run stopped at a checkpoint for the scheduler to requeue it; nothing failed."""

    def __init__(self, step: int):
        super().__init__(f"stopped at step {step} for a requeue (checkpoint written)")
        self.step = step


_request: tuple | None = None       # (signal number, frame) once the signal has arrived
_handlers: dict = {}                # submitit's handlers, by signal, while watch() replaces them


def requested() -> bool:
    return _request is not None


def watch() -> bool:
    """Record the scheduler's signal instead of acting on it, when this process is a submitit job
    (submitit's handler installed); returns whether it is one."""
    global _request
    if "SUBMITIT_EXECUTOR" not in os.environ:
        return False
    from submitit import JobEnvironment

    usr = JobEnvironment._usr_sig()
    current = signal.getsignal(usr)
    if not callable(current) or current is _record:     # submitit's handler is not there, or already ours
        return current is _record
    _request = None
    _handlers.update({usr: current, signal.SIGTERM: signal.getsignal(signal.SIGTERM)})
    signal.signal(usr, _record)
    return True


def _record(signum, frame) -> None:
    global _request
    _request = (signum, frame)


def requeue() -> None:
    """Hand the recorded signal to submitit's handler: it resubmits this job and exits the process
    (SystemExit), or raises submitit's UncompletedJobError once the requeue budget is spent.
    SIGTERM goes back to submitit's handler first: a scheduler that requeues a job also sends it
    SIGTERM, which must not mark the run FAILED."""
    signum, frame = _request
    signal.signal(signal.SIGTERM, _handlers[signal.SIGTERM])
    _handlers[signum](signum, frame)
