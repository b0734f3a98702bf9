"""What a claim measures on a run (reproduce/measures.py) and how a paired claim compares two arms
(reproduce/judge.py), on hand-built runs with values set by hand."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sinkexp.reproduce.declare import Measure, Paired, at_most
from sinkexp.reproduce.finished import FinishedRun, MissingValue
from sinkexp.reproduce.judge import judge
from sinkexp.reproduce.measures import pooled_peak


def test_the_pooled_peak_is_the_dynamics_notebooks_sink_score(tmp_path):
    """max over keys of the attention pooled over queries and sequences, mean over heads: a head
    with all attention on key 2 scores 1, a uniform one 1/4; a layer the run lacks is missing."""
    on_key_2 = np.zeros((4, 4))
    on_key_2[:, 2] = 1.0
    np.savez(tmp_path / "attention.npz", layer0=np.stack([on_key_2, np.full((4, 4), 0.25)]), sink=np.array(0))
    run = FinishedRun(tmp_path, {"seed": 0}, pd.DataFrame())
    assert pooled_peak(0).of(run) == pytest.approx((1.0 + 0.25) / 2)
    with pytest.raises(MissingValue, match="no layer 1"):
        pooled_peak(1).of(run)


def test_a_sink_split_over_two_keys_is_named_beside_the_pooled_peak(tmp_path):
    """The detail gives the two largest pooled keys and the per-sequence max_inflow: a run whose
    attention splits 0.3 / 0.28 over keys 3 and 1 reads a peak of 0.3, the split beside it."""
    split = np.zeros((4, 4))
    split[:, 3], split[:, 1], split[:, 0], split[:, 2] = 0.3, 0.28, 0.22, 0.2
    np.savez(tmp_path / "attention.npz", layer0=split[None], sink=np.array(0))
    finals = pd.DataFrame({"layer": [0], "query_type": ["all"], "metric": ["max_inflow"], "value": [0.316]})
    run = FinishedRun(tmp_path, {"seed": 0}, finals)
    assert pooled_peak(0).of(run) == pytest.approx(0.3)
    assert pooled_peak(0).detail(run) == "key 3: 0.3, key 1: 0.28; per sequence (max_inflow) 0.316"


def test_a_ratio_over_the_against_runs_spread():
    """(run / its draw's against run) / (max / min of the against runs): the against arm reads
    1.0, 1.1 and 1.2 over its draws (spread 1.2); a run 1.3x its pair reads 1.3 / 1.2."""
    against = {0: 1.0, 1: 1.1, 2: 1.2}
    arm = {0: 1.3, 1: 1.1 * 1.1, 2: 1.2}
    runs = [
        FinishedRun(Path(f"{name}-s{seed}"), {"seed": seed, "arm": name, "value": values[seed]}, pd.DataFrame())
        for name, values in (("penalised", arm), ("base", against))
        for seed in (0, 1, 2)
    ]
    for run in runs:
        run.__dict__["initial"] = run
    claim = Paired(
        name="keeps",
        kind="paper",
        statement="-",
        source="-",
        paper_value="-",
        experiment="",
        where={"arm": "penalised"},
        measure=Measure("value", lambda run: run.settings["value"]),
        criterion=at_most(1.0),
        against={"arm": "base"},
        compare="ratio over spread",
    )
    table = pd.DataFrame(
        {"run": [str(r.path) for r in runs], "status": "done", "arm": [r.settings["arm"] for r in runs]}
    )
    result = judge(claim, runs, table)
    assert result.values == pytest.approx({"s0": 1.3 / 1.2, "s1": 1.1 / 1.2, "s2": 1.0 / 1.2})
    assert result.failing == pytest.approx({"s0": 1.3 / 1.2})


def test_the_spike_measures_read_the_layer_of_the_largest_massive_ratio():
    """Hand-set final values of two layers: the largest massive_ratio is layer 1's (ratio 300, at
    position 0, channel 7), whose massive_at_sink is 0.9; the residual norms' ratio is averaged over
    the layers (4 / 2 and 9 / 3: 2.5)."""
    from sinkexp.reproduce.measures import at_peak, largest_spike, layer_ratio

    values = {
        0: {"massive_ratio": 50, "massive_position": 3, "massive_channel": 1, "massive_at_sink": 0.1},
        1: {"massive_ratio": 300, "massive_position": 0, "massive_channel": 7, "massive_at_sink": 0.9},
    }
    norms = {0: (4.0, 2.0), 1: (9.0, 3.0)}
    rows = [(layer, metric, value) for layer, metrics in values.items() for metric, value in metrics.items()]
    rows += [(layer, name, value) for layer, pair in norms.items() for name, value in zip(("sink", "rest"), pair)]
    finals = pd.DataFrame(rows, columns=["layer", "metric", "value"]).assign(query_type="all")
    finals["metric"] = finals["metric"].replace({"sink": "resid_norm_sink", "rest": "resid_norm_rest"})
    run = FinishedRun(Path("r"), {"seed": 0}, finals)
    assert largest_spike().of(run) == 300 and largest_spike().detail(run) == "layer 1, position 0, channel 7"
    assert at_peak("massive_at_sink").of(run) == 0.9
    assert layer_ratio("resid_norm_sink", "resid_norm_rest").of(run) == pytest.approx(2.5)
