"""`sinkexp reproduce --estimate` (reproduce/estimate.py): FLOPs as torch counts them, the pool's wall time
in closed form, and a plan that trains nothing."""

import json
from types import SimpleNamespace

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from sinkexp.commands.overrides import read_sweep
from sinkexp.config.compose import compose_config, initialized
from sinkexp.config.identity import config_hash
from sinkexp.config.schema import run_configs
from sinkexp.config.sweep import Sweep
from sinkexp.errors import ConfigError
from sinkexp.jobs import plan as plan_module
from sinkexp.jobs.cost import training_flops
from sinkexp.model import Transformer
from sinkexp.reproduce import calibration, estimate, estimate_papers, main
from sinkexp.reproduce.command import decided
from sinkexp.reproduce.declare import Experiment
from sinkexp.reproduce.execute import plan_experiments
from sinkexp.tasks import TASKS
from sinkexp.train.loop import Trainer

CPU = torch.device("cpu")


@pytest.mark.parametrize(
    "overrides",
    [
        ("task=trigger",),
        ("task=backcopy", "model.n_layers=2", "model.mlp=gelu"),
        ("task=damping", "model.n_registers=1"),
        ("task=lm", "task.seq_len=32", "train.batch_size=4"),
    ],
)
def test_training_flops_are_what_torch_counts_for_a_step(overrides):
    cfg = compose_config(*overrides)
    task = TASKS[cfg.task.name](cfg.task)
    model = Transformer(cfg.model, cfg.attn, task, fused=False)  # the counter does not see the CPU's fused kernel
    trainer = Trainer(model, task, cfg.train, torch.Generator().manual_seed(0), torch.device("cpu"))
    with FlopCounterMode(display=False) as counter:
        trainer.train_step()
    # Exact but for SwiGLU's hidden width, int(8 d / 3), which the formula takes as 8 d / 3.
    assert training_flops(cfg) == pytest.approx(counter.get_total_flops(), rel=3e-3)


def test_the_pool_takes_the_longest_jobs_first():
    assert estimate.pool_time([2, 3, 2, 3, 2], workers=2) == 7  # 3+2+2 on one worker, 3+2 on the other
    assert estimate.pool_time([5, 1, 1], workers=4) == 5
    assert estimate.pool_time([1, 1, 1], workers=1) == 3


# softmax and relu, 3 seeds each, 100 steps evaluated every 50: six runs of two distinct jobs
GRID = Experiment(
    name="e",
    overrides={"task": "trigger"},
    grid={"attn": ("softmax", "relu"), "seed": (0, 1, 2)},
    cpu={"train.steps": 100, "eval.every": 50},
)


@pytest.fixture(autouse=True)
def calibrations(monkeypatch, tmp_path):
    """Timings kept in the test's folder, never in the user's cache; the machine reads as quiet (the
    other xdist worker would otherwise count as load)."""
    monkeypatch.setattr(calibration, "CALIBRATIONS", tmp_path / "cache" / "calibration.json")
    monkeypatch.setattr(calibration, "busy_cores", lambda seconds=0.3: 0.0)
    # timed here, not in a pool of fresh processes, so that a test's calibrate stands in
    # (tests/reproduce/test_calibration.py times in the pool)
    monkeypatch.setattr(calibration, "in_pool", lambda cfgs, workers: [calibration.calibrate(cfg, CPU) for cfg in cfgs])
    return calibration.CALIBRATIONS


def test_timings_taken_on_a_busy_machine_serve_the_plan_are_said_to_be_long_and_are_not_kept(monkeypatch, calibrations):
    """Other processes keeping 1.5 cores busy while the jobs are timed: the plan uses the timings and
    says so, and the cache stays as it was, so the next --estimate on a quiet machine times them again."""
    from sinkexp.reproduce.estimate import format_estimate

    monkeypatch.setattr(calibration, "calibrate", lambda cfg, device: (0.01, 0.5))
    paper = SimpleNamespace(
        name="p",
        experiments=[
            Experiment(name="e", overrides={"task": "trigger"}, grid={"seed": (0, 1)}, cpu={"train.steps": 10})
        ],
    )
    monkeypatch.setattr(calibration, "busy_cores", lambda seconds=0.3: 1.5)
    table, totals = estimate_papers(decided(["hydra.launcher.n_jobs=2"], [paper], pack=False))
    assert totals["busy"] == 1.5 and totals["measured"] == 1 and not calibrations.exists()
    assert (
        "timed while other processes kept 1.5 cores busy (so the times are likely long, and not kept"
        in format_estimate(table, totals)
    )
    monkeypatch.setattr(calibration, "busy_cores", lambda seconds=0.3: 0.0)
    table, totals = estimate_papers(decided(["hydra.launcher.n_jobs=2"], [paper], pack=False))
    assert totals["measured"] == 1 and calibrations.exists() and "cores busy" not in format_estimate(table, totals)
    assert estimate_papers(decided(["hydra.launcher.n_jobs=2"], [paper], pack=False))[1]["measured"] == 0  # kept now
    printed = format_estimate(table.assign(**{"GFLOP/run": [15.0]}), totals, took=12.3).splitlines()
    assert printed[1].split()[-4] == "1.50e+01" and "job_s: the experiment's jobs' seconds together" in printed[2]
    assert "estimated in 12 s: every job composed, 1 distinct jobs timed, the others'" in printed[3]


