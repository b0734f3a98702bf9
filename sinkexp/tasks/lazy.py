"""torch, imported on its first use rather than when a module is imported.

The task files hold their config dataclasses, which are part of the config schema
(sinkexp/config/schema.py). They import torch through here, so that reading the schema (`import
sinkexp.config.schema`, `sinkexp reproduce --list`, a paper's declaration checks) does not pay torch's
import (~2 s); any attribute of `torch` loads it. This is the recipe of the Python documentation
(importlib, "Implementing lazy imports"); a process that imported torch already gets it as it is.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType


def lazy_module(name: str) -> ModuleType:
    """`name`'s module, executed when an attribute of it is first read."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module


torch = lazy_module("torch")
