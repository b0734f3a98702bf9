"""One fault boundary for a run's files (sinkexp/rundir/faults.py): each errno a file system gives (a full
disk, a spent quota, a read-only mount, no permission), injected at each file a run writes, ends
`sinkexp train` with one line naming the file, the cause and what to do, exit status 1, no temporary
file left, and a run that the same command resumes to an uninterrupted run's tables.

The command is planned once (composing is most of a tiny run's time): each case launches that plan
as `sinkexp train` does after planning (cli.train), into the same run directory, emptied first; the
rerun after a full disk is the whole command again."""

import contextlib
import errno
import io
import os
import shutil
from pathlib import Path

import pytest
import torch
from helpers import sinkexp

from sinkexp.commands.overrides import read_sweep
from sinkexp.jobs.launch import launch
from sinkexp.jobs.plan import Plan, plan
from sinkexp.rundir import faults
from sinkexp.rundir import files as rundir_files
from sinkexp.rundir import lifecycle as rundir_lifecycle
from sinkexp.rundir.reading import run_status

# Two steps, each evaluated and checkpointed (kept too), one thread: bit-equal resumes.
TINY = (
    "train.steps=2",
    "eval.every=1",
    "train.log_every=1",
    "train.checkpoint_every=1",
    "train.batch_size=4",
    "eval.batch_size=8",
    "device=cpu",
    "threads=1",
    "train.keep_checkpoints=true",
)
CAUSES = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "the disk quota is spent",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "no permission",
}
# file -> which of its writes fails (meta.json is written when the run starts and when it ends; the
# second checkpoint replaces the first)
FILES = {
    ".lock": 1,
    "config.yaml": 1,
    ".hydra/overrides.yaml": 1,
    "meta.json": 1,
    "meta.json at the end": 2,
    "metrics.csv": 1,
    "losses.csv": 1,
    "checkpoint.pt": 2,
    "checkpoints/step_000002.pt": 1,
    "attention.npz": 1,
    "summary.json": 1,
    "DONE": 1,
    "train.log": 1,
    ".lock's holder": 1,
    "FAILED": 1,
}


