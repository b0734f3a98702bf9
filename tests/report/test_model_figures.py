"""The report's figures of a measured model (report/model_figures.py): which heads' maps it draws,
the files a report over measured runs writes (and the training figures it no longer writes for
them), and a bad --heads in one line."""

import shutil

import pandas as pd
import pytest
from conftest import QUICK
from hf_models import tiny
from test_cli import sinkexp

from sinkexp.jobs.runner import run
from sinkexp.report import model_figures, runs
from sinkexp.rundir import files as rundir_files

pytest.importorskip("transformers")


def test_the_default_heads_are_those_of_the_largest_the_median_and_the_smallest_sink_score(tmp_path):
    scores = {(0, 0): 0.5, (0, 1): 0.9, (1, 0): 0.1, (1, 1): 0.7, (2, 0): 0.3}
    rows = [(-1, layer, head, "all", "sink_score", value) for (layer, head), value in scores.items()]
    pd.DataFrame(rows, columns=["step", "layer", "head", "query_type", "metric", "value"]).to_csv(
        tmp_path / rundir_files.METRICS_CSV, index=False
    )
    assert model_figures.chosen_heads(tmp_path, None) == [(0, 1), (0, 0), (1, 0)]  # 0.9, 0.5 (3rd of 5), 0.1
    assert model_figures.chosen_heads(tmp_path, [(2, 0)]) == [(2, 0)]
    with pytest.raises(model_figures.BadHeads, match="--heads 2.1: .* has layers 0..2 and heads 0..1"):
        model_figures.chosen_heads(tmp_path, [(2, 1)])
    assert model_figures.parse_heads("3.1, 10.4") == [(3, 1), (10, 4)]
    with pytest.raises(model_figures.BadHeads, match="'3' is not LAYER.HEAD"):
        model_figures.parse_heads("3")


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """A folder holding one measure run of a tiny Llama (4 heads, 2 layers)."""
    root = tmp_path_factory.mktemp("measured")
    result = sinkexp(
        "measure", str(tiny("llama", root / "ll")), "n=4", "seq_len=16", f"dir={root / 'runs/m'}", cwd=root
    )
    assert result.returncode == 0, result.stderr
    return root / "runs"


def test_a_report_of_measured_runs_draws_the_models_figures_not_the_training_ones(measured, tmp_path):
    result = sinkexp("report", str(measured), "--out", str(tmp_path / "r"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    drawn = sorted(path.name for path in (tmp_path / "r").glob("*.png"))
    assert drawn == [
        "first_token_all_runs.png",
        "heads_maps_all_runs.png",
        "massive_all_runs.png",
        "sink_attn_by_layer.png",
    ]
    assert all((tmp_path / "r" / name).stat().st_size > 10_000 for name in drawn)
    result = sinkexp("report", str(measured), "--out", str(tmp_path / "r2"), "--heads", "1.3,0.0", cwd=tmp_path)
    assert result.returncode == 0 and (tmp_path / "r2/heads_maps_all_runs.png").exists(), result.stderr
    written = model_figures.draw_measured(measured / "m", "m", "m", tmp_path, save=lambda fig, path: path.name)
    assert written == ["first_token_m.png", "heads_maps_m.png", "massive_m.png"]  # each through the writer given
    for bad, said in (("7.0", "--heads 7.0: m has layers 0..1 and heads 0..3"), ("x", "'x' is not LAYER.HEAD")):
        result = sinkexp("report", str(measured), "--out", str(tmp_path / "bad"), "--heads", bad, cwd=tmp_path)
        assert result.returncode == 2 and said in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_beside_a_trained_run_the_dynamics_read_the_trained_run_only(measured, tmp_path, make_config, monkeypatch):
    shutil.copytree(measured, tmp_path / "both/measured")
    old = tmp_path / "both/measured/m"  # a run measured before massive.csv was kept, and before manifests
    (old / rundir_files.MASSIVE).unlink()
    (old / rundir_files.DONE).write_text("2026-12-01T00:00:00+00:00\n")
    run(make_config(*QUICK), tmp_path / "both/trained")
    seen = []
    monkeypatch.setattr(runs, "plot_dynamics", lambda root, table, groups, path, save: seen.append(table))
    runs.write_report(tmp_path / "both")
    assert seen[0]["command"].tolist() == ["train"]
    out = tmp_path / "both/report"
    assert (out / "first_token_command=measure.png").exists() and (out / "heads_maps_command=measure.png").exists()
    assert not list(out.glob("massive_*.png")) and (out / "attention_command=train.png").exists()
