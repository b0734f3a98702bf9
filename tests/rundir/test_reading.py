"""A run finished before DONE carried a manifest (DONE: a time alone) keeps the earlier checks
(rundir/reading.py's `damage`: it reads back whole): each of its files cut in half, the same command
refuses in one line naming the file and touches nothing, `sinkexp report` lists the run as damaged
with that reason, and load_run names the file; whole, it is `unverified`. Runs with a manifest:
tests/rundir/test_manifest.py."""

import re

import pytest
from conftest import QUICK
from helpers import sinkexp

from sinkexp.analysis.load import load_run
from sinkexp.report.runs import collect
from sinkexp.rundir import files
from sinkexp.rundir.files import RunDirError
from sinkexp.rundir.reading import damage

RUN = (*QUICK, "threads=1")
FILES = [files.CONFIG, files.META, files.SUMMARY, files.METRICS_CSV, files.LOSSES]
BEFORE_MANIFESTS = "2026-12-04T02:47:26+00:00\n"  # DONE as runs wrote it before manifests


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("whole")
    assert sinkexp("train", *RUN, "hydra.run.dir=run", cwd=root).returncode == 0
    (root / "run" / files.DONE).write_text(BEFORE_MANIFESTS)
    return root / "run"


def contents(run_dir):
    return {p.relative_to(run_dir): p.read_bytes() for p in sorted(run_dir.rglob("*")) if p.is_file()}


def test_a_whole_finished_run_has_no_damage(finished_run):
    assert damage(finished_run) is None
    assert collect(finished_run)[0]["status"].tolist() == ["unverified"]


@pytest.mark.parametrize("name", FILES)
def test_a_finished_run_with_a_file_cut_short_is_refused_reported_and_not_loaded(finished_run, tmp_path, name):
    run_dir = tmp_path / "run"
    for path, data in contents(finished_run).items():
        (run_dir / path).parent.mkdir(parents=True, exist_ok=True)
        (run_dir / path).write_bytes(data[: len(data) // 2] if str(path) == name else data)
    before = contents(run_dir)
    reason = damage(run_dir)
    assert reason is not None and name in reason, reason

    again = sinkexp("train", *RUN, "hydra.run.dir=run", cwd=tmp_path)
    (line,) = again.stderr.strip().splitlines()
    assert again.returncode == 2 and f"{run_dir} is a finished run, but damaged: {reason}" in line
    assert "move the folder away" in line and contents(run_dir) == before  # nothing written

    runs, finals = collect(run_dir)
    assert runs[["status", "reason"]].values.tolist() == [["damaged", reason]] and finals.empty
    with pytest.raises(RunDirError, match=f"^{re.escape(f'{run_dir}: damaged: {reason}')}") as err:
        load_run(run_dir)
    assert "\n" not in str(err.value)