def inject(monkeypatch, run_dir: Path, name: str, code: int) -> None:
    """From now on, creating `name` in run_dir (its temporary file, as every write makes one) fails
    with `code` at its FILES-th time; train.log fails at its first line; `.lock's holder` when the
    holder's pid is written; `FAILED` fails, and so does metrics.csv, which makes the run write it."""
    fault = OSError(code, os.strerror(code))
    if name == "train.log":

        class Full(io.StringIO):
            def write(self, text):
                raise fault

        monkeypatch.setattr(faults.LogFile, "_open", lambda self: Full())
        return
    if name == ".lock's holder":

        def pwrite(*args):
            raise fault

        monkeypatch.setattr(os, "pwrite", pwrite)
        return
    if name == "FAILED":
        inject(monkeypatch, run_dir, "metrics.csv", code)
    target = run_dir / name.removesuffix(" at the end")
    real, seen = os.open, {"n": 0}

    def failing_open(path, flags, *args, **kwargs):
        path = Path(path)
        if path.parent == target.parent and (path == target or path.name.startswith(f".{target.name}.")):
            seen["n"] += 1
            if seen["n"] == FILES[name]:
                raise OSError(code, os.strerror(code), str(path))
        return real(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", failing_open)


@pytest.fixture(scope="module")
def planned(tmp_path_factory) -> Plan:
    """`sinkexp train TINY hydra.run.dir=<folder>/run`'s plan."""
    return plan(read_sweep([*TINY, f"hydra.run.dir={tmp_path_factory.mktemp('faults') / 'run'}"], multirun=False))


def launched(planned: Plan) -> tuple[int, str]:
    """The plan's run from an empty run directory, as cli.train launches it: (exit status, stderr)."""
    (run_dir,) = planned.jobs[0].run_dirs
    shutil.rmtree(run_dir, ignore_errors=True)
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        return launch(planned), err.getvalue()


@pytest.fixture(scope="module")
def whole(planned):
    """An uninterrupted run's tables, to compare resumed runs with."""
    assert launched(planned)[0] == 0
    return {
        name: (planned.jobs[0].run_dirs[0] / name).read_bytes()
        for name in (rundir_files.METRICS_CSV, rundir_files.LOSSES, rundir_files.SUMMARY)
    }


@pytest.mark.parametrize("code", list(CAUSES), ids=[errno.errorcode[code] for code in CAUSES])
@pytest.mark.parametrize("name", list(FILES))
def test_a_fault_at_any_run_file_ends_in_one_line_and_the_run_resumes(planned, monkeypatch, whole, name, code):
    (run_dir,) = planned.jobs[0].run_dirs
    inject(monkeypatch, run_dir, name, code)
    returncode, stderr = launched(planned)
    monkeypatch.undo()
    lines = stderr.strip().splitlines()
    assert returncode == 1 and len(lines) == 1, stderr
    named = {".lock's holder": ".lock", "FAILED": "metrics.csv"}.get(name, name.removesuffix(" at the end"))
    assert lines[0].startswith(f"sinkexp: error: cannot write {run_dir / named}: {CAUSES[code]}"), lines[0]
    if (run_dir / rundir_files.CHECKPOINT).exists():  # the line says what the rerun does, as the folder holds
        assert "; then the same command resumes it from its last checkpoint (" in lines[0]
    else:
        assert "; then the same command trains it from step 0, as no checkpoint was written yet (" in lines[0]
    if name == ".lock":  # before the run started: its folder made, nothing in it
        assert lines[0].endswith(f"({run_dir} left empty)") and not any(run_dir.iterdir())
    elif name == ".lock's holder":  # the lock file created, its holder not written
        assert lines[0].endswith(f"({run_dir} holds only .lock)") and [p.name for p in run_dir.iterdir()] == [".lock"]
    elif name == "FAILED":
        assert lines[0].endswith(f"(FAILED could not be written either: {CAUSES[code]})")
        assert not (run_dir / rundir_files.FAILED).exists()
    else:
        assert lines[0].endswith("(FAILED written)") and run_status(run_dir).status == "failed"
        assert (run_dir / rundir_files.FAILED).read_text().startswith("RunFileError: cannot write")
    assert not (run_dir / rundir_files.DONE).exists() and not list(run_dir.rglob("*.tmp"))
    if (run_dir / rundir_files.CHECKPOINT).exists():  # the last checkpoint written is whole
        assert torch.load(run_dir / rundir_files.CHECKPOINT, weights_only=True)["trainer"]["step"] in (1, 2)
    if code == errno.ENOSPC:  # room again: the same command finishes the run
        assert sinkexp("train", *TINY, f"hydra.run.dir={run_dir}", cwd=run_dir.parent).returncode == 0
        assert {name: (run_dir / name).read_bytes() for name in whole} == whole


def test_each_cause_says_what_to_do():
    for code, fix in (
        (errno.ENOSPC, "free space on it"),
        (errno.EDQUOT, "free space within the quota"),
        (errno.EROFS, "remount it read-write"),
        (errno.EACCES, "chmod -R u+w /x/run"),
        (errno.EPERM, "chmod -R u+w /x/run"),
    ):
        err = faults.run_file_error(OSError(code, os.strerror(code)), "/x/run/metrics.csv", "write")
        assert str(err).startswith("cannot write /x/run/metrics.csv: ") and fix in str(err), str(err)
        assert f"({errno.errorcode[code]})" in str(err) and "\n" not in str(err)
    read = faults.run_file_error(
        PermissionError(errno.EACCES, "Permission denied", "/x/run/checkpoint.pt"), doing="read"
    )
    assert str(read).startswith("cannot read /x/run/checkpoint.pt: no permission")
    assert "chmod -R u+r /x/run" in str(read)
    other = faults.run_file_error(OSError(errno.EIO, "Input/output error"), "/x/run/DONE", "write")
    assert str(other).startswith("cannot write /x/run/DONE: Input/output error; check the file system")
    import pickle  # a launcher's worker sends it back pickled

    assert str(pickle.loads(pickle.dumps(read))) == str(read)


def test_an_unreadable_checkpoint_asks_for_read_permission(planned, monkeypatch):
    """A mode-000 checkpoint (root reads it anyway, so torch.load's refusal is stood in for)."""
    (run_dir,) = planned.jobs[0].run_dirs
    assert launched(planned)[0] == 0
    (run_dir / rundir_files.DONE).unlink()  # unfinished: the rerun resumes from the checkpoint

    def unreadable(path, *args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(rundir_lifecycle.torch, "load", unreadable)
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        assert launch(planned) == 1
    (line,) = err.getvalue().strip().splitlines()
    assert line.startswith(f"sinkexp: error: cannot read {run_dir / rundir_files.CHECKPOINT}: no permission")
    assert f"chmod -R u+r {run_dir}" in line
