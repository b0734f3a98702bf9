"""Shared helpers: compose a validated Config the way the CLI does, without running Hydra's main."""
import pytest

from sinkexp.cli import compose_config


@pytest.fixture(scope="session")
def make_config():
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
