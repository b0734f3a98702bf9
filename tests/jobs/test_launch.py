"""The plan and the launch: each job composed and validated once per command, run from the plan
without composing again, and run directories whose names outlive the code that wrote them."""

import pytest
from conftest import QUICK
from omegaconf import OmegaConf

from sinkexp import cli
from sinkexp.commands.overrides import read_sweep
from sinkexp.config import compose as compose_module
from sinkexp.config import validate as validate_module
from sinkexp.config.compose import compose, initialized
from sinkexp.config.identity import config_hash
from sinkexp.config.validate import from_dictconfig
from sinkexp.jobs.launch import execute, hydra_files
from sinkexp.jobs.plan import plan, planned_job
from sinkexp.jobs.runner import run
from sinkexp.rundir.files import CONFIG, finished
from sinkexp.rundir.lifecycle import RunDir
from sinkexp.rundir.reading import run_status


@pytest.fixture
def counted(monkeypatch):
    """Count Hydra's compositions (all in sinkexp/config/compose.py) and sinkexp's validations in this process."""
    calls = {"composed": 0, "validated": []}
    compose, validate = compose_module.hydra_compose, validate_module.validate

    def counting_compose(*args, **kwargs):
        calls["composed"] += 1
        return compose(*args, **kwargs)

    def counting_validate(cfg):
        calls["validated"].append((cfg.attn.name, cfg.seed))
        return validate(cfg)

    monkeypatch.setattr(compose_module, "hydra_compose", counting_compose)
    monkeypatch.setattr(validate_module, "validate", counting_validate)
    return calls


def test_a_sweep_composes_and_validates_each_job_once(tmp_path, monkeypatch, counted):
    monkeypatch.chdir(tmp_path)
    assert cli.train(["-m", "attn=softmax,relu", "seed=0,1", "name=once", *QUICK]) == 0
    # one composition without the sweep (its launcher, an experiment's grid), then one per job
    assert counted["composed"] == 1 + 4
    assert sorted(counted["validated"]) == [("relu", 0), ("relu", 1), ("softmax", 0), ("softmax", 1)]
    assert len([p for p in (tmp_path / "outputs/sweeps/once").rglob("DONE")]) == 4


@pytest.mark.parametrize("multirun", [False, True])
def test_a_single_run_is_composed_once_as_its_job_would_be(tmp_path, monkeypatch, counted, multirun):
    """Its job is the master composition: the same config as composing the job on its own."""
    monkeypatch.chdir(tmp_path)
    overrides = ["task=damping", "hydra.job.name=alone", "seed=4", "train.lr=1e-3", *QUICK]
    (job,) = plan(read_sweep(overrides, multirun=multirun)).jobs
    assert counted["composed"] == 1
    own = [o for o in overrides if not o.startswith("hydra.")]
    with initialized():
        alone = compose(own + ["hydra.job.name=alone"])
    expected = planned_job(0, own, alone, from_dictconfig(alone), multirun)
    assert OmegaConf.to_container(job.composed) == OmegaConf.to_container(expected.composed)
    assert job.digests == expected.digests and job.config == expected.config


def test_a_planned_job_runs_without_composing_again(tmp_path, monkeypatch):
    """What reproduce's pool workers do: run the planned job as it is."""
    planned = plan(read_sweep([f"hydra.sweep.dir={tmp_path}", "seed=3", *QUICK], multirun=True))

    def refuse(*args, **kwargs):
        raise AssertionError("composed again")

    monkeypatch.setattr(compose_module, "hydra_compose", refuse)
    monkeypatch.setattr(validate_module, "validate", refuse)
    (job,) = planned.jobs
    execute(job, sweep=True, parallel=True)
    ((run_dir, digest),) = job.runs
    assert finished(run_dir, digest) and (run_dir / "train.log").exists() and (run_dir / ".hydra/config.yaml").exists()


@pytest.mark.parametrize("overrides", [["task=trigger"], ["task=lm", "attn=sink_kv", "train.optim=sgd"]])
def test_hydra_files_are_omegaconfs_yaml(tmp_path, overrides):
    """.hydra/config.yaml and hydra.yaml: the text OmegaConf.to_yaml writes of the job's config."""
    (job,) = plan(read_sweep([f"hydra.run.dir={tmp_path}", *overrides], multirun=False)).jobs
    task_cfg = OmegaConf.create({key: value for key, value in job.composed.items() if key != "hydra"})
    files = hydra_files(job, job.composed.hydra)
    assert files["config.yaml"] == OmegaConf.to_yaml(task_cfg)
    assert files["hydra.yaml"] == OmegaConf.to_yaml(
        OmegaConf.create({"hydra": OmegaConf.to_container(job.composed.hydra)})
    )


