"""Compositions kept between commands (sinkexp/config/compositions.py): a kept one is Hydra's own,
and a changed config file, code file or override is composed again, never served stale."""

import os
import pickle
import shutil
from importlib.resources import files

from hydra import initialize_config_dir
from omegaconf import OmegaConf

from sinkexp.config import compositions
from sinkexp.config.compose import compose, initialized
from sinkexp.config.schema import CONFIG_MODULE, TrainConfig, register_schema
from sinkexp.config.validate import from_dictconfig


class Counted:
    """compose() through a counter of Hydra's compositions (compositions.cached's second argument)."""

    def __init__(self, monkeypatch):
        self.calls = 0
        original = compositions.cached

        def cached(overrides, composer):
            def counted():
                self.calls += 1
                return composer()

            return original(overrides, counted)

        monkeypatch.setattr("sinkexp.config.compose.cached", cached)


def test_a_kept_composition_is_hydras_composition(monkeypatch):
    counted = Counted(monkeypatch)
    overrides = ["task=damping", "seed=2", "hydra.sweep.dir=/tmp/elsewhere"]
    with initialized():
        first, again = compose(overrides), compose(overrides)
        other = compose(["task=damping", "seed=3", "hydra.sweep.dir=/tmp/elsewhere"])
    assert counted.calls == 2  # `again` was loaded, `other` (another override) composed
    assert OmegaConf.to_yaml(again) == OmegaConf.to_yaml(first)
    assert OmegaConf.get_type(again.train) is TrainConfig and OmegaConf.is_struct(again)
    assert from_dictconfig(again) == from_dictconfig(first)
    assert (first.seed, other.seed) == (2, 3)


def test_a_changed_config_file_is_composed_again(tmp_path, monkeypatch):
    """Hydra reading a copy of configs/: an edit to the copy's trigger task is seen at once."""
    counted = Counted(monkeypatch)
    configs = tmp_path / "configs"
    shutil.copytree(files(CONFIG_MODULE), configs)
    register_schema()
    task_file = configs / "task" / "trigger.yaml"
    with initialize_config_dir(str(configs), version_base="1.3"), initialized():
        before = compose(["task=trigger"]).train.steps
        assert compose(["task=trigger"]).train.steps == before and counted.calls == 1
        task_file.write_text(task_file.read_text().replace(f"steps: {before}", f"steps: {before + 7}"))
        assert compose(["task=trigger"]).train.steps == before + 7
    assert counted.calls == 2


def test_the_sources_digest_follows_every_file_it_covers(tmp_path):
    (tmp_path / "task").mkdir()
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "task" / "a.yaml").write_text("x: 1\n")
    first = compositions.files_digest(tmp_path, (".yaml",))
    (tmp_path / "__pycache__" / "b.yaml").write_text("ignored\n")
    (tmp_path / "notes.txt").write_text("not a config file\n")
    assert compositions.files_digest(tmp_path, (".yaml",)) == first
    (tmp_path / "task" / "a.yaml").write_text("x: 2\n")  # same size, new bytes
    changed = compositions.files_digest(tmp_path, (".yaml",))
    (tmp_path / "task" / "b.yaml").write_text("y: 1\n")
    added = compositions.files_digest(tmp_path, (".yaml",))
    assert len({first, changed, added}) == 3
    assert compositions.files_digest(tmp_path, (".yaml",), skip=("task",)) == compositions.files_digest(
        tmp_path / "missing", (".yaml",)
    )


def test_an_override_of_the_search_path_is_never_kept(monkeypatch, tmp_path):
    counted = Counted(monkeypatch)
    overrides = [f"hydra.searchpath=[file://{tmp_path}]"]
    with initialized():
        compose(overrides), compose(overrides)
    assert counted.calls == 2


def test_an_unreadable_entry_is_composed_again(monkeypatch):
    counted = Counted(monkeypatch)
    with initialized():
        compose(["task=broadcast"])
        for entry in (compositions.CACHE / "compositions").rglob("*.pkl"):
            entry.write_bytes(b"cut short")
        assert compose(["task=broadcast"]).task.name == "broadcast"
    assert counted.calls == 2


class Planted:
    """What a file someone put in the cache could ask for: a function to run when it is read."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_kept_file_naming_anything_but_the_configs_classes_is_refused_and_composed_again(monkeypatch, tmp_path):
    counted = Counted(monkeypatch)
    with initialized():
        compose(["task=trigger", "seed=5"])
        for entry in (compositions.CACHE / "compositions").rglob("*.pkl"):
            entry.write_bytes(pickle.dumps(Planted(tmp_path / "ran")))
        assert compose(["task=trigger", "seed=5"]).seed == 5
    assert counted.calls == 2 and not (tmp_path / "ran").exists()


def test_a_launcher_plugins_composition_is_kept(monkeypatch):
    counted = Counted(monkeypatch)
    overrides = ["hydra/launcher=slurm", "hydra.sweep.dir=/tmp/elsewhere"]
    with initialized():
        first, again = compose(overrides), compose(overrides)
    assert counted.calls == 1 and OmegaConf.to_yaml(again) == OmegaConf.to_yaml(first)
