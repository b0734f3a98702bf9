"""Slow scientific checks: the papers' qualitative results appear at the CPU defaults.

Run with `pytest -m slow` (a few minutes on 2 cores).
"""
import pytest

from sinkexp.runner import run

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("attn,sinks", [("softmax", True), ("relu", False)])
def test_trigger_softmax_sinks_and_relu_does_not(make_config, tmp_path, attn, sinks):
    """Ran-Milo 2026, theorems 1 and 3: one layer, one head, the task solved."""
    summary = run(make_config(f"attn={attn}", "device=cpu"), tmp_path)
    bos = summary["sink_attn"]["0"]["non_trigger"]
    assert bos >= 0.9 if sinks else bos <= 0.1, bos
    assert summary["loss"]["trigger"] <= 0.1 * summary["baseline_loss"]["trigger"]


def final(summary, metric, layer, query_type="all"):
    return summary["metrics"][metric][str(layer)][query_type]


def test_damping_sinks_on_nop_queries_with_a_silent_sink(make_config, tmp_path):
    """Fesser et al. 2026: sink attention 0.993 (nop) / 0.012 (active), value-norm ratio 0.008."""
    summary = run(make_config("task=damping", "device=cpu"), tmp_path)
    assert final(summary, "sink_attn", 0, "nop") >= 0.9
    assert final(summary, "sink_attn", 0, "active") <= 0.1
    assert final(summary, "value_norm_ratio", 0) <= 0.2


def test_damping_without_damping_forms_no_sink(make_config, tmp_path):
    """gamma = 1: every target is x, the head has nothing to switch off, and no sink forms."""
    summary = run(make_config("task=damping", "task.gamma=1", "device=cpu"), tmp_path)
    assert final(summary, "sink_attn", 0, "nop") <= 0.2


def test_broadcast_routes_through_the_hub(make_config, tmp_path):
    """Fesser et al. 2026: layer-2 argmax on j* for 98% of queries, value-norm ratio ~1, rank-1 update."""
    summary = run(make_config("task=broadcast", "device=cpu"), tmp_path)
    assert final(summary, "sink_match", 1) >= 0.8
    assert 0.5 <= final(summary, "value_norm_ratio", 1) <= 2.0
    assert final(summary, "stable_rank", 1) <= 1.5


def test_backcopy_softmax_sinks_once_back_copy_is_learned(make_config, tmp_path):
    """Guo et al. 2024: BOS attention at non-trigger queries grows (0.81 at 10k steps on
    Shakespeare) once the back-copy is learned, and the BOS value norm falls afterwards."""
    summary = run(make_config("task=backcopy", "device=cpu"), tmp_path)
    assert final(summary, "sink_attn", 0, "non_trigger") >= 0.5
    assert summary["loss"]["trigger"] - summary["baseline_loss"]["trigger"] <= 0.05
    import pandas as pd

    metrics = pd.read_csv(tmp_path / "metrics.csv")
    rows = metrics[(metrics["layer"] == 0) & (metrics["head"] == 0)]
    bos_attn = rows[(rows["metric"] == "sink_attn") & (rows["query_type"] == "non_trigger")].set_index("step")["value"]
    value_norm = rows[rows["metric"] == "sink_value_norm"].set_index("step")["value"]
    formed = bos_attn[bos_attn >= 0.5].index.min()
    assert value_norm.iloc[-1] < value_norm[formed]


def test_backcopy_relu_attention_forms_no_sink(make_config, tmp_path):
    summary = run(make_config("task=backcopy", "attn=relu", "device=cpu"), tmp_path)
    assert final(summary, "sink_attn", 0, "non_trigger") <= 0.1


def test_backcopy_adam_grows_a_larger_bos_residual_than_sgd(make_config, tmp_path):
    """Guo et al. 2024, 3 layers: BOS residual norm after layer 0 is 141 with Adam vs 20 with SGD at 10k
    steps; at equal (CPU-sized) steps Adam's must already be the larger one."""
    common = ("task=backcopy", "model.n_layers=3", "train.steps=1000", "device=cpu")
    adam = run(make_config(*common), tmp_path / "adam")
    sgd = run(make_config(*common, "train.optim=sgd", "train.lr=0.03"), tmp_path / "sgd")
    assert final(adam, "resid_norm_sink", 0) > final(sgd, "resid_norm_sink", 0)
