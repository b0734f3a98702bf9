"""A finished run's manifest: every file of the run with its size and SHA-256, carried by DONE, and
the one check that the run is still, byte for byte, what it was when it finished.

`seal` writes DONE (atomically, last: RunClaim.end) as JSON: `finished` (the UTC time, what DONE
held alone before manifests), `files` ({path below the run: {size, sha256}}) and `sha256`, DONE's
own checksum (of the other two), so that a byte of DONE changed or cut is named as DONE's, never
read as another file's. `differences`
compares the folder with it: each file listed and missing, of another size or another hash, and
each file in scope that is not listed, is one problem naming the file ("metrics.csv (size
differs)"). DONE without a manifest (written before it existed: one ISO time) is `None`: such a run
keeps the earlier checks (rundir/reading.py) and is listed as unverified.

Scope: every file below the run directory, except what legitimately changes after DONE:
- DONE itself (it carries the manifest) and `.lock`, which any process taking the lock rewrites
  (a rerun takes it before it reads DONE: rundir/claim.py);
- `report/` and `inspect/`: what readers write into a finished run's folder
  (`sinkexp report RUN_DIR`, examples/inspect_run.py);
- `wandb/`: a tracker's mirror of the run, not a result any reader uses; wandb's own service writes
  its logs there after the run has ended (`debug-core.log`), and `wandb sync` its marks;
- train.log past its size at DONE: a job logs into its first run's train.log, so a pack's or
  replicas' runs finishing later, or another job of a sweep run in the same process before Hydra
  opens its own log, append lines to a finished run's log. Its first `size` bytes are checked.
Anything else added is `unexpected`. docs/rundir.md ("The manifest") is the contract; the cost of
hashing every file on every check is measured there (scripts/bench_manifest.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

from sinkexp.rundir.files import DONE, LOCK, utc_now, write_text

OUTSIDE = {DONE, LOCK}  # files at the top of the run folder the manifest leaves out
READERS = {"report", "inspect"}  # folders readers write into a finished run
TRACKERS = {"wandb"}  # folders a tracker's own processes write into after the run ended
GROWS = {"train.log"}  # files checked up to their size at DONE: later lines may be appended
LEGACY = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?([+-]\d\d:\d\d|Z)?\n?")  # DONE before manifests
CHUNK = 1 << 20


def run_files(path: Path) -> dict[str, Path]:
    """The run's files in the manifest's scope, by their path below `path` (with "/")."""
    found = {}
    for folder, dirs, names in os.walk(path):
        top = Path(folder) == Path(path)
        dirs[:] = sorted(d for d in dirs if not (top and d in READERS | TRACKERS))
        for name in sorted(names):
            if not (top and name in OUTSIDE):
                found[Path(folder, name).relative_to(path).as_posix()] = Path(folder, name)
    return found


def digest(path: Path, size: int | None = None) -> str:
    """SHA-256 of the file's bytes (its first `size` bytes when given)."""
    sha, left = hashlib.sha256(), size
    with open(path, "rb") as handle:
        while left is None or left > 0:
            block = handle.read(CHUNK if left is None else min(CHUNK, left))
            if not block:
                break
            sha.update(block)
            left = None if left is None else left - len(block)
    return sha.hexdigest()


def done_text(finished: str, files: dict) -> str:
    """DONE's bytes for a time and a manifest: JSON with its own checksum, one way only."""
    body = {"finished": finished, "files": files}
    checksum = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
    return json.dumps({**body, "sha256": checksum}, indent=1) + "\n"


def seal(path: Path) -> None:
    """Write DONE: the time and the manifest of every file in scope (written, like every file, atomically)."""
    files = {name: {"size": file.stat().st_size, "sha256": digest(file)} for name, file in run_files(path).items()}
    write_text(Path(path) / DONE, done_text(utc_now(), files))


def manifest(path: Path) -> dict | None:
    """DONE's manifest ({name: {size, sha256}}); None for a DONE written before manifests (a time
    alone); ValueError naming DONE for one that is neither, or not byte for byte what `seal` wrote."""
    try:
        text = (Path(path) / DONE).read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise ValueError(f"{DONE} (cannot be read: {err.__class__.__name__})") from None
    if LEGACY.fullmatch(text):
        return None
    try:
        done = json.loads(text)
        if text == done_text(done["finished"], done["files"]):  # its checksum, and every byte, as written
            return done["files"]
    except (ValueError, KeyError, TypeError, AttributeError):
        pass
    raise ValueError(f"{DONE} (cut or changed: it is not the manifest it was written as)")


def differences(path: Path, files: dict) -> list[str]:
    """Each file of the run that is not as `files` (the manifest) lists it: "NAME (missing | size
    differs | hash differs | unexpected)", in the manifest's order, then the unexpected ones."""
    present = run_files(path)
    problems = []
    for name, entry in files.items():
        file = present.get(name)
        try:
            size = file.stat().st_size if file is not None else None
            if size is None:
                problems.append(f"{name} (missing)")
            elif size != entry["size"] and not (name in GROWS and size > entry["size"]):
                problems.append(f"{name} (size differs)")
            elif digest(file, entry["size"] if name in GROWS else None) != entry["sha256"]:
                problems.append(f"{name} (hash differs)")
        except OSError as err:  # no read permission, an I/O error
            problems.append(f"{name} (cannot be read: {err.strerror or err.__class__.__name__})")
    problems += [f"{name} (unexpected)" for name in present if name not in files]
    return problems
