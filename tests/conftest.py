"""Shared fixtures: configs composed as the CLI composes them, short-run overrides, a run killed mid-way."""

import atexit
import os
import shutil
import tempfile

import pytest

os.environ.setdefault("TQDM_DISABLE", "1")  # before tqdm is imported: commands run in-process print no bars
# reproduce --estimate's timings (and reproduce's time left) go to a folder of the test session's own,
# never the user's cache (sinkexp/reproduce/calibration.py reads XDG_CACHE_HOME when imported).
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="sinkexp-tests-cache-")
atexit.register(shutil.rmtree, os.environ["XDG_CACHE_HOME"], ignore_errors=True)

import torch  # noqa: E402

from sinkexp.config.compose import compose_config  # noqa: E402


def load_script(name):
    """scripts/<name>.py as a module (scripts are not a package)."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(name, Path(__file__).parent.parent / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


if "PYTEST_XDIST_WORKER" in os.environ:  # two workers on two cores: more threads each would oversubscribe
    torch.set_num_threads(1)

# Overrides for a run of a few seconds: 30 steps, evaluated and checkpointed every 10.
QUICK = (
    "train.steps=30",
    "eval.every=10",
    "train.log_every=5",
    "train.checkpoint_every=10",
    "train.batch_size=16",
    "eval.batch_size=32",
    "device=cpu",
)


@pytest.fixture(scope="session")
def make_config():
    """make_config(*overrides): a validated Config, composed as `sinkexp train` composes it."""
    return compose_config


@pytest.fixture
def kill_at_step(monkeypatch):
    """kill_at_step(cls, n): from now on cls.train_step raises KeyboardInterrupt at its n-th call, as
    a run killed mid-way would stop; kill_at_step(cls, None) restores it."""
    originals = {}

    def kill(cls, call):
        original = originals.setdefault(cls, cls.train_step)
        if call is None:
            monkeypatch.setattr(cls, "train_step", original)
            return
        calls = {"n": 0}

        def train_step(self):
            calls["n"] += 1
            if calls["n"] == call:
                raise KeyboardInterrupt
            return original(self)

        monkeypatch.setattr(cls, "train_step", train_step)

    return kill


@pytest.fixture(scope="session")
def plumbed(tmp_path_factory):
    """The plumbing paper reproduced once: (root, claims table, console output)."""
    import contextlib
    import io

    from plumbing import plumbing_paper

    from sinkexp.reproduce import reproduce
    from sinkexp.reproduce.command import decided

    root = tmp_path_factory.mktemp("reproduce")
    console = io.StringIO()
    with contextlib.redirect_stdout(console), contextlib.redirect_stderr(console):  # through the pool
        rows = reproduce(decided(["hydra.launcher.n_jobs=2"], [plumbing_paper()], root=root), command="test")
    return root, rows.set_index("claim"), console.getvalue()
