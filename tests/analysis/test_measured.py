"""load_run on a `sinkexp measure` run: the measured model through measure's own loader, the very
token ids it measured, its tables; a model or text changed since, an unfinished run and another
step are refused in one line."""

import numpy as np
import pytest
import torch
from hf_models import tiny
from test_cli import sinkexp

from sinkexp.analysis.load import load_run
from sinkexp.analysis.measured import MeasuredRun
from sinkexp.rundir import files as rundir_files
from sinkexp.rundir import manifest
from sinkexp.rundir.files import RunDirError

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """(the tiny GPT-2's folder, its measure run on 5 x 24 bytes of the built-in text)."""
    root = tmp_path_factory.mktemp("measured")
    folder = tiny("gpt2", root / "g2")
    result = sinkexp("measure", str(folder), "n=5", "seq_len=24", "step=7", f"dir={root / 'm'}", cwd=root)
    assert result.returncode == 0, result.stderr
    return folder, root / "m"


def test_a_measured_run_loads_its_model_inputs_and_tables(measured):
    _, run_dir = measured
    run = load_run(run_dir)
    assert isinstance(run, MeasuredRun) and run.step == 7 and run.n_layers == 2 and not run.model.training
    assert np.array_equal(run.inputs.numpy(), np.load(run_dir / "inputs.npz")["inputs"])
    logits, cache = run.forward(["blocks.1.attn.weights", "blocks.0.resid_post"])
    assert sorted(cache) == ["blocks.0.resid_post", "blocks.1.attn.weights"]
    assert cache["blocks.1.attn.weights"].shape == (5, 2, 24, 24)
    loss = run.task.loss(logits, run.batch)[run.batch.loss_mask].mean().item()
    recorded = run.losses.set_index("split")["loss"]
    assert loss == pytest.approx(recorded["eval/all"], rel=1e-6)  # the model measure measured, on its inputs
    sink_attn = cache["blocks.1.attn.weights"][:, :, 1:, 0].mean().item()
    table = run.metrics[(run.metrics["metric"] == "sink_attn") & (run.metrics["query_type"] == "text")]
    assert sink_attn == pytest.approx(table[table["layer"] == 1]["value"].mean(), rel=1e-5)
    assert run.summary["step"] == 7 and len(run.metrics)


def test_a_changed_model_an_unfinished_run_and_another_step_are_refused(measured, tmp_path):
    folder, run_dir = measured
    with pytest.raises(RunDirError, match="measured one checkpoint, of step 7; drop step=3"):
        load_run(run_dir, step=3)
    (folder / "config.json").write_text((folder / "config.json").read_text().replace('"n_layer": 2', '"n_layer": 1'))
    try:
        with pytest.raises(RunDirError, match="its model or text has changed since it was measured"):
            load_run(run_dir)
    finally:
        (folder / "config.json").write_text(
            (folder / "config.json").read_text().replace('"n_layer": 1', '"n_layer": 2')
        )
    assert isinstance(load_run(run_dir), MeasuredRun)  # the same files again: the same model
    done = (run_dir / rundir_files.DONE).read_text()
    (run_dir / rundir_files.DONE).unlink()
    try:
        with pytest.raises(RunDirError, match="a `sinkexp measure` run that has not finished"):
            load_run(run_dir)
    finally:
        rundir_files.write_text(run_dir / rundir_files.DONE, done)
    result = sinkexp("export", str(run_dir), str(tmp_path / "out"), cwd=tmp_path)
    assert result.returncode == 2 and "it trained no weights to export" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


def test_a_folder_named_relative_to_where_measure_ran_loads_from_anywhere(measured, tmp_path):
    folder, _ = measured
    result = sinkexp("measure", folder.name, "n=2", "seq_len=8", f"dir={tmp_path / 'rel'}", cwd=folder.parent)
    assert result.returncode == 0, result.stderr
    assert load_run(tmp_path / "rel").cfg.model == str(folder)  # from meta.json's folder; cwd is elsewhere


def test_the_inputs_are_checked_against_what_was_measured(measured, tmp_path):
    _, run_dir = measured
    inputs = np.load(run_dir / "inputs.npz")["inputs"]
    rundir_files.write_arrays(run_dir / "inputs.npz", {"inputs": inputs[::-1].copy()})
    try:
        with pytest.raises(RunDirError, match=r"damaged: inputs.npz \(hash differs\)"):  # the manifest first
            load_run(run_dir)
        manifest.seal(run_dir)  # as if measured so: the text now cuts into other tokens (another tokenizer)
        with pytest.raises(RunDirError, match="the text cuts into other tokens than inputs.npz holds"):
            load_run(run_dir)
    finally:
        rundir_files.write_arrays(run_dir / "inputs.npz", {"inputs": inputs})
        manifest.seal(run_dir)
    assert torch.equal(load_run(run_dir).inputs, torch.from_numpy(inputs))
