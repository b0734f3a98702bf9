"""Sink attention per query position (sinkexp/analysis/positions.py; sink_attention.sink_attn_by_position) on
hand-built attention, and the two readings of Ran-Milo's sink: some position, every position."""

import math
from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from sinkexp.analysis.positions import position_profile, selected, strongest_position, weakest_position_of_best_layer
from sinkexp.evaluate.metrics.sink_attention import sink_attn_by_position
from sinkexp.model import Transformer
from sinkexp.tasks import TASKS


def test_per_position_sink_attention_closed_forms():
    T = 5
    uniform = torch.tril(torch.ones(T, T)) / torch.arange(1, T + 1)[:, None]  # causal: 1/(i+1) on each key
    weights = uniform.expand(3, 2, T, T).clone()  # (B, H, T, S)
    everything = torch.ones(3, T, dtype=torch.bool)
    sink = torch.zeros(3, dtype=torch.long)
    assert torch.allclose(sink_attn_by_position(weights, sink, everything), (1 / torch.arange(1, T + 1)).expand(2, T))
    on_bos = torch.zeros(3, 2, T, T)
    on_bos[..., 0] = 1.0
    assert torch.equal(sink_attn_by_position(on_bos, sink, everything), torch.ones(2, T))
    # per position, only the sequences that select it count; a position none selects is NaN
    picked = torch.zeros(3, T, dtype=torch.bool)
    picked[0, 1] = picked[1, 1] = picked[2, 3] = True
    mixed = on_bos.clone()
    mixed[1] = uniform  # sequence 1 pays 1/2 to BOS at position 1
    got = sink_attn_by_position(mixed, sink, picked)[0]
    assert got[1] == pytest.approx(0.75) and got[3] == 1.0 and math.isnan(got[0]) and math.isnan(got[4])


def test_queries_before_the_first_trigger_are_selected():
    task = SimpleNamespace(query_types=("trigger", "non_trigger"))
    query_type = torch.tensor([[-1, 1, 1, 0, 1], [-1, 1, 1, 1, 1]])  # a trigger at 3; none
    batch = SimpleNamespace(query_type=query_type, loss_mask=query_type >= 0)
    assert selected(task, batch, "non_trigger").tolist() == [
        [False, True, True, False, True],
        [False, True, True, True, True],
    ]
    assert selected(task, batch, "non_trigger", before="trigger").tolist() == [
        [False, True, True, False, False],
        [False, True, True, True, True],
    ]


def test_some_position_and_every_position_read_the_profile():
    table = pd.DataFrame(
        {
            "layer": [0, 0, 0, 1, 1, 1],
            "position": [0, 1, 2] * 2,
            "value": [math.nan, 0.95, 0.3, math.nan, 0.8, 0.7],
            "count": [0, 10, 10] * 2,
        }
    )
    assert strongest_position(table) == 0.95  # Theorem 2: one position of one layer
    assert weakest_position_of_best_layer(table) == 0.7  # the experiments: every position of a layer


def test_an_untrained_model_with_uniform_attention_pays_each_key_its_share(make_config):
    cfg = make_config("task=trigger", "model.n_layers=2", "model.n_heads=2", "eval.batch_size=64")
    task = TASKS["trigger"](cfg.task)
    model = Transformer(cfg.model, cfg.attn, task)
    for block in model.blocks:  # zero queries and keys: every score is 0
        block.attn.qkv.weight.data[: 2 * cfg.model.d_model] = 0.0
    batch = task.sample(64, torch.Generator().manual_seed(0), "cpu")
    table = position_profile(SimpleNamespace(model=model, batch=batch, task=task), "non_trigger")
    assert set(table["layer"]) == {0, 1} and (table[table["position"] == 0]["count"] == 0).all()
    rows = table[table["count"] > 0]
    assert rows["value"].values == pytest.approx(1 / (rows["position"].values + 1.0), rel=1e-5)


def test_the_position_figure_draws_each_runs_layers_down_and_positions_across(tmp_path):
    from sinkexp.report.positions import position_figure, position_grid

    table = pd.DataFrame(
        {"layer": [0, 0, 1, 1], "position": [0, 1, 0, 1], "value": [math.nan, 0.5, 0.2, 0.9], "count": [0, 4, 4, 4]}
    )
    grid = position_grid(table)
    assert list(grid.index) == [0, 1] and list(grid.columns) == [0, 1]
    assert math.isnan(grid.loc[0, 0]) and (grid.loc[0, 1], grid.loc[1, 0], grid.loc[1, 1]) == (0.5, 0.2, 0.9)
    path = position_figure({"a": table, "b": table}, tmp_path / "fig.png", "t")
    assert path.read_bytes().startswith(b"\x89PNG")
