"""What several test files use: the `sinkexp` command run in a temporary directory, tables compared
between run directories, a small model of the trigger task's shapes, and a task's batch of a seed."""

import contextlib
import io
import os
import subprocess
import sys

import pandas as pd
import pytest
import torch

from sinkexp import cli
from sinkexp.config.schema import AttnConfig, ModelConfig
from sinkexp.jobs.runner import run
from sinkexp.model import Transformer
from sinkexp.rundir import files as rundir_files
from sinkexp.tasks.trigger import TriggerConfig, TriggerTask
from sinkexp.train.loop import Trainer


def sinkexp(*args, cwd, process=False):
    """`sinkexp ARGS` run in `cwd`: in this process, or as a process of its own with process=True."""
    if process:
        env = {**os.environ, "TQDM_DISABLE": "1"}
        return subprocess.run(
            [sys.executable, "-m", "sinkexp.cli", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
        )
    out, err = io.StringIO(), io.StringIO()
    here, argv = os.getcwd(), sys.argv[:]
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = cli.invoke(list(args))
            except SystemExit as exit:  # Hydra exits for --help, --cfg and a run's uncaught error
                code = exit.code if isinstance(exit.code, int) else 1
    finally:
        os.chdir(here)
        sys.argv = argv
        if "hydra/launcher=parallel" in args:  # its reused workers keep this cwd: the next test's must be fresh
            from joblib.externals.loky import get_reusable_executor

            get_reusable_executor().shutdown(wait=True)
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def numbers(run_dir, name):
    table = pd.read_csv(run_dir / name)
    value = "value" if "value" in table else "loss"
    return table.drop(columns=value), table[value].to_numpy()


def assert_same_tables(a, b, exact=False):
    for name in (rundir_files.METRICS_CSV, rundir_files.LOSSES):
        (keys_a, values_a), (keys_b, values_b) = numbers(a, name), numbers(b, name)
        pd.testing.assert_frame_equal(keys_a, keys_b)
        if exact:
            assert (values_a == values_b).all(), name
        else:
            torch.testing.assert_close(
                torch.tensor(values_a), torch.tensor(values_b), rtol=2e-3, atol=1e-5, msg=f"{a} vs {b}: {name}"
            )


def make_model(attn="softmax", **model):
    torch.manual_seed(0)
    task = TriggerTask(TriggerConfig(seq_len=10, d_x=4))
    return Transformer(
        ModelConfig(**{"n_layers": 2, "n_heads": 2, "d_model": 16, "mlp": "gelu", **model}),
        AttnConfig(name=attn, normaliser=attn),
        task,
    )


def sample(task, seed, batch_size=64):
    return task.sample(batch_size, torch.Generator().manual_seed(seed), "cpu")


def whole_and_resumed(cfg, root, kill_at_step):
    """`cfg` trained into root/whole, and into root/split killed at step 26 (loss logged at 25, past the
    step-20 checkpoint of QUICK's) and run again, which resumes it; returns the two directories."""
    run(cfg, root / "whole")
    kill_at_step(Trainer, 27)
    with pytest.raises(KeyboardInterrupt):
        run(cfg, root / "split")
    kill_at_step(Trainer, None)
    run(cfg, root / "split")
    return root / "whole", root / "split"