def test_the_estimate_predicts_from_the_calibration(monkeypatch, calibrations):
    exp = GRID
    paper = SimpleNamespace(name="p", experiments=[exp])
    real = calibration.calibrate(compose_config("train.batch_size=8", "pack={seed:[0,1]}"), torch.device("cpu"))
    assert all(seconds > 0 for seconds in real)  # a pack of two: one step, two evaluations, timed
    calibrated = []

    def calibrate(cfg, device):  # 10 ms a step, 0.5 s an evaluation of each run of the job
        calibrated.append(len(run_configs(cfg)))
        return 0.01, 0.5 * calibrated[-1]

    monkeypatch.setattr(calibration, "calibrate", calibrate)
    twice = SimpleNamespace(
        name="q", experiments=[Experiment(name="again", overrides=exp.overrides, grid=exp.grid, cpu=exp.cpu)]
    )
    table, totals = estimate_papers(decided(["hydra.launcher.n_jobs=2"], [paper, twice], pack=False))
    row = table.iloc[0]
    # A run: 100 steps x 0.01 s + 3 evaluations (0, 50, 100) x 0.5 s = 2.5 s; 6 runs on 2 workers.
    assert (row["runs"], row["copied"], row["jobs"], row["s/job"], row["job_s"]) == (6, 0, 6, 2.5, 15)
    assert tuple(table.iloc[1][["runs", "copied", "jobs", "job_s"]]) == (6, 6, 0, 0)  # the same runs: trained once
    assert (totals["runs"], totals["jobs"], totals["wall_s"]) == (12, 6, 7.5)
    # A grid of a packable key whose default value repeats the softmax runs: those three are copied.
    default = compose_config("task=trigger").train.weight_decay
    decay = SimpleNamespace(
        name="r",
        experiments=[
            Experiment(
                name="decay",
                overrides={"task": "trigger", "attn": "softmax"},
                cpu=exp.cpu,
                grid={"train.weight_decay": (default, default + 0.1), "seed": (0, 1, 2)},
            )
        ],
    )
    table, totals = estimate_papers(decided(["hydra.launcher.n_jobs=2"], [paper, decay], pack=False))
    assert tuple(table.iloc[1][["runs", "copied", "jobs"]]) == (6, 3, 3)
    assert calibrated == [1, 1]  # softmax and relu: the seeds cost the same
    estimate_papers(decided(["hydra.launcher.n_jobs=2"], [paper], pack=False))
    assert calibrated == [1, 1]  # the timings kept: nothing timed again
    estimate_papers(decided(["hydra.launcher.n_jobs=2"], [paper], pack=False), recalibrate=True)
    assert calibrated == [1, 1] * 2
    monkeypatch.setattr(calibration, "source_digest", lambda: "edited")
    estimate_papers(decided(["hydra.launcher.n_jobs=2"], [paper], pack=False))
    assert calibrated == [1, 1] * 3  # other code: its own timings, and only those kept
    assert len(json.loads(calibrations.read_text())) == 2
    calibrated.clear()
    table, totals = estimate_papers(decided(["hydra.launcher.n_jobs=2"], [paper], pack=True))
    assert (table.iloc[0]["runs"], table.iloc[0]["jobs"], calibrated) == (6, 2, [3, 3])  # a pack of 3 seeds
    # scale=paper: the CPU-size timing times the ratio of FLOPs (trigger's paper sizes, 20k steps)
    table, totals = estimate_papers(decided(["hydra.launcher.n_jobs=2", "scale=paper"], [paper], pack=False))
    big, small = (compose_config("task=trigger", *extra) for extra in (("scale=paper",), ("train.steps=100",)))
    ratio = training_flops(big) / training_flops(small)
    assert estimate.evaluations(big) == len(range(0, big.train.steps, big.eval.every)) + 1
    assert estimate.evaluations(compose_config("train.steps=1000", "eval.every=300")) == 5  # 0, 300, 600, 900, 1000
    assert table.iloc[0]["s/job"] == pytest.approx(ratio * (big.train.steps * 0.01 + estimate.evaluations(big) * 0.5))


