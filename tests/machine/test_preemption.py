"""A stop whose exception is lost (machine/preemption.py): a signal handled while Python runs a finaliser
(an object's __del__, a generator closed by the garbage collector) raises where Python cannot pass it
on; it is recorded first, so the run still stops at its next step, never writes DONE, and nothing of
it is printed but the stop's own line. Where the SIGTERM the probe of issue 72 saw ignored went."""

import contextlib
import io
import os
import signal

import pytest
from conftest import QUICK

from sinkexp.jobs.runner import run
from sinkexp.machine import preemption
from sinkexp.rundir import files
from sinkexp.rundir.claim import RunClaim
from sinkexp.rundir.reading import run_status
from sinkexp.train.loop import Trainer


@pytest.fixture
def handlers():
    """The stop handlers in place for the test; this process's own, and no stop recorded, after it."""
    saved = {signum: signal.getsignal(signum) for signum in preemption.STOPPING}
    preemption.stop_on_signals()
    yield
    preemption._stopping = None
    for signum, handler in saved.items():
        signal.signal(signum, handler)


class SignalledWhileCollected:
    """An object whose finaliser is where SIGTERM arrives: the handler's Interrupted is raised inside __del__."""

    def __del__(self):
        os.kill(os.getpid(), signal.SIGTERM)
        sum(range(100))  # bytecode for the handler to run in


def test_a_stop_raised_inside_a_finaliser_is_recorded_unprinted_and_raised_by_check(handlers):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        SignalledWhileCollected()  # collected at once: its Interrupted cannot leave __del__
    assert preemption.stopping() == signal.SIGTERM and err.getvalue() == ""  # no "Exception ignored" traceback
    with pytest.raises(preemption.Interrupted, match="stopped by SIGTERM at step 7"):
        preemption.check(7)


def test_a_run_whose_stop_a_finaliser_swallowed_stops_at_its_next_step(handlers, make_config, tmp_path, monkeypatch):
    original, calls = Trainer.train_step, {"n": 0}

    def train_step(self):
        calls["n"] += 1
        if calls["n"] == 12:
            SignalledWhileCollected()
        return original(self)

    monkeypatch.setattr(Trainer, "train_step", train_step)
    with pytest.raises(preemption.Interrupted, match="stopped by SIGTERM at step 12"):
        run(make_config(*QUICK), tmp_path)
    assert calls["n"] == 12 and not (tmp_path / files.DONE).exists()
    assert run_status(tmp_path) == ("interrupted", "stopped by SIGTERM at step 12")


def test_a_stop_recorded_before_the_end_never_writes_done(handlers, tmp_path):
    claim = RunClaim(tmp_path, "abcd1234")
    assert claim.take() is None
    claim.begin({"command": "measure"}, {"config_hash": "abcd1234", "end_time": None, "wall_time_s": None})
    preemption._stopping = signal.SIGINT  # its exception lost on the way
    with pytest.raises(preemption.Interrupted, match="stopped by Ctrl-C"):
        claim.end(1.0)
    claim.close()
    assert not (tmp_path / files.DONE).exists()
    with pytest.raises(preemption.Interrupted):  # nor is another directory claimed
        RunClaim(tmp_path / "next", "abcd1234").take()
    assert not (tmp_path / "next").exists()
