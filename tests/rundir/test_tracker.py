"""wandb=true (rundir/tracker.py): an offline Weights & Biases run in the run directory with the scalars
and images TensorBoard gets, the run's config and an id a resume continues; its history is read back
here from wandb's own offline files, and a resumed run logs no step twice."""

import struct
from pathlib import Path

import pandas as pd
import pytest
from conftest import QUICK
from helpers import sinkexp, whole_and_resumed

from sinkexp.config.identity import config_hash
from sinkexp.config.schema import to_dict
from sinkexp.errors import ConfigError
from sinkexp.rundir import files
from sinkexp.rundir.reading import run_status
from sinkexp.rundir.tracker import FOLDER, run_id

wandb_internal = pytest.importorskip("wandb.proto.wandb_internal_pb2", reason="the wandb extra is not installed")

BLOCK, HEADER = 32768, struct.Struct("<IHB")  # the leveldb log framing wandb's .wandb files use
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def records(path: Path):
    """The Record messages (wandb's own protobuf schema, wandb.proto) of an offline run's .wandb file:
    after its 7-byte header (":W&B", version, magic), blocks of 32 KiB holding chunks, each a 7-byte
    header (checksum, length, type) and its bytes; a record is a FULL chunk or FIRST, MIDDLE..., LAST."""
    data = path.read_bytes()
    assert data[:4] == b":W&B"
    position, pending = 7, b""
    while position + HEADER.size <= len(data):
        if BLOCK - position % BLOCK < HEADER.size:  # a block's tail too short for a header is padding
            position += BLOCK - position % BLOCK
            continue
        _, length, kind = HEADER.unpack_from(data, position)
        chunk = data[position + HEADER.size : position + HEADER.size + length]
        position += HEADER.size + length
        if kind == 0:  # zero padding
            continue
        pending += chunk
        if kind in (FULL, LAST):
            record = wandb_internal.Record()
            record.ParseFromString(pending)
            pending = b""
            yield record


def history(run_dir: Path) -> pd.DataFrame:
    """Every history row of every offline run below <run dir>/wandb/ (a resumed run's attempts each
    write one): step, key, value (JSON text)."""
    rows = []
    for path in sorted((run_dir / FOLDER).glob("offline-run-*/run-*.wandb")):
        for record in records(path):
            if record.WhichOneof("record_type") == "history":
                items = {"/".join(item.nested_key) or item.key: item.value_json for item in record.history.item}
                rows += [(int(items["_step"]), key, value) for key, value in items.items() if not key.startswith("_")]
    return pd.DataFrame(rows, columns=["step", "key", "value"])


def run_record(run_dir: Path):
    path = next((run_dir / FOLDER).glob("offline-run-*/run-*.wandb"))
    return next(r.run for r in records(path) if r.WhichOneof("record_type") == "run")


@pytest.fixture(autouse=True)
def offline_here(monkeypatch, tmp_path):
    """wandb as a new user has it: no mode, project or console chosen; its caches in the test's folder."""
    for variable in ("WANDB_MODE", "WANDB_PROJECT", "WANDB_CONSOLE", "WANDB_QUIET", "WANDB_RUN_ID", "WANDB_RESUME"):
        monkeypatch.delenv(variable, raising=False)
    for variable in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
        monkeypatch.setenv(variable, str(tmp_path / "wandb-home"))


def test_sinkexp_train_wandb_true_writes_an_offline_run_whose_history_reads_back(make_config, tmp_path):
    result = sinkexp("train", *QUICK, "model.n_heads=2", "wandb=true", "hydra.run.dir=r", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    run_dir = tmp_path / "r"
    rows = history(run_dir)
    steps = rows.groupby("key")["step"].apply(list)
    assert steps["loss/eval/all"] == [0, 10, 20, 30] and steps["loss/train"] == [5, 10, 15, 20, 25, 30]
    metrics = pd.read_csv(run_dir / files.METRICS_CSV)
    chosen = metrics[(metrics["metric"] == "sink_attn") & (metrics["layer"] == 0)]
    expected = chosen[chosen["query_type"] == "non_trigger"].groupby("step")["value"].mean()
    logged = rows[rows["key"] == "layer0/sink_attn/non_trigger"].set_index("step")["value"].astype(float)
    assert logged.to_dict() == pytest.approx(expected.to_dict(), rel=1e-6)  # TensorBoard's scalars, the same
    images = rows[rows["key"] == "attention/layer0/width"]
    heights = rows[rows["key"] == "attention/layer0/height"]["value"].astype(int)
    assert list(images["step"]) == [0, 10, 20, 30] and set(images["value"].astype(int)) == {2 * heights.iloc[0]}
    cfg = make_config(*QUICK, "model.n_heads=2", "wandb=true")
    record = run_record(run_dir)
    assert record.run_id == run_id(config_hash(cfg), run_dir) and record.run_id.startswith(config_hash(cfg))
    assert record.project == "sinkexp" and record.display_name.endswith("r")
    config = {item.key: item.value_json for item in record.config.update}
    assert set(config) >= set(to_dict(cfg)) and config["seed"] == "0"
    assert (run_dir / FOLDER / "logged_step").read_text() == "30"
    # wandb's service writes its own log after DONE: the run still reads finished and whole (rundir/manifest.py)
    assert run_status(run_dir) == ("done", "")


def test_a_resumed_run_continues_its_wandb_run_and_logs_no_step_twice(make_config, tmp_path, kill_at_step):
    whole_dir, split_dir = whole_and_resumed(make_config(*QUICK, "wandb=true"), tmp_path, kill_at_step)
    attempts = sorted((split_dir / FOLDER).glob("offline-run-*/run-*.wandb"))
    assert len(attempts) == 2 and len({path.name for path in attempts}) == 1  # one run id, two attempts
    whole, split = history(whole_dir), history(split_dir)
    assert not split.duplicated(["step", "key"]).any()
    for key in ("loss/eval/all", "loss/train", "layer0/sink_attn/trigger"):
        assert split[split["key"] == key][["step", "value"]].values.tolist() == (
            whole[whole["key"] == key][["step", "value"]].values.tolist()
        )


def test_wandb_is_not_part_of_the_hash_and_needs_its_package(make_config, monkeypatch):
    assert config_hash(make_config("wandb=true")) == config_hash(make_config())
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    with pytest.raises(ConfigError, match=r"^wandb=true needs the wandb package: pip install -e \.\[wandb\]$"):
        make_config("wandb=true")