def test_the_estimate_command_trains_nothing_and_refuses_bad_input(monkeypatch, tmp_path, capsys, calibrations):
    monkeypatch.setattr(calibration, "calibrate", lambda cfg, device: (0.01, 0.5))  # no model is timed
    monkeypatch.chdir(tmp_path)
    assert main(["gu2025", "--estimate"]) == 0
    printed = capsys.readouterr().out
    assert "predicted wall time" in printed and "nothing trained" in printed and "lm_attention" in printed
    assert not (tmp_path / "outputs").exists()
    assert main(["gu2025", "--recalibrate"]) == 2 and "--recalibrate goes with --estimate" in capsys.readouterr().err
    for bad, says in (("model.n_layrs=2", "model.n_layrs: unknown key"), ("model.n_layers=[1", "cannot parse")):
        assert main(["gu2025", "--estimate", bad]) == 2
        error = capsys.readouterr().err
        assert says in error and len(error.strip().splitlines()) == 1


def test_the_old_name_of_the_flag_is_refused_naming_the_new_one(capsys):
    """--estimate was --plan, which docs/glossary.md keeps for the checked list of jobs."""
    assert main(["gu2025", "--plan", "--recalibrate"]) == 2
    assert capsys.readouterr() == (
        "",
        "sinkexp: error: --plan is now --estimate (the cost estimate: jobs, FLOPs, predicted time; nothing trains)\n",
    )


def test_a_resumed_command_prices_only_what_is_left(monkeypatch, tmp_path, calibrations):
    exp = GRID
    paper = SimpleNamespace(name="p", experiments=[exp])
    monkeypatch.setattr(calibration, "calibrate", lambda cfg, device: (0.01, 0.5))  # a run: 100 x 0.01 + 3 x 0.5 s
    # A run an earlier command finished (its directory anywhere below the root) costs nothing.
    finished = compose_config("task=trigger", "attn=softmax", "train.steps=100", "eval.every=50", "seed=1")
    run_dir = tmp_path / "root" / "p" / "e" / "somewhere" / f"s1-{config_hash(finished)}"
    run_dir.mkdir(parents=True)
    (run_dir / "DONE").touch()
    table, totals = estimate_papers(decided(["hydra.launcher.n_jobs=2"], [paper], root=tmp_path / "root", pack=False))
    assert tuple(table.iloc[0][["runs", "done", "jobs", "job_s"]]) == (6, 1, 5, 12.5) and totals["done"] == 1
    # A run stopped at step 50 of 100 (its checkpoint in its planned directory) costs the other half.
    planned = plan_experiments(decided(["hydra.launcher.n_jobs=2"], [paper], root=tmp_path / "root", pack=False))[
        ("p", "e")
    ]
    stopped = next(job.run_dirs[0] for job in planned.jobs if job.run_dirs[0].name != run_dir.name)
    stopped.mkdir(parents=True)
    torch.save({"trainer": {"step": 50}}, stopped / "checkpoint.pt")
    table, totals = estimate_papers(decided(["hydra.launcher.n_jobs=2"], [paper], root=tmp_path / "root", pack=False))
    assert tuple(table.iloc[0][["done", "jobs", "job_s"]]) == (1, 5, 11.25)


def test_an_interrupted_run_is_priced_from_its_checkpoint(tmp_path):
    """left_to_train: the share of steps after a run's checkpoint; in a pack the least trained run
    counts; a file the run would refuse is priced as a fresh start."""
    dirs = [tmp_path / name for name in ("quarter", "three_quarters", "garbage")]
    for run_dir, step in zip(dirs, (250, 750)):
        run_dir.mkdir()
        torch.save({"trainer": {"step": step}}, run_dir / "checkpoint.pt")
    dirs[2].mkdir()
    (dirs[2] / "checkpoint.pt").write_bytes(b"not a checkpoint")
    steps = SimpleNamespace(train=SimpleNamespace(steps=1000))

    def job(*run_dirs):
        return SimpleNamespace(run_dirs=run_dirs, configs=(steps,) * len(run_dirs))

    assert estimate.left_to_train(job(dirs[1])) == 0.25
    assert estimate.left_to_train(job(dirs[0], dirs[1])) == 0.75
    assert estimate.left_to_train(job(tmp_path / "fresh")) == estimate.left_to_train(job(dirs[2])) == 1.0


