"""A finished run is whole byte for byte (rundir/manifest.py): DONE lists every file of the run with its
size and SHA-256, and one check (rundir/reading.py's `damage`) is what the plan, `report`, `--list`
and load_run read. Each file of a finished run cut at 12 places (its head, inside, its tail, one byte
left) and one byte of it changed: every case is damaged, naming the file, everywhere (the plan's
check and the command, report's collect, --list, load_run; intervene and export for the last), and
nothing is overwritten."""

import json
import re
import shutil

import pytest
from conftest import QUICK
from helpers import sinkexp

from sinkexp.analysis.intervene import main as intervene
from sinkexp.analysis.load import load_run
from sinkexp.errors import ConfigError
from sinkexp.hf.export import check_run
from sinkexp.jobs.plan import check_run_dir
from sinkexp.report.listing import listing
from sinkexp.rundir import files, manifest
from sinkexp.rundir.files import RunDirError
from sinkexp.rundir.reading import collect, damage, run_status

RUN = (*QUICK, "threads=1", "train.keep_checkpoints=true")
FILES = [
    "config.yaml",
    ".hydra/config.yaml",
    ".hydra/hydra.yaml",
    ".hydra/overrides.yaml",
    "meta.json",
    "metrics.csv",
    "losses.csv",
    "summary.json",
    "checkpoint.pt",
    "checkpoints/step_000010.pt",
    "attention.npz",
    "train.log",
    "DONE",
]


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("whole")
    assert sinkexp("train", *RUN, "hydra.run.dir=run", cwd=root).returncode == 0
    return root / "run"


def contents(run_dir):
    return {p.relative_to(run_dir): p.read_bytes() for p in sorted(run_dir.rglob("*")) if p.is_file()}


