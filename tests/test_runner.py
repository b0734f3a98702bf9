"""The run directory's guarantees: a finished run is never touched, a killed run resumes to the
same tables as an uninterrupted one, a different config is refused."""
import pytest

from sinkexp import rundir as R
from sinkexp.runner import RunDirError, run
from sinkexp.train import Trainer

QUICK = ("train.steps=30", "eval.every=10", "train.log_every=5", "train.checkpoint_every=10",
         "train.batch_size=16", "eval.batch_size=32", "device=cpu")


def read(run_dir, name):
    return (run_dir / name).read_bytes()


def test_killed_run_resumes_to_the_same_tables(make_config, tmp_path, kill_at_step):
    cfg = make_config(*QUICK, "model.n_heads=2")
    run(cfg, tmp_path / "whole")

    kill_at_step(Trainer, 25)
    with pytest.raises(KeyboardInterrupt):
        run(cfg, tmp_path / "split")
    assert (tmp_path / "split/FAILED").exists() and not (tmp_path / "split/DONE").exists()
    kill_at_step(Trainer, None)
    run(cfg, tmp_path / "split")            # resumes from the step-20 checkpoint
    assert (tmp_path / "split/DONE").exists() and not (tmp_path / "split/FAILED").exists()
    for name in (R.METRICS, R.LOSSES, R.SUMMARY):
        assert read(tmp_path / "split", name) == read(tmp_path / "whole", name), name


def test_finished_run_is_left_untouched_and_other_configs_refused(make_config, tmp_path):
    cfg = make_config(*QUICK)
    run(cfg, tmp_path)
    stamps = {p: p.stat().st_mtime_ns for p in tmp_path.iterdir()}
    run(cfg, tmp_path)
    assert {p: p.stat().st_mtime_ns for p in tmp_path.iterdir()} == stamps
    with pytest.raises(RunDirError, match="another config"):
        run(make_config(*QUICK, "seed=1"), tmp_path)
    assert {p: p.stat().st_mtime_ns for p in tmp_path.iterdir()} == stamps
