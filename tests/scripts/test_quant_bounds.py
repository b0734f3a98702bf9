"""scripts/quant_bounds.py: a round trip stays within its format's rounding, only whole-block
matrices are quantized, the comparison's numbers are the closed-form ones, and the script runs."""

import pandas as pd
import pytest
import torch
from conftest import QUICK, load_script

from sinkexp.jobs.runner import run

gguf = pytest.importorskip("gguf")
bounds = load_script("quant_bounds")


def test_a_round_trip_is_within_the_formats_rounding():
    x = torch.randn(4, 64, generator=torch.Generator().manual_seed(0))
    for name, levels in (("Q8_0", 127), ("Q4_1", 15)):
        back = bounds.round_trip(x, gguf.GGMLQuantizationType[name])
        blocks, back_blocks = x.view(-1, 32), back.view(-1, 32)
        span = blocks.abs().amax(1) if name == "Q8_0" else blocks.amax(1) - blocks.amin(1)
        step = span / levels  # one quantization step of each block
        # half a step, plus the float16 rounding (2^-11 relative) of the stored step (and of Q4_1's minimum)
        bound = step * (0.5 + levels * 2**-11) + blocks.abs().amax(1) * 2**-11
        assert ((back_blocks - blocks).abs() <= bound[:, None]).all()
        assert (back_blocks - blocks).abs().amax() > 0.3 * step.min()  # and it does round
        assert (back != x).any()
    assert bounds.quantizable(torch.zeros(3, 64), gguf.GGMLQuantizationType.Q8_0)
    assert not bounds.quantizable(torch.zeros(64), gguf.GGMLQuantizationType.Q8_0)  # a norm's vector
    assert not bounds.quantizable(torch.zeros(64, 170), gguf.GGMLQuantizationType.Q8_0)  # rows of 170: no whole blocks


def test_the_comparison_is_the_largest_change_over_the_largest_value():
    index = pd.MultiIndex.from_tuples(
        [(0, "all", "m"), (1, "all", "m"), (0, "all", "zero"), (-1, "all", "loss_baseline")],
        names=["layer", "query_type", "metric"],
    )
    before = pd.Series([2.0, -4.0, 0.0, 5.0], index=index)
    after = pd.Series([2.5, -4.1, 0.25, 9.0], index=index)
    table = bounds.compare(before, after)
    assert table.loc["m"].tolist() == pytest.approx([0.5, 4.0, 0.125])
    assert table.loc["zero", "relative"] == 0.25 and "loss_baseline" not in table.index


def test_the_script_on_a_trained_run(tmp_path, make_config, capsys):
    run(make_config(*QUICK, "model.d_model=32"), tmp_path / "run")
    bounds.main([str(tmp_path / "run"), "--types", "Q8_0,Q4_K", "--markdown"])
    printed = capsys.readouterr().out
    assert "Q4_K: weight error" in printed or "Q4_K: gguf 0.19.0 has no Python quantizer" in printed
    assert "run: Q8_0: weight error 0.00" in printed and "massive_position moved in" in printed
    assert "| metric | run float | run Q8_0 |" in printed and "| `sink_attn` | " in printed
