"""stdout's reader gone (machine/console.py): a listing, a sweep and the stream itself, each with
the pipe's reader closed before the command writes."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sinkexp.machine.console import READER_GONE, Console, guard_stdout


def test_a_write_to_a_closed_pipe_sends_the_rest_to_devnull():
    read, write = os.pipe()
    os.close(read)
    console = Console(open(write, "w", buffering=1))  # line-buffered: each line is written at once
    assert console.write("first line\n") == len("first line\n") and console.gone
    assert console.write("second\n") == len("second\n")
    console.flush()
    assert READER_GONE == 141 and not console.closed
    console.close()


def test_a_copy_of_the_console_writes_to_the_same_stream():
    import copy
    import io

    stream = io.StringIO()
    copy.copy(Console(stream)).write("kept")
    assert stream.getvalue() == "kept"


def test_stdout_is_guarded_once(monkeypatch):
    monkeypatch.setattr(sys, "stdout", sys.stdout)
    console = guard_stdout()
    assert sys.stdout is console and guard_stdout() is console and console.stream is not console


def test_a_reader_that_stays_changes_nothing():
    read, write = os.pipe()
    console = Console(open(write, "w"))
    console.write("kept\n")
    console.flush()
    console.close()
    assert os.read(read, 100) == b"kept\n" and not console.gone
    os.close(read)


def into_a_closed_pipe(args: list[str], cwd: Path, unbuffered: bool = True) -> subprocess.CompletedProcess:
    """`sinkexp ARGS` whose stdout's reader has gone before it writes (`... | head -1`, the pipe full)."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONUNBUFFERED"}
    env.update({"PYTHONUNBUFFERED": "1"} if unbuffered else {}, TQDM_DISABLE="1")
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            [sys.executable, "-m", "sinkexp", *args],
            cwd=cwd,
            env=env,
            stdout=write,
            stderr=subprocess.PIPE,
            timeout=120,
        )
    finally:
        os.close(write)


@pytest.mark.parametrize("unbuffered", [True, False], ids=["unbuffered", "buffered"])
def test_a_reader_that_closes_the_pipe_ends_a_listing_quietly(tmp_path, unbuffered):
    """The reader gone, whether a print or the last flush finds it so: exit status 141 (SIGPIPE's),
    nothing on stderr (machine/console.py)."""
    ended = into_a_closed_pipe(["reproduce", "--list"], tmp_path, unbuffered)
    assert (ended.returncode, ended.stderr) == (141, b"")


@pytest.mark.parametrize("launcher", ["basic", "parallel"])
def test_a_sweep_whose_reader_is_gone_trains_every_run(tmp_path, launcher):
    """Once the reader is gone, the console lines go nowhere and the sweep goes on: every run DONE
    (no run reads the lost line as a fault on its files), exit status 141, nothing on stderr; the
    parallel launcher's workers print to the same pipe."""
    args = ["train", "-m", "attn=softmax,relu", "train.steps=4", "eval.every=2", "threads=1", "hydra.sweep.dir=sweep"]
    args += [f"hydra/launcher={launcher}"] if launcher != "basic" else []
    ended = into_a_closed_pipe(args, tmp_path)
    assert (ended.returncode, ended.stderr) == (141, b"")
    assert len(list((tmp_path / "sweep").rglob("DONE"))) == 2
    again = into_a_closed_pipe(args, tmp_path)  # both finished: each says so on the console that is gone
    assert (again.returncode, again.stderr) == (141, b"")
