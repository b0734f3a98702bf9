"""Build the built-in text samples beside the KJV (sinkexp/data/), which `sinkexp measure text=NAME`
and the claims on the shipped checkpoints read (reproduce/papers/shipped.py), so that every machine
measures the same bytes:

    python scripts/build_texts.py COMMIT        # the sinkexp samples as they stand at COMMIT

- `argparse`: CPython 3.11.7's Lib/argparse.py (sha256 dc1eba8a...), code of a kind both models
  were likely trained on; the PSF License Version 2 lets it be distributed with the licence and its
  copyright notice retained: CPython's LICENSE.txt goes beside it (argparse.LICENSE.txt).
- `sinkexp-docs`: sinkexp's own README and guides (DOCS) at COMMIT, Markdown prose no pre-trained
  model has seen;
- `sinkexp-code`: sinkexp's own model, evaluation and task modules (CODE) at COMMIT, code no
  pre-trained model has seen.
Each is the files' text joined by a blank line, UTF-8, xz-compressed. Nothing in sinkexp runs this
script: the built files are in the repository (sinkexp/data/).
"""

import hashlib
import lzma
import subprocess
import sys
import sysconfig
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "sinkexp" / "data"
ARGPARSE_SHA256 = "dc1eba8adfdf615986421f981337458ba1072d3e718a0f76e3224940fd74118b"  # CPython 3.11.7's
DOCS = (
    "README.md",
    "docs/glossary.md",
    "docs/tasks.md",
    "docs/metrics.md",
    "docs/models.md",
    "docs/training.md",
    "docs/sweeps.md",
    "docs/rundir.md",
)
CODE = ("sinkexp/model", "sinkexp/evaluate", "sinkexp/tasks")


def at_commit(commit: str, path: str) -> str:
    return subprocess.run(["git", "show", f"{commit}:{path}"], check=True, capture_output=True, text=True).stdout


def modules(commit: str, folder: str) -> list[str]:
    listed = subprocess.run(
        ["git", "ls-tree", "--name-only", f"{commit}:{folder}"], check=True, capture_output=True, text=True
    ).stdout.split()
    return [f"{folder}/{name}" for name in sorted(listed) if name.endswith(".py")]


def write(name: str, text: str) -> None:
    with lzma.open(DATA / name, "wt", encoding="utf-8", preset=9) as f:
        f.write(text)
    print(f"{len(text.encode())} bytes -> {DATA / name}")


def main(commit: str) -> None:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    source = (stdlib / "argparse.py").read_bytes()
    if hashlib.sha256(source).hexdigest() != ARGPARSE_SHA256:
        sys.exit(f"{stdlib / 'argparse.py'} is not CPython 3.11.7's (sha256 {ARGPARSE_SHA256[:12]}...)")
    write("argparse.py.xz", source.decode())
    (DATA / "argparse.LICENSE.txt").write_text((stdlib / "LICENSE.txt").read_text())
    write("sinkexp-docs.md.xz", "\n".join(at_commit(commit, path) for path in DOCS))
    code = [path for folder in CODE for path in modules(commit, folder)]
    write("sinkexp-code.py.xz", "\n".join(at_commit(commit, path) for path in code))


if __name__ == "__main__":
    main(*sys.argv[1:])
