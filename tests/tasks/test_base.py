"""What every task shares (sinkexp/tasks/base.py): a data file (task.corpus, task.bigram_table,
measure's text=) is a regular file, or one line naming the key and what it is, never a read that
blocks (a named pipe waits for a writer; a device never ends)."""

import os
import socket
import threading

import pytest

from sinkexp.errors import ConfigError
from sinkexp.hf.sources import read_text
from sinkexp.tasks.base import read_data_file


@pytest.fixture
def not_files(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(tmp_path / "socket"))
    yield {"pipe": "a named pipe", "socket": "a socket", "/dev/zero": "a device", str(tmp_path): "a folder"}
    server.close()


def refused(read, key: str, path: str) -> str:
    """The ConfigError `read(key, path)` raises, read in a thread so that a read that blocks fails the test."""
    said = {}

    def attempt():
        try:
            read(key, path)
        except ConfigError as err:
            said["error"] = str(err)

    reader = threading.Thread(target=attempt, daemon=True)
    reader.start()
    reader.join(20)
    if reader.is_alive():  # blocked on the pipe: a writer lets it go
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail(f"reading {path} blocked")
    return said.get("error", "")


def test_a_data_file_that_is_not_a_regular_file_is_refused_in_one_line(tmp_path, not_files):
    for name, kind in not_files.items():
        path = name if name.startswith("/") else str(tmp_path / name)
        assert refused(read_data_file, "task.corpus", path) == f"task.corpus={path} is {kind}; give a regular file"
        assert refused(lambda key, text: read_text(text), "text", path) == f"text={path} is {kind}; give a regular file"


def test_the_command_refuses_a_named_pipe_as_the_corpus(tmp_path, not_files):
    from helpers import sinkexp

    result = sinkexp("train", "task=lm", f"task.corpus={tmp_path / 'pipe'}", "train.steps=5", cwd=tmp_path)
    assert result.returncode == 2 and result.stderr == (
        f"sinkexp: error: task.corpus={tmp_path / 'pipe'} is a named pipe; give a regular file\n"
    )
