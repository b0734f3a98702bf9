"""sinkexp/machine/allocator.py: glibc keeps a step's freed memory, so the next step takes no page faults."""

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from sinkexp.machine.allocator import keep_freed_memory

BENCH = Path(__file__).parents[2] / "scripts" / "bench_malloc.py"


@pytest.mark.parametrize(
    "env,says", [({"SINKEXP_MALLOC": "glibc"}, "glibc defaults"), ({"MALLOC_TRIM_THRESHOLD_": "131072"}, "the user's")]
)
def test_the_users_choice_is_left_alone(monkeypatch, env, says):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert keep_freed_memory().startswith(says)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc only")
def test_kept_memory_removes_the_steps_page_faults():
    """The benchmark's own worker, forty trigger steps per side: glibc's defaults fault in about a
    thousand pages a step (the activations handed back and mapped again), sinkexp's setting almost none.
    (Over ten steps a one-off burst of a few hundred faults on the kept side, seen on a loaded machine,
    came within 10x of glibc's count; forty steps spread it.)"""
    faults = {}
    for side in ("glibc", "keep"):
        out = subprocess.run(
            [sys.executable, str(BENCH), "--worker", "trigger", "0", "40"],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "SINKEXP_MALLOC": side},
            check=True,
        ).stdout
        faults[side] = json.loads(out.strip().splitlines()[-1])["faults_per_step"]
    assert faults["keep"] * 10 < faults["glibc"], faults
