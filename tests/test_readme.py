"""The README's samples are what the code prints today: each error it shows, word for word (the
machine's memory aside); the sample run's lines, with their numbers masked, from a short run of the
same command; the settings it quotes. The slow tests at the end run the sample's command as it
stands (threads=1) and the ReLU run it describes, and check the verdicts the README states."""

import re
import shlex
from pathlib import Path

import pytest
from helpers import sinkexp
from omegaconf import OmegaConf

from sinkexp.config.settings import MeasureConfig

REPO = Path(__file__).parents[1]
README = (REPO / "README.md").read_text()
BLOCKS = re.findall(r"^```\n(.*?)^```", README, re.M | re.S)
SAMPLE = next(block for block in BLOCKS if block.startswith("$ .venv/bin/sinkexp train")).splitlines()
NUMBER = re.compile(r"[-+]?\d+(\.\d+)?(e[-+]?\d+)?%?")


def shown_errors() -> list[tuple[str, str]]:
    """(`$ sinkexp ...`, the `sinkexp: error: ...` line under it) for every error a code block shows."""
    lines = [line for block in BLOCKS for line in block.splitlines()]
    return [(a, b) for a, b in zip(lines, lines[1:]) if a.startswith("$ sinkexp ") and b.startswith("sinkexp: error:")]


def this_machine(line: str) -> str:
    return re.sub(r"cpu has [\d.]+ GiB", "cpu has N GiB", line)


def masked(lines: list[str]) -> list[str]:
    """The table's words, its numbers as #, its columns' widths (which follow the numbers) ignored."""
    return [" ".join(NUMBER.sub("#", line).split()) for line in lines]


def printed(result) -> list[str]:
    return [line for line in result.stdout.splitlines() if not line.startswith("run directory: ")]


def sample_table() -> list[str]:
    """The sample's lines after the command and the progress bar (stderr), without the run directory."""
    assert SAMPLE[1].startswith("train: 100%") and SAMPLE[-1].startswith("run directory: ")
    return SAMPLE[2:-1]


def test_the_readme_shows_errors_and_a_sample_run():
    assert len(shown_errors()) >= 3 and len(sample_table()) >= 10


@pytest.mark.parametrize("command, said", shown_errors())
def test_each_error_the_readme_shows_is_what_the_command_prints(tmp_path, command, said):
    result = sinkexp(*shlex.split(command)[2:], cwd=tmp_path)
    assert result.returncode == 2
    assert this_machine(result.stderr.strip()) == this_machine(said)
    assert list(tmp_path.iterdir()) == []


def test_the_divergence_line_is_what_a_diverging_run_prints(tmp_path):
    (said,) = re.findall(r"`(sinkexp: error: diverged[^`]*)`", README)
    lr = re.search(r"train\.lr \(now ([^)]+)\)", said).group(1)
    result = sinkexp("train", f"train.lr={lr}", "train.steps=1", "hydra.run.dir=run", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1].startswith(said)


def test_the_sample_runs_lines_are_what_the_command_prints(tmp_path):
    command = shlex.split(SAMPLE[0])[2:]  # after `$ .venv/bin/sinkexp`
    result = sinkexp(*command, "train.steps=150", "eval.every=150", cwd=tmp_path)  # the sink forms by 150
    assert result.returncode == 0, result.stderr
    assert masked(printed(result)) == masked(sample_table())
    assert (
        NUMBER.sub("#", SAMPLE[-1]).startswith("run directory: ") and "outputs/runs/trigger/softmax/L1/" in SAMPLE[-1]
    )


def test_the_measure_defaults_the_readme_quotes():
    defaults = OmegaConf.structured(MeasureConfig)
    assert f"reads {defaults.n} x {defaults.seq_len} tokens" in " ".join(README.split())


@pytest.mark.slow
def test_the_sample_run_as_it_stands_prints_the_readmes_lines_and_verdict(tmp_path):
    """The sample's command itself (3000 steps, one thread). Its digits are one machine's (another CPU's
    kernels train to other ones: the README says so); its lines and its verdict are every machine's."""
    result = sinkexp(*shlex.split(SAMPLE[0])[2:], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert masked(printed(result)) == masked(sample_table())
    (verdict,) = [line for line in sample_table() if line.startswith("layer 0:")]
    assert verdict in printed(result)


@pytest.mark.slow
def test_the_relu_run_the_readme_describes(tmp_path):
    said = re.search(r"With `attn=relu` it ends with `(layer 0: [^`]+)` and\s+trigger MSE ([\d.]+%)", README)
    command = [arg.replace("attn=softmax", "attn=relu") for arg in shlex.split(SAMPLE[0])[2:]]
    result = sinkexp(*command, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert any(line.startswith(said.group(1)) for line in lines)
    (trigger,) = [line for line in lines if line.split()[:1] == ["trigger"]]
    assert trigger.split()[-1] == said.group(2)
