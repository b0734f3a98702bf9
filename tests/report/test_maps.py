"""The attention maps (report/maps.py): a log scale on which a sink of 0.05 shows, a grid of layers x
heads with one colour bar, and examples/inspect_run.py drawing the very arrays the report draws."""

import importlib.util
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from conftest import QUICK

from sinkexp.analysis.load import load_run
from sinkexp.jobs.runner import run
from sinkexp.report.maps import FLOOR, attention_panel, colour_scale, draw_maps, grid
from sinkexp.rundir import files as rundir_files


def test_an_attention_panel_shows_a_sink_of_0_05_halfway_up_its_scale():
    weights = np.tril(np.full((4, 4), 0.01))
    weights[:, 0] = 0.05
    fig, ax = plt.subplots()
    attention_panel(ax, weights, 0, "t", colour_scale([weights]))
    norm = ax.images[0].norm
    assert (norm.vmin, norm.vmax) == (FLOOR, 1.0) and norm(0.05) > 0.5 and norm(0.01) > 0.3  # linear: 0.05, 0.01
    assert list(ax.lines[0].get_xdata()) == [0]  # the mark above the sink's column
    weights[0] = np.nan  # a row without a query of the panel's type: grey over it, the scale unchanged
    fig, ax = plt.subplots()
    attention_panel(ax, weights, -1, "t", colour_scale([weights]))
    assert len(ax.images) == 2 and not ax.lines and ax.images[0].norm.vmax == 1.0
    grey = np.ma.getmaskarray(ax.images[1].get_array())  # masked: see-through
    assert grey[1:].all() and not grey[0].any()
    plt.close("all")
    assert colour_scale([weights, np.full((4, 4), 2.9)]).vmax == 2.9  # raw ReLU weights: the bar reaches them


def maps_of(layers, heads, query_types=(), share=False, t=4):
    """attention.npz's arrays for a model of `layers` x `heads` (each map its own constant, to follow it)."""
    maps = {"sink": np.array(0)}
    if query_types:
        maps["query_types"] = np.array(query_types)
    for prefix in ("", "share_") if share else ("",):
        for layer in range(layers):
            maps[f"{prefix}layer{layer}"] = np.stack(
                [np.full((t, t), 0.1 * (layer + 1) + 0.01 * h) for h in range(heads)]
            )
            if query_types:
                maps[f"{prefix}type_layer{layer}"] = np.stack([maps[f"{prefix}layer{layer}"]] * len(query_types))
    return maps


def test_the_grid_has_a_row_per_layer_and_kind_and_its_heads_per_query_type_across():
    labels, rows = grid(maps_of(2, 3, ("trigger", "non_trigger"), share=True))
    assert labels == ["layer 0, weights", "layer 0, shares", "layer 1, weights", "layer 1, shares"]
    titles = [f"head {h}, {q} queries" for q in ("trigger", "non_trigger") for h in range(3)]
    assert [[title for title, _, _ in row] for row in rows] == [titles] * 4
    assert rows[2][2][1][0, 0] == 0.1 * 2 + 0.01 * 2  # layer 1's head 2
    labels, rows = grid(maps_of(2, 1))  # one head, one view: a column of layers
    assert labels == ["layer 0", "layer 1"] and [[t for t, _, _ in row] for row in rows] == [["head 0"]] * 2
    labels, rows = grid(maps_of(1, 5, ("trigger", "non_trigger")))  # 10 panels: a row per query type
    assert labels == ["layer 0\ntrigger queries", "layer 0\nnon_trigger queries"]
    assert [[t for t, _, _ in row] for row in rows] == [[f"head {h}" for h in range(5)]] * 2
    moving = {"sink": np.array(-1), "example_sink": np.array([3, 1, 0, 2])}  # broadcast's hub, 2 layers x 2 heads
    for layer in (0, 1):
        moving[f"layer{layer}"] = np.full((2, 4, 4), 0.25)
        moving[f"example_layer{layer}"] = np.full((4, 2, 4, 4), 0.25)
    labels, rows = grid(moving)  # 8 panels a row would be a strip: a row per head, its sequences across
    assert labels == [f"layer {layer}\nhead {h}" for layer in (0, 1) for h in (0, 1)]
    assert [[(t, sink) for t, _, sink in row] for row in rows] == [
        [(f"sequence {e}", s) for e, s in enumerate([3, 1, 0, 2])]
    ] * 4


def test_the_grid_has_one_colour_bar_and_one_scale(tmp_path):
    figures = []
    draw_maps(maps_of(2, 4), "t", tmp_path / "a.png", save=lambda fig, path: figures.append(fig))
    fig = figures[0]
    panels = [ax for ax in fig.axes if ax.images]
    bars = [ax for ax in fig.axes if not ax.images and ax.get_label() == "<colorbar>"]
    assert len(panels) == 8 and len(bars) == 1
    assert len({id(ax.images[0].norm) for ax in panels}) == 1
    width, height = fig.get_size_inches()
    assert width < height * 2  # 2 layers x 4 heads: a grid, not a strip
    plt.close(fig)


def load_example(name):
    spec = importlib.util.spec_from_file_location(name, Path(__file__).parents[2] / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_inspect_run_draws_the_arrays_the_report_draws(make_config, tmp_path):
    run(make_config(*QUICK, "model.n_heads=2"), tmp_path / "r")
    path = tmp_path / "inspect.png"
    drawn = load_example("inspect_run").draw_attention(load_run(tmp_path / "r"), path)
    with np.load(tmp_path / "r" / rundir_files.ATTENTION) as stored:
        assert sorted(drawn) == sorted(stored.files) and "type_layer0" in drawn  # per query type, as report
        for name in stored.files:
            if stored[name].dtype.kind in "fi":
                np.testing.assert_allclose(drawn[name], stored[name], rtol=1e-6, equal_nan=True, err_msg=name)
            else:  # the query types' names
                np.testing.assert_array_equal(drawn[name], stored[name])
    assert path.stat().st_size > 1000
