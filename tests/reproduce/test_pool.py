"""reproduce's pool (sinkexp/reproduce/pool.py): what its stop line says of the runs it was running is
what their folders hold: how many were stopped, how many marked FAILED, and where each resumes (a
checkpoint, or step 0 where none was written; the probe of issue 72 saw a resume promised for a run
that had none); a worker stopped while it waits for another process's run starts no further job."""

import signal
from pathlib import Path
from types import SimpleNamespace

from sinkexp.machine.preemption import Interrupted
from sinkexp.reproduce import pool
from sinkexp.reproduce.pool import stopped_runs
from sinkexp.rundir import files
from sinkexp.rundir.manifest import seal


def job(*dirs: Path) -> SimpleNamespace:
    return SimpleNamespace(runs=tuple((path, "abcd1234") for path in dirs))


def test_the_stop_line_counts_what_the_running_runs_left(tmp_path):
    early, late, claimed, done, queued = (tmp_path / name for name in ("early", "late", "claimed", "done", "queued"))
    for path in (early, late, claimed, done):
        path.mkdir()
    for path in (early, late):
        (path / files.FAILED).write_text("Interrupted: stopped by SIGTERM at step 3\n")
    (late / files.CHECKPOINT).write_bytes(b"")
    files.write_json(done / files.META, {"config_hash": "abcd1234"})
    seal(done)  # finished just before the stop: not counted as stopped
    assert stopped_runs([job(late), job(done)]) == (
        "1 running run stopped, 1 of them marked FAILED; the same command resumes it from its last checkpoint"
    )
    assert stopped_runs([job(early)]) == (
        "1 running run stopped, 1 of them marked FAILED; the same command trains it from step 0, as no checkpoint "
        "was written yet"
    )
    assert stopped_runs([job(early, late), job(claimed), job(queued)]) == (  # queued: handed over, never started
        "3 running runs stopped, 2 of them marked FAILED; the same command resumes each from its last checkpoint, "
        "or from step 0 where none was written yet"
    )
    assert stopped_runs([job(done)]) == "no run was stopped before it finished"


def test_a_worker_stopped_while_it_waits_for_another_process_starts_no_further_job(tmp_path, monkeypatch):
    started = []
    monkeypatch.setattr(pool, "_stopped", False)
    monkeypatch.setattr(pool, "execute", lambda job, **_: started.append(job))

    def stopped_while_waiting(run_dir):  # SIGTERM arrives while another process trains the run
        raise Interrupted(signal.SIGTERM)

    monkeypatch.setattr(pool, "wait_for_lock", stopped_while_waiting)
    held, queued = job(tmp_path / "held"), job(tmp_path / "queued")
    assert pool._in_worker(held)[1] == ""  # the stop ends this job, not the worker's loop over its queue
    assert pool._in_worker(queued) == (0.0, "") and started == [held]
