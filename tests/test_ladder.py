"""scripts/ladder.py: each rung's runs trained through one pool, and each run's measures read from its
metrics.csv agree with what its summary.json says."""
import json

import pandas as pd

from conftest import QUICK, load_script

ladder = load_script("ladder")
TINY = ("task.seq_len=16", "model.n_layers=2", "train.warmup=5", *QUICK, "hydra.launcher.n_jobs=2")


def test_the_ladder_trains_its_rungs_and_reports_each_runs_measures(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(ladder, "RUNGS", {"narrow": ("model.d_model=16",), "wide": ("model.d_model=32",)})
    assert ladder.main(["--seeds", "0", "1"], root=tmp_path, extra=TINY) == 0
    rows = pd.read_csv(tmp_path / "ladder.csv")
    assert sorted(zip(rows["rung"], rows["seed"])) == [("narrow", 0), ("narrow", 1), ("wide", 0), ("wide", 1)]
    flops = rows.groupby("rung")["train_flops"].first()
    assert flops["wide"] > flops["narrow"]
    for _, row in rows.iterrows():
        summary = json.loads(next((tmp_path / row["rung"]).rglob(f"s{row['seed']}-*/summary.json")).read_text())
        assert row["sink_rate"] == summary["sink_rate"]["model"]["0.3"]
        assert row["largest_massive_ratio"] == max(v["all"] for v in summary["metrics"]["massive_ratio"].values())
        layer_means = [v["text"] for v in summary["metrics"]["sink_attn"].values()]   # mean over each layer's heads
        assert max(layer_means) <= row["largest_head_sink_score"] <= 1
        assert row["loss"] == summary["loss"]["all"]
    assert (tmp_path / "ladder.png").stat().st_size > 0
    printed = capsys.readouterr().out
    assert "narrow" in printed and "written:" in printed
    # --report reads the same runs and trains nothing; --plan lists the rungs
    (tmp_path / "ladder.csv").unlink()
    assert ladder.main(["--report", "--seeds", "0", "1"], root=tmp_path, extra=TINY) == 0
    assert pd.read_csv(tmp_path / "ladder.csv").equals(rows)
    assert ladder.main(["--plan", "--seeds", "0"], root=tmp_path, extra=TINY) == 0
    assert "wide: 1 runs" in capsys.readouterr().out


def test_a_rung_copies_the_runs_reproduce_has_finished(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(ladder, "RUNGS", {"narrow": ("model.d_model=16",)})
    reproduced, root = tmp_path / "reproduce", tmp_path / "ladder"
    assert ladder.main(["--seeds", "0"], root=reproduced, extra=TINY) == 0
    capsys.readouterr()
    assert ladder.main(["--seeds", "0", "--copy-from", str(reproduced)], root=root, extra=TINY) == 0
    assert "copied, not trained again" in capsys.readouterr().out
    (trained,), (copied,) = reproduced.rglob("s0-*/metrics.csv"), root.rglob("s0-*/metrics.csv")
    assert trained.parent.name == copied.parent.name
    assert copied.read_bytes() == trained.read_bytes()
    assert (copied.parent / "meta.json").read_bytes() == (trained.parent / "meta.json").read_bytes()
