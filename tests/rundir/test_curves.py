"""tensorboard=true (rundir/curves.py): each evaluation's losses, per-layer sink metrics and attention
maps in the run's event files, read back here; a resumed run shows no step twice."""

import pandas as pd
import pytest
from conftest import QUICK
from helpers import whole_and_resumed

from sinkexp.config.identity import config_hash
from sinkexp.errors import ConfigError
from sinkexp.jobs.runner import run
from sinkexp.rundir import files
from sinkexp.rundir.curves import FOLDER

event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")


def curves(run_dir):
    accumulator = event_accumulator.EventAccumulator(str(run_dir / FOLDER), size_guidance={"scalars": 0, "images": 0})
    accumulator.Reload()
    return accumulator


def test_each_evaluation_is_in_the_event_files(make_config, tmp_path):
    run(make_config(*QUICK, "model.n_heads=2", "tensorboard=true"), tmp_path / "r")
    read = curves(tmp_path / "r")
    assert [e.step for e in read.Scalars("loss/eval/all")] == [0, 10, 20, 30]
    assert [e.step for e in read.Scalars("loss/train")] == [5, 10, 15, 20, 25, 30]
    metrics = pd.read_csv(tmp_path / "r" / files.METRICS_CSV)
    chosen = metrics[(metrics["metric"] == "sink_attn") & (metrics["layer"] == 0)]
    expected = chosen[chosen["query_type"] == "non_trigger"].groupby("step")["value"].mean()
    logged = {e.step: e.value for e in read.Scalars("layer0/sink_attn/non_trigger")}
    assert logged == pytest.approx(expected.to_dict(), rel=1e-6)
    images = read.Images("attention/layer0")
    assert [e.step for e in images] == [0, 10, 20, 30] and images[0].height * 2 == images[0].width  # 2 heads


def test_a_resumed_run_shows_no_step_twice(make_config, tmp_path, kill_at_step):
    whole, split = map(curves, whole_and_resumed(make_config(*QUICK, "tensorboard=true"), tmp_path, kill_at_step))
    for tag in ("loss/eval/all", "loss/train", "layer0/sink_attn/trigger"):
        assert [(e.step, e.value) for e in split.Scalars(tag)] == [(e.step, e.value) for e in whole.Scalars(tag)]
    assert [e.step for e in split.Images("attention/layer0")] == [0, 10, 20, 30]


def test_tensorboard_is_not_part_of_the_hash_and_needs_its_package(make_config, monkeypatch):
    assert config_hash(make_config("tensorboard=true")) == config_hash(make_config())
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    with pytest.raises(ConfigError, match=r"^tensorboard=true needs the tensorboard package: pip install"):
        make_config("tensorboard=true")
