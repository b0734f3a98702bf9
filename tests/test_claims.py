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
    bos = summary["sink_attn"][0]["non_trigger"]
    assert bos >= 0.9 if sinks else bos <= 0.1, bos
    assert summary["loss"]["trigger"] <= 0.1 * summary["baseline_loss"]["trigger"]