def test_a_pool_worker_returns_once_a_run_another_process_trains_has_ended(tmp_path):
    """reproduce's pool worker skips a run whose lock another process holds and returns only once that
    process lets go, so the pool counts the run by how it ended there (as launch does)."""
    import threading

    from sinkexp.reproduce.pool import _in_worker

    (job,) = plan(read_sweep([f"hydra.sweep.dir={tmp_path}", *QUICK], multirun=True)).jobs
    ((run_dir, digest),) = job.runs
    execute(job, sweep=True)
    done = (run_dir / "DONE").read_text()
    (run_dir / "DONE").unlink()  # the other process's run, its last step trained, not yet DONE
    holder = RunDir(run_dir, job.configs[0])
    assert holder.open() is None  # it holds the lock (another open file of this process)
    order = []

    def finish():  # the other process ends the run, then lets go of it
        (run_dir / "DONE").write_text(done)
        order.append("finished there")  # before the lock goes: the worker may return at once
        holder.close()

    threading.Timer(2.0, finish).start()
    _, err = _in_worker(job)
    order.append("worker returned")
    assert "is being trained by" in err and "skipped here" in err, err
    assert order == ["finished there", "worker returned"] and finished(run_dir, digest)


@pytest.mark.parametrize(
    "overrides,digest",
    [
        (("task=trigger",), "96365c1e"),
        (("task=damping",), "a98183c9"),
        (("task=backcopy", "attn=relu", "scale=paper"), "85ed3860"),
        (("task=lm",), "62b3b899"),
        (("task=broadcast", "attn=sink_kv"), "ea8ef7c7"),
        (("task=damping_dynamics", "scale=paper"), "f166ca3c"),
    ],
)
def test_run_names_do_not_change_with_the_code(make_config, overrides, digest):
    """Config hashes of the defaults as the first one-home-per-default commit found them: a run
    directory written before keeps its name, so it is found finished and not trained again."""
    assert config_hash(make_config(*overrides)) == digest


def test_a_run_written_before_later_keys_existed_loads_and_is_skipped(tmp_path, monkeypatch, make_config):
    """schema.LATER_KEYS: a config.yaml without the keys added since reads them at their earlier
    value, and the planned run of the same config finds the directory finished."""
    from omegaconf import OmegaConf

    from sinkexp import load_run
    from sinkexp.config.schema import LATER_KEYS

    overrides = [f"hydra.sweep.dir={tmp_path}", *QUICK]
    (job,) = plan(read_sweep(overrides, multirun=True)).jobs
    execute(job, sweep=True)
    run_dir = job.run_dirs[0]
    old = OmegaConf.load(run_dir / CONFIG)
    for key in LATER_KEYS:  # as a run of the first release wrote it
        parent, _, leaf = key.rpartition(".")
        node = OmegaConf.select(old, parent) if parent else old
        if leaf in node:
            del node[leaf]
    OmegaConf.save(old, run_dir / CONFIG)
    (run_dir / "DONE").write_text("2026-11-20T10:00:00+00:00\n")  # and DONE: a time, before manifests
    assert load_run(run_dir).cfg == make_config(*QUICK)
    (again,) = plan(read_sweep(overrides, multirun=True)).jobs
    assert (
        again.run_dirs == job.run_dirs
        and run_status(run_dir).status == "unverified"
        and finished(run_dir, again.digests[0])
    )


def test_a_job_prints_the_table_of_a_run_it_trained_only(tmp_path, capsys, monkeypatch):
    """A run another process finishes while this job starts (after the job looked, before it claimed
    the directory) is left untouched, and its table is not printed as this job's."""
    (job,) = plan(read_sweep([f"hydra.sweep.dir={tmp_path}", *QUICK], multirun=True)).jobs
    opening, others = RunDir.open, []

    def finished_meanwhile(self):
        if not others:  # the other process trains the run first (its own open: the real one)
            others.append(self.path)
            run(self.cfg, self.path)
        return opening(self)

    monkeypatch.setattr(RunDir, "open", finished_meanwhile)
    capsys.readouterr()
    execute(job, sweep=True)
    out, err = capsys.readouterr()
    assert f"{job.run_dirs[0]} is finished already" in out, err
    assert "loss at step" not in out and "run directory:" not in out
