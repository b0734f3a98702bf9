"""Hydra's compositions kept between commands. Composing one job costs 0.07-0.2 s here (OmegaConf
merges and copies of the defaults tree), and `sinkexp reproduce all --estimate` composes about 400;
a kept composition loads in about 1 ms.

A composition is kept in the user's cache folder (XDG_CACHE_HOME, else ~/.cache) under a key of
everything it is made from: the overrides and the working directory (an entry's file name), and the
sources (its folder's name, `sources_digest`): the versions of Python, Hydra and OmegaConf, the bytes
of every config file and of sinkexp's code (the schema's dataclasses and defaults), and the files of
the installed Hydra plugins (name, size, modification time). A changed config file, task or
declaration (a declaration changes its overrides) is another key: never served stale. Overrides of
hydra.searchpath (config files outside sinkexp's) are composed every time. A kept file is read by
`Composition`, which names no global but the configs' own classes: a file that asks for anything
else is refused and composed again, never run.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import io
import json
import os
import pickle
import shutil
import sys
from collections.abc import Callable
from importlib.resources import files
from pathlib import Path

import hydra
import omegaconf
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig

CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "sinkexp"
PACKAGE = Path(__file__).resolve().parents[1]  # sinkexp/
KEEP = 4  # folders of other sources kept (another checkout, an earlier edit), the newest


def entry(overrides: list[str]) -> Path | None:
    """The file that keeps the composition of `overrides` (None: one that is never kept), inside an
    initialised Hydra."""
    if any("searchpath" in override for override in overrides):  # folders the key does not cover
        return None
    key = json.dumps([list(overrides), os.getcwd()])
    return CACHE / "compositions" / sources_digest() / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.pkl"


def is_kept(overrides: list[str]) -> bool:
    """Whether the composition of `overrides` is kept already (inside an initialised Hydra)."""
    path = entry(overrides)
    return path is not None and path.exists()


def cached(overrides: list[str], compose: Callable[[], DictConfig]) -> DictConfig:
    """The composition of `overrides`: the kept one, else `compose()`'s, kept for the next command."""
    path = entry(overrides)
    if path is None:
        return compose()
    try:
        return Composition(io.BytesIO(path.read_bytes())).load()
    except Exception:  # none yet, unreadable (cut short, another format) or refused (Composition): compose
        pass
    composed = compose()
    if not composed.hydra.searchpath:  # a config file's search path: folders the key does not cover
        keep(path, pickle.dumps(composed))
    return composed


class Composition(pickle.Unpickler):
    """Reads a kept composition and nothing else: the globals a pickle may name are the classes of
    OmegaConf's nodes, the dataclasses and enums of sinkexp's schema and of Hydra's config (its
    plugins' too), the typing forms and builtin containers their annotations use. Any other (a
    function such as os.system in a file someone put there) is refused before it runs."""

    BUILTINS = {("builtins", name) for name in ("dict", "list", "tuple", "set", "int", "float", "str", "bool")}
    OTHERS = {("collections", "defaultdict"), ("_operator", "getitem")}  # getitem: Optional[int] and the like
    TYPING = {"Any", "Optional", "Union", "Dict", "List", "Tuple"}
    SCHEMAS = ("sinkexp.config.", "sinkexp.tasks.", "hydra.conf", "hydra.types", "hydra._internal.core_plugins.")

    def find_class(self, module: str, name: str):
        if (module, name) in self.BUILTINS | self.OTHERS or (module == "typing" and name in self.TYPING):
            return super().find_class(module, name)
        classes = module.startswith(("omegaconf.", "hydra_plugins.", *self.SCHEMAS))  # checked before it is imported
        found = super().find_class(module, name) if classes else None
        if isinstance(found, type) and (
            module.startswith("omegaconf.") or dataclasses.is_dataclass(found) or issubclass(found, enum.Enum)
        ):
            return found
        raise pickle.UnpicklingError(f"a kept composition may not name {module}.{name}")


def keep(path: Path, data: bytes) -> None:
    """Write `data` to `path` atomically; the first entry of new sources removes all but the KEEP
    newest folders of other sources. A cache that cannot be written is left alone."""
    try:
        if not path.parent.exists():
            path.parent.mkdir(parents=True)
            others = sorted(path.parent.parent.iterdir(), key=lambda p: p.stat().st_mtime, reverse=True)
            for old in others[KEEP + 1 :]:
                shutil.rmtree(old, ignore_errors=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
        partial.write_bytes(data)
        os.replace(partial, path)
    except OSError:
        pass


def sources_digest() -> str:
    """What a composition is made from, hashed (the module's docstring), inside an initialised Hydra;
    checked at every call, so that a long-lived session that edits a config file composes it again."""
    digest = hashlib.sha256(f"{sys.version} {hydra.__version__} {omegaconf.__version__}".encode())
    folders = [(PACKAGE, (".py",))] + [(folder, (".py", ".yaml")) for folder in plugin_folders()]
    folders += [(folder, (".yaml", ".yml")) for folder in config_folders()]
    for folder, suffixes in folders:
        digest.update(f"{folder} {files_digest(folder, suffixes)}\n".encode())
    return digest.hexdigest()[:16]


def config_folders() -> list[Path]:
    """The folders Hydra reads config files from (configs/, installed as sinkexp.conf, and Hydra's own)."""
    folders = []
    for source in GlobalHydra.instance().config_loader().get_sources():
        if source.scheme() == "file":
            folders.append(Path(source.path))
        elif source.scheme() == "pkg":
            folders.append(Path(str(files(source.path.replace("/", ".")))))
    return folders


def files_digest(root: Path, suffixes: tuple[str, ...], skip: tuple[str, ...] = ()) -> str:
    """The files under `root` ending in `suffixes`, by path relative to it and bytes, hashed; the
    folders named in `skip` (relative to `root`) left out. A file's bytes are read again only when
    its size or modification time changes."""
    found = []
    for folder, subfolders, names in os.walk(root):
        relative = Path(folder).relative_to(root)
        subfolders[:] = [name for name in subfolders if name != "__pycache__" and str(relative / name) not in skip]
        found += [((relative / name).as_posix(), Path(folder, name)) for name in names if name.endswith(suffixes)]
    digest = hashlib.sha256()
    for relative, path in sorted(found):
        digest.update(f"{relative} {file_digest(path)}\n".encode())
    return digest.hexdigest()[:12]


@functools.lru_cache(maxsize=4096)
def _bytes_digest(path: Path, size: int, mtime_ns: int) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def file_digest(path: Path) -> str:
    stat = path.stat()
    return _bytes_digest(path, stat.st_size, stat.st_mtime_ns)


def plugin_folders() -> list[Path]:
    """The folders of the installed Hydra plugins (hydra_plugins, a namespace package)."""
    try:
        import hydra_plugins  # lazy: optional, a namespace package only where a plugin is installed
    except ImportError:
        return []
    return [Path(folder) for folder in hydra_plugins.__path__]
