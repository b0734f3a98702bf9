"""Shared helpers: compose a validated Config the way the CLI does, without running Hydra's main."""
import pytest
from hydra import compose, initialize_config_module

from sinkexp.cli import CONFIG_MODULE, _register_resolvers
from sinkexp.config import from_dictconfig, register_schema


@pytest.fixture(scope="session")
def make_config():
    register_schema()
    _register_resolvers()

    def make(*overrides: str):
        with initialize_config_module(CONFIG_MODULE, version_base="1.3"):
            return from_dictconfig(compose("config", overrides=list(overrides)))

    return make
