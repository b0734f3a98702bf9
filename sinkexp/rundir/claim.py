"""A run directory's life from the claim to DONE or FAILED, whatever writes the run: training
(rundir/lifecycle.py's RunDir builds on it) and `sinkexp measure` (hf/runner.py). What
docs/rundir.md ("What may happen to it") promises of every run is kept here, once:

- a finished run (rundir.files.finished: DONE and the same config hash) is left untouched, and a
  directory holding another config's run is refused (`existing_run`);
- the process that writes a run holds the directory's lock (`claim`), and the temporary files of a
  killed write go;
- `RunClaim.begin` clears a previous FAILED and writes config.yaml and the opening meta.json
  (rundir/provenance.py's `opening_meta` defines its fields); `RunClaim.end` writes the closing
  meta.json, then DONE with the manifest of every file (rundir/manifest.py), last, unless a stopping
  signal arrived meanwhile; `RunClaim.fail` writes FAILED, never next to DONE;
- a stop says what it left (`left_behind`, `resumes`): FAILED only where written, a resume only
  where a checkpoint exists, "nothing written" only where nothing is.
"""

from __future__ import annotations

import os
import traceback
from pathlib import Path

from omegaconf import OmegaConf

from sinkexp.machine import preemption
from sinkexp.rundir.faults import marked, note, run_file_error
from sinkexp.rundir.files import (
    CHECKPOINT,
    CONFIG,
    DONE,
    FAILED,
    LOCK,
    META,
    SUMMARY,
    RunDirError,
    finished,
    read_json,
    take_lock,
    utc_now,
    write_json,
    write_text,
)
from sinkexp.rundir.manifest import seal


class RunClaim:
    """One process's claim on the run directory `path` of config hash `digest`. `take()` returns the
    finished run's summary (nothing touched), or takes the directory's lock and returns None; it
    raises RunDirError when the directory holds another config's run (`fix`: the keys that choose
    another directory) and RunBusy when another live process holds the lock. `close()` releases the
    lock (a dead process's lock is released by the kernel)."""

    def __init__(self, path: Path, digest: str, fix: str = "hydra.run.dir or name"):
        self.path, self.digest, self.fix = Path(path), digest, fix
        self.meta: dict = {}  # meta.json as `begin` wrote it; `end` closes it
        self._lock: int | None = None

    def check(self) -> dict | None:
        """Without touching anything: the finished run's summary, None if there is work to do, or
        RunDirError if the directory belongs to another config."""
        return existing_run(self.path, self.digest, fix=self.fix)

    def take(self) -> dict | None:
        self._lock, done = claim(self.path, self.check)
        return done

    @property
    def held(self) -> bool:
        """Whether this process holds the directory's lock (take() returned it)."""
        return self._lock is not None

    def close(self) -> None:
        if self._lock is not None:
            os.close(self._lock)  # releases the flock
            self._lock = None

    def begin(self, config: dict, meta: dict, files: dict[str, str] | None = None) -> None:
        """Clear a previous failure; write config.yaml, `files` ({relative path: text}, e.g. training's
        .hydra/) and the opening meta.json (provenance.opening_meta)."""
        (self.path / FAILED).unlink(missing_ok=True)
        self.meta = meta
        write_text(self.path / CONFIG, OmegaConf.to_yaml(OmegaConf.create(config)))
        for name, text in (files or {}).items():
            write_text(self.path / name, text)
        write_json(self.path / META, self.meta)

    def end(self, wall_time_s: float, **closing) -> None:
        """The closing meta.json (end time, wall time, and `closing`: fields the opening meta.json has,
        e.g. training's steps_per_s), then DONE, last. The run's tables are the caller's, written before."""
        unknown = sorted(set(closing) - set(self.meta))
        if unknown:
            raise ValueError(f"meta.json has no field {', '.join(unknown)} to close (provenance.opening_meta)")
        self.meta.update(end_time=utc_now(), wall_time_s=round(wall_time_s, 3), **closing)
        write_json(self.path / META, self.meta)
        preemption.check()  # a stop whose exception was lost (machine/preemption.py) never ends in DONE
        seal(self.path)

    def fail(self, err: BaseException) -> None:
        """FAILED with the reason first and the traceback after; never next to DONE (mark_failed)."""
        mark_failed(self.path, err)


def claim(path: Path, check) -> tuple[int | None, dict | None]:
    """(the lock of run directory `path`, None), a killed write's temporary files cleared; or (None, the
    summary) when `check()` (existing_run, RunClaim.check) finds the run finished, before the lock or since."""
    if (done := check()) is not None:
        return None, done
    preemption.check()  # a stop whose exception was lost: claim nothing
    path.mkdir(parents=True, exist_ok=True)
    lock = take_lock(path)
    try:
        if (done := check()) is None:  # else finished by another process since the first look
            for stale in path.glob(".*.tmp"):
                stale.unlink(missing_ok=True)
            return lock, None
    except BaseException:
        os.close(lock)
        raise
    os.close(lock)
    return None, done