def test_a_plan_states_what_does_not_fit_the_device_instead_of_refusing(monkeypatch, tmp_path):
    """--estimate plans a job larger than the device (training it is refused, memory.check_plan) and
    says which experiments need more than the device has, with each job's memory floor."""
    from sinkexp.errors import ConfigError
    from sinkexp.jobs import memory
    from sinkexp.reproduce.estimate import format_estimate
    from sinkexp.reproduce.execute import plan_experiments

    monkeypatch.setattr(calibration, "calibrate", lambda cfg, device: (0.01, 0.5))
    exp = Experiment(name="e", overrides={"task": "trigger"}, grid={"seed": (0, 1)}, cpu={"train.steps": 10})
    paper = SimpleNamespace(name="p", experiments=[exp])
    floor = memory.bytes_needed(compose_config("task=trigger", "train.steps=10"))
    monkeypatch.setattr(memory, "available", lambda device: floor - 1)  # a device one byte too small
    monkeypatch.setattr(estimate, "available", lambda device: floor - 1)
    with pytest.raises(ConfigError, match="need at least"):
        plan_experiments(decided([], [paper], root=tmp_path, pack=False))  # training it is refused
    table, totals = estimate_papers(decided(["hydra.launcher.n_jobs=2"], [paper], pack=False))
    assert table.iloc[0]["GiB/job"] == pytest.approx(floor / 2**30) and table.iloc[0]["jobs"] == 2
    too_large = f"Too large for cpu ({(floor - 1) / 2**30:.3g} GiB), refused when run: p/e ("
    assert too_large in format_estimate(table, totals)


def test_a_larger_scales_job_is_timed_as_its_own_cpu_twin(monkeypatch, calibrations):
    """scale=reach runs one seed of each arm: each reach job is timed as the CPU job of its own arm,
    not as the CPU job in its position (the CPU grid's second job is softmax's seed 1)."""
    exp = Experiment(
        name="e",
        overrides={"task": "trigger"},
        grid={"attn": ("softmax", "relu"), "seed": (0, 1, 2)},
        cpu={"train.steps": 100, "eval.every": 50},
        reach={"train.steps": 200, "seed": (0,)},
    )
    monkeypatch.setattr(
        calibration, "calibrate", lambda cfg, device: (0.01 if cfg.attn.name == "softmax" else 0.03, 0.5)
    )
    paper = SimpleNamespace(name="p", experiments=[exp], claims=[])
    table, totals = estimate_papers(decided(["scale=reach"], [paper], pack=False))
    # softmax 200 x 0.01 + 5 evaluations x 0.5 = 4.5 s; relu 200 x 0.03 + 2.5 = 8.5 s (the FLOPs of a step alike)
    assert (table.iloc[0]["jobs"], table.iloc[0]["job_s"]) == (2, pytest.approx(13.0))


def test_sweeps_composed_for_the_first_time_are_planned_in_processes_as_here(monkeypatch, tmp_path):
    """COMPOSE_AHEAD sweeps never composed (a new sweep.dir is a new key) are planned in two fresh
    processes: the same jobs, run directories and hashes as plan() here, their compositions kept;
    the first bad sweep in order raises its one line, as one sweep after another would."""
    monkeypatch.setattr(plan_module, "COMPOSE_AHEAD", 2)
    monkeypatch.setattr(plan_module, "free_cores", lambda: 2)

    def sweep(name: str, *extra: str) -> Sweep:
        overrides = [f"hydra.sweep.dir={tmp_path / name}", "task=trigger", "attn=softmax,relu", "seed=0,1", *extra]
        return read_sweep(overrides, multirun=True)

    sweeps = [sweep("a"), sweep("b", "model.n_layers=2")]
    with initialized():
        assert not any(map(plan_module.composed_before, sweeps))
    ahead = plan_module.plan_sweeps(sweeps)
    with initialized():
        assert all(map(plan_module.composed_before, sweeps))
    here = [plan_module.plan(s) for s in sweeps]
    assert [[(j.overrides, j.run_dirs, j.digests, j.flops) for j in p.jobs] for p in ahead] == [
        [(j.overrides, j.run_dirs, j.digests, j.flops) for j in p.jobs] for p in here
    ]
    assert [len(p.jobs) for p in ahead] == [4, 4] and sweeps[0].size == 4
    bad = [sweep("c"), sweep("d", "attn=sofmax"), sweep("e", "model.n_layrs=2")]
    with pytest.raises(ConfigError, match=r"^attn='sofmax' is not valid") as raised:
        plan_module.plan_sweeps(bad)
    assert len(str(raised.value).splitlines()) == 1
