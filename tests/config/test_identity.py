"""A run's device kind is part of what it is (identity.config_hash): CPU runs keep the names they had
before the kind counted, a CUDA run is another run, a directory of one kind is never continued on the
other, and load_run rebuilds a run on the kind it trained on."""

import pytest
from conftest import QUICK

from sinkexp import load_run
from sinkexp.commands.overrides import read_sweep
from sinkexp.config.identity import config_hash
from sinkexp.config.schema import run_configs
from sinkexp.errors import ConfigError
from sinkexp.jobs.plan import plan
from sinkexp.jobs.runner import run
from sinkexp.machine import devices
from sinkexp.rundir import files, lifecycle, manifest

# Hashes of CPU runs written before the device kind counted (meta.json of runs trained at commit c973904).
PINNED = {
    ("task=trigger", "train.steps=300"): "ca78f5ea",
    ("task=trigger", "train.steps=300", "seed=1"): "5531625c",
    ("task=backcopy", "task.sampler=multinomial", "train.steps=60"): "01c3c4db",
    ("task=trigger", "train.steps=100", "train.weight_decay=0.1"): "ee852dd7",
    (): "96365c1e",
}


@pytest.mark.parametrize("overrides", list(PINNED))
@pytest.mark.parametrize("device", ["auto", "cpu"])
def test_cpu_runs_keep_their_hashes(make_config, overrides, device, monkeypatch):
    monkeypatch.setattr(devices, "cuda_status", lambda: (False, None))  # auto: the CPU, as here
    cfg = make_config(*overrides, f"device={device}")
    assert config_hash(cfg) == config_hash(cfg, "cpu") == PINNED[overrides]
    assert lifecycle.RunDir("unused", cfg).digest == PINNED[overrides]


@pytest.mark.parametrize("overrides", list(PINNED))
def test_a_cuda_run_is_another_run(make_config, overrides, monkeypatch):
    cuda = config_hash(make_config(*overrides, "device=cuda"))
    assert cuda != PINNED[overrides]
    assert config_hash(make_config(*overrides, "device=cuda:1")) == config_hash(make_config(*overrides), "cuda") == cuda
    monkeypatch.setattr(devices, "cuda_status", lambda: (True, None))  # auto where a GPU is usable
    assert config_hash(make_config(*overrides)) == cuda


def test_a_packs_runs_get_the_kind_too(make_config):
    cfg = make_config("train.steps=100", "pack={train.weight_decay:[0.0,0.1]}", "device=cuda")
    hashes = [config_hash(member) for member in run_configs(cfg)]
    assert len(set(hashes)) == 2 and PINNED[("task=trigger", "train.steps=100", "train.weight_decay=0.1")] not in hashes


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory, make_config):
    path = tmp_path_factory.mktemp("cpu_run")
    run(make_config(*QUICK), path)
    return path


def test_a_cpu_run_is_not_continued_on_cuda(cpu_run, make_config):
    with pytest.raises(lifecycle.RunDirError) as err:
        lifecycle.RunDir(cpu_run, make_config(*QUICK, "device=cuda")).check()
    message = str(err.value)
    assert "\n" not in message and "trained on cpu, this one trains on cuda (device=cuda)" in message
    assert "use device=cpu" in message
    assert lifecycle.RunDir(cpu_run, make_config(*QUICK)).check() is not None  # the same kind: finished, left alone


def test_a_cuda_run_is_not_continued_on_the_cpu(cpu_run, make_config, tmp_path):
    import shutil

    cfg = make_config(*QUICK)
    shutil.copytree(cpu_run, tmp_path / "cuda_run")
    meta = files.read_json(tmp_path / "cuda_run" / files.META)
    files.write_json(tmp_path / "cuda_run" / files.META, {**meta, "config_hash": config_hash(cfg, "cuda")})
    with pytest.raises(lifecycle.RunDirError, match="trained on cuda, this one trains on cpu .*use device=cuda"):
        lifecycle.RunDir(tmp_path / "cuda_run", cfg).check()


def test_the_plan_refuses_another_kinds_directory_in_one_line(cpu_run):
    """On a login node (the jobs run on GPU nodes), a plan for CUDA into the CPU run's directory."""
    with pytest.raises(ConfigError, match="trained on cpu, this one trains on cuda"):
        plan(
            read_sweep([*QUICK[:-1], "device=cuda", "hydra/launcher=slurm", f"hydra.run.dir={cpu_run}"], multirun=False)
        )


def test_load_run_loads_on_the_kind_the_run_trained_on(cpu_run, tmp_path):
    import shutil

    assert load_run(cpu_run).batch.inputs.device.type == "cpu"
    with pytest.raises(lifecycle.RunDirError, match="trained on cpu, so it loads on cpu only .*drop device=cuda"):
        load_run(cpu_run, device="cuda")
    shutil.copytree(cpu_run, tmp_path / "cuda_run")  # as if trained on a GPU
    meta = files.read_json(tmp_path / "cuda_run" / files.META)
    files.write_json(tmp_path / "cuda_run" / files.META, {**meta, "device": {**meta["device"], "resolved": "cuda:0"}})
    manifest.seal(tmp_path / "cuda_run")
    if devices.usable_gpus():
        pytest.skip("this machine has a GPU: tests/machine/test_gpu.py loads a real GPU run")
    with pytest.raises(lifecycle.RunDirError, match="trained on cuda:0, so it loads on cuda only .*no usable GPU"):
        load_run(tmp_path / "cuda_run")
