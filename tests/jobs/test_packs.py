"""`sinkexp train` with train.replicas and pack: several runs in one job, each into the directory its
lone run would have (docs/sweeps.md), and the settings that would make two runs collide refused first."""

from pathlib import Path

import pytest
from conftest import QUICK
from helpers import sinkexp

from sinkexp.config.identity import config_hash


def test_replicas_write_the_directories_lone_runs_would(tmp_path, make_config):
    sweep = sinkexp("train", "-m", "seed=0", "train.replicas=2", "name=rep", *QUICK, cwd=tmp_path)
    assert sweep.returncode == 0, sweep.stderr
    hashes = [config_hash(make_config(*QUICK, f"seed={seed}")) for seed in (0, 1)]
    runs = tmp_path / "outputs/sweeps/rep/trigger/softmax/L1"
    assert sorted(p.name for p in runs.iterdir()) == [f"s0-{hashes[0]}", f"s1-{hashes[1]}"]
    assert all((p / "DONE").exists() for p in runs.iterdir())
    # Seed 1 alone, in the same sweep folder, finds its finished run and leaves it untouched.
    stamps = {p: p.stat().st_mtime_ns for p in (runs / f"s1-{hashes[1]}").iterdir() if p.is_file()}
    alone = sinkexp("train", "-m", "seed=1", "name=rep", *QUICK, cwd=tmp_path)
    assert alone.returncode == 0, alone.stderr
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps

    single = sinkexp("train", "train.replicas=2", "seed=3", *QUICK, cwd=tmp_path)
    assert single.returncode == 0, single.stderr
    printed = [
        Path(line.removeprefix("run directory: "))
        for line in single.stdout.splitlines()
        if line.startswith("run directory: ")
    ]
    assert [p.name.split("-")[-1] for p in printed] == [config_hash(make_config(*QUICK, f"seed={s}")) for s in (3, 4)]
    assert all((p / "DONE").exists() for p in printed)


def test_a_pack_trains_in_one_job_into_the_lone_runs_directories(make_config, tmp_path):
    """A weight-decay grid as one process: each run lands where `sinkexp train -m train.weight_decay=...`
    would put it; the job's own folder (its log) is the pack's first run's, and no other is made."""
    packed = sinkexp("train", "-m", "name=p", "pack={train.weight_decay:[0.01,0.1]}", "seed=0,1", *QUICK, cwd=tmp_path)
    assert packed.returncode == 0, packed.stderr
    runs = tmp_path / "outputs/sweeps/p/trigger/softmax/L1"
    assert sorted(p.name for p in runs.iterdir()) == sorted(
        f"s{seed}-{config_hash(make_config(*QUICK, f'train.weight_decay={wd}', f'seed={seed}'))}"
        for wd in (0.01, 0.1)
        for seed in (0, 1)
    )
    assert all((p / "DONE").exists() for p in runs.iterdir())
    assert packed.stdout.count("run directory: ") == 4
    both = sinkexp(
        "train", "-m", "pack={train.weight_decay:[0.01,0.1]}", "train.weight_decay=0,1", *QUICK, cwd=tmp_path
    )
    assert both.returncode == 2 and "train.weight_decay is both swept and packed" in both.stderr


@pytest.mark.parametrize(
    "args,says",
    [
        (["-m", "seed=0,1", "train.replicas=2"], "seed=0,2,4"),
        (["hydra.run.dir=fixed", "train.replicas=2"], "${seed}"),
        (["train.replicas=0"], "train.replicas=0"),
    ],
)
def test_replicas_that_would_collide_are_refused(tmp_path, args, says):
    result = sinkexp("train", *args, *QUICK, cwd=tmp_path)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert says in result.stderr and "train.replicas" in result.stderr
    assert not (tmp_path / "outputs").exists() and not (tmp_path / "fixed").exists()
