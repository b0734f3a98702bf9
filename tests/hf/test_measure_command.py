"""`sinkexp measure` as a command: it writes run directories `sinkexp report` reads, sweeps skip
finished runs, named checkpoints are measured for the claims, and every bad input is one line, exit
2, nothing written."""

import json
import re
import signal
import sys

import numpy as np
import pandas as pd
import pytest
import yaml
from hf_models import KINDS, tiny
from test_cli import sinkexp

from sinkexp.evaluate.tables import METRICS
from sinkexp.hf import runner
from sinkexp.hf.sources import file_digest


def run_dir_of(result):
    return result.stdout.strip().splitlines()[-1].removeprefix("run directory: ")


@pytest.mark.parametrize("kind", KINDS)
def test_measure_writes_a_run_directory_that_report_reads(kind, tmp_path):
    folder = tiny(kind, tmp_path / kind)
    result = sinkexp("measure", str(folder), "n=5", "seq_len=12", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "model: sink rate over all heads" in result.stdout and "on the measured text" in result.stdout
    run = tmp_path / run_dir_of(result)
    assert run.parent == tmp_path / "outputs/runs/measure" / kind
    for name in ("config.yaml", "meta.json", "metrics.csv", "losses.csv", "summary.json", "inputs.npz", "DONE"):
        assert (run / name).exists(), name
    inputs = np.load(run / "inputs.npz")["inputs"]
    text = sinkexp_text()[: 11 * 5 if kind == "llama" else 12 * 5]
    assert inputs.shape == (5, 12) and (inputs[:, 0] == 256).all() == (kind == "llama")
    body = inputs[:, 1:] if kind == "llama" else inputs
    assert bytes(body.astype(np.uint8).ravel()) == text  # consecutive windows of the text
    metrics = pd.read_csv(run / "metrics.csv")
    assert set(metrics["metric"]) <= set(METRICS) and "sink_score" in set(metrics["metric"])
    heads = 4 if kind == "llama" else 2
    assert len(metrics[(metrics["metric"] == "sink_attn") & (metrics["query_type"] == "text")]) == 2 * heads
    meta = json.loads((run / "meta.json").read_text())
    assert meta["model"]["weights"]["model.safetensors"] and meta["versions"]["transformers"]
    report = sinkexp("report", str(tmp_path / "outputs"), cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    assert pd.read_csv(tmp_path / "outputs/report/runs.csv")["status"].tolist() == ["done"]
    assert (tmp_path / "outputs/report/sink_attn_by_layer.png").exists()


def sinkexp_text() -> bytes:
    from sinkexp.hf.sources import read_text

    return read_text("kjv").encode()


def test_sweep_skips_finished_runs_and_report_draws_the_checkpoints(tmp_path):
    """Two checkpoints of one run (config.json's `sinkexp` step, as `sinkexp export` writes it): a
    sweep measures both, the same sweep again touches neither, and the report draws them by step."""
    for step, seed in ((100, 0), (300, 1)):
        tiny("gpt2", tmp_path / f"ckpt{step}", seed=seed, sinkexp={"step": step})
    args = ("measure", "-m", f"model={tmp_path / 'ckpt100'},{tmp_path / 'ckpt300'}", "n=3", "seq_len=8", "name=grid")
    first = sinkexp(*args, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    runs = sorted((tmp_path / "outputs/sweeps/grid/measure").glob("*/*/DONE"))
    assert [run.parent.parent.name for run in runs] == ["ckpt100", "ckpt300"]
    written = {run: run.stat().st_mtime_ns for run in runs}
    again = sinkexp(*args, cwd=tmp_path)
    assert again.returncode == 0 and again.stdout.count("finished already (DONE); skipped") == 2
    assert {run: run.stat().st_mtime_ns for run in runs} == written
    assert pd.read_csv(runs[1].parent / "metrics.csv")["step"].unique().tolist() == [300]
    assert sinkexp("report", str(tmp_path / "outputs/sweeps/grid"), cwd=tmp_path).returncode == 0
    assert (tmp_path / "outputs/sweeps/grid/report/checkpoints.png").exists()
    from sinkexp.report.steps import measured_checkpoints

    runs_table = pd.read_csv(tmp_path / "outputs/sweeps/grid/report/runs.csv")
    measured, lines = measured_checkpoints(runs_table, ["model", "step"])
    assert sorted(measured["step"]) == [100, 300] and lines == []  # one folder per step: one line, not two


def test_measure_checkpoint_for_claims_on_named_checkpoints(tmp_path, monkeypatch):
    """What a reproduce claim calls: on_disk first (no network), then the run directory, reused."""
    from sinkexp.hf.runner import measure_checkpoint
    from sinkexp.hf.sources import on_disk
    from sinkexp.rundir.reading import RunFiles

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = tiny("gpt2", tmp_path / "g")
    assert on_disk(str(folder)) and not on_disk("EleutherAI/pythia-14m", "step1000")
    run = measure_checkpoint(str(folder), tmp_path / "run", n=3, seq_len=8)
    summary = RunFiles(run).summary
    assert summary["step"] == -1 and set(summary["sink_rate"]) == {"0", "1", "model"}
    assert measure_checkpoint(str(folder), tmp_path / "run", n=3, seq_len=8) == run  # finished: reused


def test_measure_checkpoint_checks_python_values_without_turning_them_into_text(tmp_path):
    """reproduce's settings are Python values: typed by the schema as the command line's are (one
    line, the key named, as `sinkexp train` says it), nothing written; a value the command line would
    split (a comma) is just a value."""
    from sinkexp.errors import ConfigError
    from sinkexp.hf.runner import measure_checkpoint

    folder = str(tiny("gpt2", tmp_path / "g"))
    for settings, words in (
        ({"n": True}, "n='True' is not valid; it must be a whole number"),
        ({"n": 2.5}, "n=2.5 is not valid; it must be a whole number"),
        ({"n": 0}, "n=0 is not valid; it must be >= 1"),
        ({"sequences": 5}, "sequences: unknown key (did you mean seq_len?); valid keys at the top level: bos, chunk"),
        ({"hydra.run.dir": "x"}, "hydra.run.dir: unknown key (did you mean dir?)"),
        ({"perturb": "maybe"}, "perturb='maybe' is not valid; it must be true or false"),
        (
            {"dtype": "float8"},
            "dtype='float8' is not valid (did you mean float32?); choose one of: float32, bfloat16, float16",
        ),
    ):
        with pytest.raises(ConfigError, match=re.escape(words)) as err:
            measure_checkpoint(folder, tmp_path / "run", **settings)
        assert "\n" not in str(err.value) and not (tmp_path / "run").exists()
    text = tmp_path / "a,b.txt"  # the string path read this as a sweep of two texts
    text.write_text(sinkexp_text()[:400].decode())
    run = measure_checkpoint(folder, tmp_path / "run", text=str(text), n=3, seq_len=8, bos="FALSE")
    written = yaml.safe_load((run / "config.yaml").read_text())
    assert written["text"] == str(text) and written["n"] == 3 and written["bos"] == "false"


def test_a_failed_measurement_writes_failed_and_the_rerun_ends_done(tmp_path, monkeypatch, capsys):
    """The lifecycle training runs have (rundir/claim.py): FAILED with the reason, cleared by the
    rerun, DONE last, meta.json opened with the standard fields and closed."""

    folder = str(tiny("gpt2", tmp_path / "g"))

    def broken(*args):
        raise RuntimeError("no room for the model")

    monkeypatch.setattr(runner, "load_checkpoint", broken)
    with pytest.raises(RuntimeError, match="the measurement did not finish"):
        runner.measure_checkpoint(folder, tmp_path / "run", n=3, seq_len=8)
    assert capsys.readouterr().err == (
        f"sinkexp: error: {tmp_path / 'run'}: RuntimeError: no room for the model; then the same command measures it "
        "again (FAILED written)\n"
    )
    assert (tmp_path / "run/FAILED").read_text().startswith("RuntimeError: no room for the model\n")
    assert json.loads((tmp_path / "run/meta.json").read_text())["end_time"] is None
    monkeypatch.undo()
    run = runner.measure_checkpoint(folder, tmp_path / "run", n=3, seq_len=8)
    assert (
        sorted(path.name for path in run.iterdir())
        == (
            ".lock DONE attention.npz config.yaml inputs.npz losses.csv massive.csv meta.json metrics.csv summary.json"
        ).split()
    )
    meta = json.loads((run / "meta.json").read_text())
    fields = "schema_version config_hash command model dtype device versions git argv start_time end_time wall_time_s"
    fields += " allocator"
    assert list(meta) == fields.split()  # opening_meta's fields, with measure's command, model, dtype and allocator
    assert meta["command"] == "measure" and meta["end_time"] >= meta["start_time"] and meta["wall_time_s"] > 0
    assert meta["model"]["weights"] == {"model.safetensors": file_digest(tmp_path / "g/model.safetensors")}


def not_a_causal_lm(tmp_path):
    from transformers import T5Config

    T5Config(vocab_size=257, d_model=16, num_layers=1, num_heads=2, d_ff=32).save_pretrained(tmp_path / "t5")
    return str(tmp_path / "t5")


BAD = {  # input -> (arguments, the words the one line must hold)
    "not a model": (lambda p: [str(p)], "no config.json"),
    "hub id not here": (lambda p: ["EleutherAI/pythia-14m", "revision=step1000"], "not on this machine"),
    "not a causal LM": (lambda p: [not_a_causal_lm(p)], "not a causal language model"),
    "T beyond the context": (lambda p: [str(tiny("gpt2", p / "g")), "seq_len=64"], "longer than"),
    "text too short": (lambda p: [str(tiny("gpt2", p / "g")), f"text={short_text(p)}", "seq_len=16"], "need 1600"),
    "unknown key": (lambda p: [str(tiny("gpt2", p / "g")), "sequences=5"], "sequences: unknown key (did you mean"),
    "train's sweep folder": (lambda p: ["M", "hydra.sweep.dir=x"], "hydra.sweep.dir: unknown key (did you mean dir?)"),
    "a key twice": (lambda p: ["M", "n=8", "n=16"], "n is given twice (n=8 and n=16); give it once"),
    "MODEL and model=": (lambda p: ["M", "model=OTHER"], "model is given twice (model=M and model=OTHER)"),
    "sweep without -m": (lambda p: ["model=a,b"], "needs -m (sinkexp measure -m"),
    "a directory that cannot be made": (
        lambda p: [str(tiny("gpt2", p / "g")), "seq_len=8", "dir=/proc/sinkexp"],
        "/proc/sinkexp cannot be created (/proc is not a writable folder); choose another dir",
    ),
}


def short_text(path):
    (path / "short.txt").write_text("too short")
    return path / "short.txt"


def test_an_error_after_a_stop_is_that_stop(tmp_path, monkeypatch, capsys):
    """A stop whose exception a finaliser lost, and an error from the state it cut short: FAILED and
    the stop's exception say the stop, not the error (as errors.refuse and jobs/launch.py read it)."""
    from sinkexp.machine import preemption

    def cut_short(*args):
        monkeypatch.setattr(preemption, "_stopping", signal.SIGTERM)
        raise AttributeError("'NoneType' object has no attribute 'weight'")

    monkeypatch.setattr(runner, "load_checkpoint", cut_short)
    with pytest.raises(preemption.Interrupted) as stop:
        runner.measure_checkpoint(str(tiny("gpt2", tmp_path / "g")), tmp_path / "run", n=3, seq_len=8)
    assert stop.value.signum == signal.SIGTERM and "error" not in capsys.readouterr().err
    assert "stopped by SIGTERM" in (tmp_path / "run/FAILED").read_text()


@pytest.mark.parametrize("case", BAD)
def test_bad_input_is_one_line_exit_2_nothing_written(case, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # no network here either way: fail at once
    args, words = BAD[case]
    result = sinkexp("measure", *args(tmp_path), cwd=tmp_path)
    assert result.returncode == 2 and words in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not (tmp_path / "outputs").exists()


def test_a_directory_of_another_settings_run_is_refused_before_anything_runs(tmp_path):
    """plan.check_run_dir, as for `sinkexp train`: the same directory with another n is another config."""
    folder = str(tiny("gpt2", tmp_path / "g"))
    assert sinkexp("measure", folder, "n=3", "seq_len=8", f"dir={tmp_path / 'run'}", cwd=tmp_path).returncode == 0
    written = {path: path.stat().st_mtime_ns for path in (tmp_path / "run").iterdir()}
    result = sinkexp("measure", folder, "n=4", "seq_len=8", f"dir={tmp_path / 'run'}", cwd=tmp_path)
    assert result.returncode == 2 and "of another config" in result.stderr
    assert "choose another dir or name" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert {path: path.stat().st_mtime_ns for path in (tmp_path / "run").iterdir()} == written


def test_attention_that_cannot_be_captured_and_missing_transformers(tmp_path, monkeypatch):
    from transformers import GPT2LMHeadModel

    folder = tiny("gpt2", tmp_path / "g")
    monkeypatch.setattr(GPT2LMHeadModel, "_supports_attention_backend", False)
    result = sinkexp("measure", str(folder), cwd=tmp_path)
    assert result.returncode == 2 and "attention weights cannot be returned" in result.stderr
    monkeypatch.setitem(sys.modules, "transformers", None)  # as if the hf extra were not installed
    result = sinkexp("measure", str(folder), cwd=tmp_path)
    assert result.returncode == 2 and "pip install -e .[hf]" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not (tmp_path / "outputs").exists()


def test_a_sweeps_folders_name_the_settings_that_are_not_the_default(tmp_path):
    """bos=auto and bos=false were both main-<hash>: each folder now says what it measured."""
    from sinkexp.config.settings import MeasureConfig
    from sinkexp.hf.identity import run_dir

    def folder(**settings):
        return run_dir(MeasureConfig(model="gpt2", name="s", **settings), True, "abc", "T").name

    assert folder() == "main-abc" and folder(bos="false", perturb=True) == "main_bos=false_perturb=true-abc"
    assert folder(revision="step1000", n=16, text=str(tmp_path / "my book.txt")) == "step1000_text=my_book.txt_n=16-abc"
    assert run_dir(MeasureConfig(model="gpt2", bos="false"), False, "abc", "T").name == "T-abc"  # one run: its time


def test_perturb_is_opt_in_and_its_rows_are_in_the_tables(tmp_path):
    folder = str(tiny("gpt2", tmp_path / "g"))
    result = sinkexp("measure", folder, "n=3", "seq_len=8", "perturb=true", f"dir={tmp_path / 'run'}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    metrics = pd.read_csv(tmp_path / "run" / "metrics.csv")
    perturbed = metrics[metrics["metric"] == "perturb_change"]
    assert sorted(perturbed["layer"]) == [0, 1] and (perturbed["value"] > 0).all() and (perturbed["head"] == -1).all()
    wrong = sinkexp("measure", folder, "perturb=maybe", cwd=tmp_path)
    assert wrong.returncode == 2 and "perturb='maybe' is not valid; it must be true or false" in wrong.stderr


def test_a_full_disk_during_a_measure_says_no_failed_was_written_and_promises_no_checkpoint(
    tmp_path, monkeypatch, capsys
):
    """ENOSPC at metrics.csv and at FAILED: the line says FAILED could not be written, and that the same
    command measures the run again (a measure run has no checkpoint to resume from); the folder agrees."""
    import errno
    from pathlib import Path

    from sinkexp.rundir import faults
    from sinkexp.rundir import files as rundir_files

    folder, real = str(tiny("gpt2", tmp_path / "g")), rundir_files._atomic

    def full(path, write):
        if Path(path).name in ("metrics.csv", "FAILED"):
            raise faults.run_file_error(OSError(errno.ENOSPC, "No space left on device"), path, "write")
        return real(path, write)

    monkeypatch.setattr(rundir_files, "_atomic", full)
    with pytest.raises(RuntimeError, match="the measurement did not finish"):
        runner.measure_checkpoint(folder, tmp_path / "run", n=3, seq_len=8)
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"sinkexp: error: {tmp_path / 'run'}: RunFileError: cannot write {tmp_path / 'run'}/")
    assert line.endswith(
        "; then the same command measures it again (FAILED could not be written either: no space left on the device)"
    )
    assert not (tmp_path / "run/FAILED").exists() and not (tmp_path / "run/checkpoint.pt").exists()
