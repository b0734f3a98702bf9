"""`sinkexp export` of a real (short) task=lm run, then `sinkexp measure` on the exported folder:
every metric of every layer and head equals sinkexp's own evaluator on the same sequences."""

import shutil

import numpy as np
import pandas as pd
import pytest
import torch
from helpers import sinkexp
from omegaconf import OmegaConf

from sinkexp import load_run
from sinkexp.evaluate.evaluator import evaluate
from sinkexp.hf.measure import text_batch
from sinkexp.rundir import manifest

KEYS = ["step", "layer", "head", "query_type", "metric"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(run directory, exported folder) of a 40-step task=lm run with the model=llama preset (4 x 4)."""
    root = tmp_path_factory.mktemp("lm")
    train = sinkexp(
        "train",
        "task=lm",
        "train.steps=40",
        "train.warmup=5",
        "eval.every=40",
        "eval.batch_size=8",
        "train.batch_size=8",
        "task.seq_len=32",
        f"hydra.run.dir={root / 'run'}",
        "device=cpu",
        cwd=root,
    )
    assert train.returncode == 0, train.stderr
    result = sinkexp("export", str(root / "run"), str(root / "hf"), cwd=root)
    assert result.returncode == 0 and result.stdout.startswith("exported"), result.stderr
    return root / "run", root / "hf"


def test_exported_run_measures_as_sinkexp_evaluates_it(exported, tmp_path):
    run_dir, folder = exported
    result = sinkexp("measure", str(folder), "n=6", "seq_len=32", f"dir={tmp_path / 'm'}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    inputs = torch.from_numpy(np.load(tmp_path / "m/inputs.npz")["inputs"])
    assert (inputs[:, 0] == 256).all()  # the run had task.bos: the tokenizer adds BOS
    run = load_run(run_dir)
    assert pd.read_csv(tmp_path / "m/metrics.csv")["step"].unique().tolist() == [run.step] == [40]
    rows, _ = evaluate(run.model, run.task, text_batch(inputs), run.step)
    ours = pd.DataFrame(rows, columns=[*KEYS, "value"]).set_index(KEYS)["value"].sort_index()
    measured = pd.read_csv(tmp_path / "m/metrics.csv").set_index(KEYS)["value"].sort_index()
    assert ours.index.equals(measured.index)  # the same metrics, layers, heads and query types
    assert {"sink_attn", "sink_score", "massive_ratio", "k_norm_sink"} <= set(ours.index.get_level_values("metric"))
    np.testing.assert_allclose(measured.to_numpy(), ours.to_numpy(), rtol=2e-5, atol=1e-6)
    with torch.no_grad():  # and the same next-byte predictions
        from sinkexp.hf.measure import load_model

        logits = load_model(folder, "float32", torch.device("cpu"))(input_ids=inputs).logits
        torch.testing.assert_close(logits, run.model(inputs), rtol=1e-4, atol=1e-4)


def test_export_refuses_what_llama_cannot_compute(exported, tmp_path):
    run_dir, _ = exported
    changed = tmp_path / "qk_norm"
    shutil.copytree(run_dir, changed)
    config = OmegaConf.load(changed / "config.yaml")
    config.model.qk_norm = True
    OmegaConf.save(config, changed / "config.yaml")
    manifest.seal(changed)  # as if it had trained so
    result = sinkexp("export", str(changed), str(tmp_path / "out"), cwd=tmp_path)
    assert result.returncode == 2 and "model.qk_norm=True has no LlamaForCausalLM equivalent" in result.stderr
    (changed / "DONE").unlink()
    result = sinkexp("export", str(changed), str(tmp_path / "out"), cwd=tmp_path)
    assert result.returncode == 2 and "not a finished run" in result.stderr
    assert not (tmp_path / "out").exists() and len(result.stderr.strip().splitlines()) == 1