def damaged_versions(data: bytes) -> dict[str, bytes]:
    """The file cut at 12 places (its first bytes kept, or its head cut off) and one byte of it changed."""
    n = len(data)
    cuts = {
        f"cut at {at}": data[:at] for at in sorted({0, 1, n // 10, n // 4, n // 3, n // 2, 2 * n // 3, n - 2, n - 1})
    }
    cuts.update({"head cut by 1": data[1:], "head cut by half": data[n // 2 :], "one byte left": data[-1:]})
    middle = n // 2
    cuts["a byte changed"] = data[:middle] + bytes([data[middle] ^ 0x01]) + data[middle + 1 :]
    return {how: cut for how, cut in cuts.items() if cut != data}


def test_done_carries_the_manifest_of_every_file(finished_run):
    done = json.loads((finished_run / files.DONE).read_text())
    on_disk = {p.relative_to(finished_run).as_posix() for p in finished_run.rglob("*") if p.is_file()}
    assert set(done["files"]) == on_disk - {"DONE", ".lock"} and set(FILES) - {"DONE"} <= set(done["files"])
    for name, entry in done["files"].items():
        assert entry == {"size": (finished_run / name).stat().st_size, "sha256": manifest.digest(finished_run / name)}
    assert run_status(finished_run) == ("done", "") and damage(finished_run) is None


@pytest.mark.parametrize("name", FILES)
def test_every_cut_and_changed_byte_is_damaged_naming_the_file_and_nothing_is_overwritten(finished_run, tmp_path, name):
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    original = (run_dir / name).read_bytes()
    versions = damaged_versions(original)
    assert len(versions) >= 11
    for how, data in versions.items():
        (run_dir / name).write_bytes(data)
        before = contents(run_dir)
        reason = damage(run_dir)
        assert reason is not None and reason.startswith(name), (how, reason)
        with pytest.raises(ConfigError, match=re.escape(f"is a finished run, but damaged: {reason}")):
            check_run_dir(run_dir, "any", "hydra.run.dir")  # what the rerun's plan asks first
        runs, finals = collect(run_dir)
        assert runs[["status", "reason"]].values.tolist() == [["damaged", reason]] and finals.empty
        header, line, why = listing(run_dir, width=300)
        assert line.split()[0] == "damaged" and why.strip() == reason, how
        with pytest.raises(RunDirError, match=re.escape(f"damaged: {reason}")):
            load_run(run_dir)
        assert contents(run_dir) == before, how  # nothing written
    with pytest.raises(ConfigError, match=re.escape(f"is damaged: {reason}")):  # sinkexp export
        check_run(run_dir)
    assert intervene([str(run_dir)]) == 2 and contents(run_dir) == before  # sinkexp intervene
    if name != "DONE":  # the command itself, once per file: one line, exit 2, nothing touched
        again = sinkexp("train", *RUN, f"hydra.run.dir={run_dir}", cwd=tmp_path)
        (line,) = again.stderr.strip().splitlines()
        assert again.returncode == 2 and f"{run_dir} is a finished run, but damaged: {name} (" in line, line
        assert contents(run_dir) == before


def test_lines_appended_to_train_log_and_what_readers_write_keep_it_done(finished_run, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    with open(run_dir / "train.log", "a") as log:  # a later run of its job logged here
        log.write("[s1] step 30 eval ...\n")
    for reader in ("report/runs.csv", "inspect/attention.png"):
        (run_dir / reader).parent.mkdir()
        (run_dir / reader).write_text("a reader's output\n")
    (run_dir / files.LOCK).write_text("pid 1 on elsewhere\n")  # a rerun's claim rewrote the lock
    assert run_status(run_dir).status == "done"
    (run_dir / "notes.txt").write_text("added\n")
    (run_dir / files.SUMMARY).unlink()
    assert damage(run_dir) == "summary.json (missing), notes.txt (unexpected)"
    (run_dir / "train.log").write_bytes(b"")
    assert damage(run_dir).startswith("summary.json (missing), train.log (size differs), notes.txt (unexpected)")


def test_a_run_finished_before_manifests_is_unverified(finished_run, tmp_path):
    """Its DONE holds a time alone: its tables are read back whole as before (tests/rundir/test_reading.py)."""
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    (run_dir / files.DONE).write_text("2026-12-04T02:47:26+00:00\n")  # DONE as runs wrote it before manifests
    (run_dir / "checkpoint.pt").write_bytes(b"changed")  # no manifest to check it against
    assert run_status(run_dir).status == "unverified" and damage(run_dir) is None
    runs, finals = collect(run_dir)
    assert runs["status"].tolist() == ["unverified"] and not finals.empty  # finished: reported
    assert listing(run_dir)[1].startswith("unverified")


def test_a_measured_run_is_sealed_too(tmp_path):
    pytest.importorskip("transformers")
    from hf_models import tiny

    run_dir = tmp_path / "run"
    done = sinkexp(
        "measure", str(tiny("gpt2", tmp_path / "model")), "n=4", "seq_len=16", f"dir={run_dir}", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    listed = json.loads((run_dir / files.DONE).read_text())["files"]
    assert {"config.yaml", "meta.json", "metrics.csv", "losses.csv", "summary.json", "inputs.npz"} <= set(listed)
    data = (run_dir / "inputs.npz").read_bytes()
    (run_dir / "inputs.npz").write_bytes(data[:-1])
    assert damage(run_dir) == "inputs.npz (size differs)" and run_status(run_dir).status == "damaged"


def test_a_finished_runs_log_that_its_jobs_next_run_appends_to_stays_done(tmp_path):
    """train.replicas=2: the job's log is its first run's train.log; the second run, resumed alone by the
    same command, logs there after the first run's DONE. The first run stays done (manifest.GROWS)."""
    args = ("train", "-m", "seed=0", "train.replicas=2", *QUICK, "threads=1", f"hydra.sweep.dir={tmp_path}")
    assert sinkexp(*args, cwd=tmp_path).returncode == 0
    first, second = sorted(tmp_path.glob("trigger/softmax/L1/s*"))
    (second / files.DONE).unlink()  # killed after its last checkpoint
    size = (first / "train.log").stat().st_size
    assert sinkexp(*args, cwd=tmp_path).returncode == 0
    assert (first / "train.log").stat().st_size > size and not (second / "train.log").exists()
    assert run_status(first) == ("done", "") and run_status(second) == ("done", "")