def existing_run(path: Path, digest: str, fix: str = "hydra.run.dir or name") -> dict | None:
    """Without touching anything: the summary of the finished run (rundir.files.finished) of config hash
    `digest` in `path`, None if there is work to do, or RunDirError if the directory belongs to
    another config (`fix`: the keys that choose another directory; `dir or name` for measure runs) or
    holds a finished run that does not read back whole (rundir/reading.py's `damage`)."""
    if path.exists() and not path.is_dir():
        raise RunDirError(f"{path} is a file, not a run directory")
    recover = f"move the folder away and run the same command to train it again, or choose another {fix}"
    done = (path / DONE).exists()
    if done:
        from sinkexp.rundir.reading import damage  # lazy: pandas, only where a finished run is read back

        if (reason := damage(path)) is not None:  # finished, but a file of it is not as DONE lists it
            raise RunDirError(f"{path} is a finished run, but damaged: {reason}; refusing to touch it: {recover}")
    try:
        recorded = read_json(path / META).get("config_hash") if (path / META).exists() else None
    except ValueError:  # an unfinished run's meta.json that is not JSON: whose run it is cannot be told
        raise RunDirError(f"{path / META} cannot be read; refusing to touch the run: {recover}") from None
    if recorded not in (None, digest):
        raise RunDirError(
            f"{path} holds {'a finished run' if done else 'a run'} of another "
            f"config (hash {recorded}, this one {digest}); refusing to touch it: choose another {fix}"
        )
    return read_json(path / SUMMARY) if finished(path, digest) else None


def mark_failed(path: Path, err: BaseException) -> None:
    """FAILED with the reason first and the traceback after; never next to DONE. `err` carries a
    note saying whether FAILED was written (faults.marked: launch._stop's line says it)."""
    try:
        if not (path / DONE).exists():
            write_text(path / FAILED, f"{err.__class__.__name__}: {err}\n\n" + "".join(traceback.format_exception(err)))
            note(err, "FAILED written")
    except OSError as fault:  # a full disk has no room for the marker either
        note(err, f"FAILED could not be written either: {run_file_error(fault).cause}")


def left_behind(err: BaseException, dirs: list[Path]) -> str:
    """What a stopped run left, as its stop line says it: FAILED written (or why not: the notes
    mark_failed adds), else what each directory holds now: finished (DONE), nothing written (no
    folder, or an earlier attempt's files untouched), an empty folder, or a lock file (.lock)
    written and nothing else. A leftover .lock or an empty folder is never "nothing written"."""
    if getattr(err, "__notes__", None):
        return marked(err)
    said = []
    for path in dirs:
        names = {p.name for p in path.iterdir()} if path.is_dir() else None
        if names is not None and DONE in names:
            said.append(f"{path} finished (DONE)")
        elif names is None or (names - {LOCK} and not ours(path)):
            said.append("nothing written")
        elif not names:
            said.append(f"{path} left empty")
        else:
            said.append(f"only {path / LOCK} written" if names != {LOCK} else f"{path} holds only {LOCK}")
    return "; ".join(dict.fromkeys(said)) or "nothing written"


def ours(path: Path) -> bool:
    """Whether this process wrote the run's lock file (take_lock writes its pid, or truncated it to write it)."""
    try:
        holder = (path / LOCK).read_text(errors="replace").split()
    except OSError:
        return False
    return not holder or holder[:2] == ["pid", str(os.getpid())]


def resumes(dirs: list[Path], measured: bool = False) -> str:
    """What the same command does with stopped runs: leave a finished one untouched, resume each
    other from its last checkpoint, or train it from step 0 where none was written; a `sinkexp
    measure` run has no checkpoint: it is measured again."""
    waiting = [path for path in dirs if not (path / DONE).exists()]
    it, its, s = ("it", "its", "") if len(waiting) == 1 else ("them", "their", "s")
    if not waiting:
        return f"the same command leaves {'it' if len(dirs) == 1 else 'them'} untouched, as finished"
    if measured:
        return f"the same command measures {it} again"
    kept = [(path / CHECKPOINT).exists() for path in waiting]
    if all(kept):
        return f"the same command resumes {it} from {its} last checkpoint{s}"
    if not any(kept):
        return f"the same command trains {it} from step 0, as no checkpoint was written yet"
    return "the same command resumes each from its last checkpoint, or from step 0 where none was written yet"
