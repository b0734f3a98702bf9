"""`sinkexp reproduce --list` (reproduce/command.py): on a terminal each line fits its width and a last
line says how to see them whole; --wide, a pipe or a file get the whole lines."""

import os
import pty
import subprocess
import sys

from sinkexp.reproduce.command import list_papers
from sinkexp.reproduce.papers import PAPERS


def test_list_cuts_each_line_to_the_width_and_says_how_to_see_it_whole():
    whole = list_papers(PAPERS).splitlines()
    cut = list_papers(PAPERS, columns=100).splitlines()
    assert max(map(len, whole)) > 100 and max(map(len, cut)) <= 100
    assert cut[-1] == "(lines cut at the terminal's 100 columns; --wide, or a pipe or file, shows them whole)"
    for full, short in zip(whole, cut):  # each line is its whole line, or the start of it and "..."
        assert short == full or (short.endswith("...") and full.startswith(short[:-3]) and len(short) == 100)
    assert list_papers(PAPERS, columns=10_000).splitlines() == whole  # nothing cut: no note


def run_on_a_terminal(*args, columns=90):
    """`sinkexp reproduce ARGS` with its stdout a terminal of `columns` columns (a pseudo-terminal)."""
    parent, child = pty.openpty()
    env = {**os.environ, "COLUMNS": str(columns)}
    process = subprocess.Popen([sys.executable, "-m", "sinkexp.cli", "reproduce", *args], stdout=child, env=env)
    os.close(child)
    out = b""
    while True:
        try:
            chunk = os.read(parent, 65536)
        except OSError:  # the terminal closed: the command has ended
            break
        if not chunk:
            break
        out += chunk
    os.close(parent)
    assert process.wait(timeout=60) == 0
    return out.decode().replace("\r\n", "\n").splitlines()


def test_the_command_fits_a_terminal_and_wide_or_a_pipe_shows_whole_lines():
    fitted = run_on_a_terminal("--list")
    assert max(map(len, fitted)) <= 90 and fitted[-1].startswith("(lines cut at the terminal's 90 columns")
    wide = run_on_a_terminal("--list", "--wide")
    piped = subprocess.run([sys.executable, "-m", "sinkexp.cli", "reproduce", "--list"], capture_output=True, text=True)
    assert wide == piped.stdout.splitlines() == list_papers(PAPERS).splitlines()


def test_the_command_line_is_decided_once_into_reproduce_settings():
    """What reproduce reads of its KEY=VALUE words, read once (command.decided) and handed down:
    nothing below the command parses an override again (tests/config/test_arguments.py)."""
    from sinkexp.reproduce.command import decided

    mine = decided(["scale=reach", "device=cuda", "hydra.launcher.n_jobs=3", "seed=1,2"])
    assert (mine.scale, mine.device, mine.workers, mine.launcher) == ("reach", "cuda", 3, False)
    assert mine.lines() == ["scale=reach", "device=cuda", "seed=1,2"]  # n_jobs: reproduce's own pool size
    assert mine.at_cpu().lines() == ["device=cuda", "seed=1,2"] and mine.at_cpu().scale == "cpu"
    slurm = decided(["hydra/launcher=slurm", "hydra.launcher.n_jobs=3"])
    assert slurm.launcher and slurm.lines() == ["hydra/launcher=slurm", "hydra.launcher.n_jobs=3"]
    plain = decided([])
    assert (plain.scale, plain.device, plain.workers, plain.launcher, plain.keys) == ("cpu", "auto", None, False, set())
