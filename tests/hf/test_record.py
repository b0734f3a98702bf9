"""What a measure run keeps for its figures (hf/record.py): closed-form values on hand-built taps,
the same sums in one chunk or two, and, through the command, the files equal to the measured
model's own attention and residual stream on the run's inputs."""

import numpy as np
import pandas as pd
import pytest
import torch
from hf_models import tiny
from test_cli import sinkexp

from sinkexp.analysis.load import load_run
from sinkexp.hf import record
from sinkexp.rundir import files as rundir_files

pytest.importorskip("transformers")


def taps(weights, h):
    return {"blocks.0.attn.weights": weights, "blocks.0.resid_post": h}


def test_the_profile_and_the_maps_in_closed_form(tmp_path, monkeypatch):
    monkeypatch.setattr(record, "MAP_POSITIONS", 2)
    h = torch.arange(2 * 3 * 2, dtype=torch.float).view(2, 3, 2)  # sequence 0: 0..5, sequence 1: 6..11
    h[1, 1, 0] = -100.0  # the largest |h|: sequence 1, position 1, channel 0
    weights = torch.rand(2, 2, 3, 3, generator=torch.Generator().manual_seed(0))
    recorder = record.Recorder()
    recorder.observe(0, taps(weights, h))
    recorder.write(tmp_path)
    profile = pd.read_csv(tmp_path / rundir_files.MASSIVE).iloc[0]
    # sequence 0: |h| 0..5 (top 5, 4, 3; lower median 2); sequence 1: 6, 7, 100, 9, 10, 11 (100, 11, 10; median 9)
    assert profile[["top1", "top2", "top3", "median"]].tolist() == [52.5, 7.5, 6.5, 5.5]
    assert profile[["largest", "position", "channel"]].tolist() == [100, 1, 0]
    with np.load(tmp_path / rundir_files.ATTENTION) as maps:
        np.testing.assert_allclose(maps["layer0"], weights[:, :, :2, :2].mean(0).numpy(), rtol=1e-6)
        assert int(maps["sink"]) == 0


def test_two_chunks_record_what_one_pass_records(tmp_path):
    generator = torch.Generator().manual_seed(1)
    h, weights = torch.randn(5, 4, 3, generator=generator), torch.rand(5, 2, 4, 4, generator=generator)
    whole, parts = record.Recorder(), record.Recorder()
    whole.observe(0, taps(weights, h))
    for rows in (slice(0, 2), slice(2, 5)):
        parts.observe(0, taps(weights[rows], h[rows]))
    whole.write(tmp_path / "whole")
    parts.write(tmp_path / "parts")
    for name in (rundir_files.MASSIVE,):
        pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "whole" / name), pd.read_csv(tmp_path / "parts" / name))
    with np.load(tmp_path / "whole/attention.npz") as one, np.load(tmp_path / "parts/attention.npz") as two:
        np.testing.assert_allclose(one["layer0"], two["layer0"], rtol=1e-6)


def test_a_measure_run_records_its_models_own_maps_and_profile(tmp_path):
    folder = tiny("llama", tmp_path / "ll")
    for chunk in ("null", "2"):
        result = sinkexp(
            "measure", str(folder), "n=5", "seq_len=20", f"chunk={chunk}", f"dir={tmp_path / chunk}", cwd=tmp_path
        )
        assert result.returncode == 0, result.stderr
    run = load_run(tmp_path / "null")
    _, cache = run.forward()
    with np.load(tmp_path / "null/attention.npz") as maps:
        for layer in range(run.n_layers):
            expected = cache[f"blocks.{layer}.attn.weights"].mean(0).numpy()
            np.testing.assert_allclose(maps[f"layer{layer}"], expected, rtol=1e-5, atol=1e-7)
    profile = pd.read_csv(tmp_path / "null" / rundir_files.MASSIVE)
    top = [cache[f"blocks.{layer}.resid_post"].abs().flatten(1).max(1).values for layer in range(run.n_layers)]
    np.testing.assert_allclose(profile["top1"], [t.mean().item() for t in top], rtol=1e-5)
    np.testing.assert_allclose(profile["largest"], [t.max().item() for t in top], rtol=1e-6)
    chunked = pd.read_csv(tmp_path / "2" / rundir_files.MASSIVE)  # three chunks: the same means
    np.testing.assert_allclose(chunked.to_numpy(), profile.to_numpy(), rtol=1e-5)
