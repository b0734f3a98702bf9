"""A run's final values are computed without pandas (evaluate/tables.py final_rows) and read back
with it (rundir/reading.py final_values): both must give pandas' own groupby mean, value for value,
so summary.json and `sinkexp report` agree to the last bit."""

import random

import pandas as pd

from sinkexp.evaluate.tables import FINAL_COLUMNS, LOSS_COLUMNS, METRIC_COLUMNS, final_rows
from sinkexp.rundir.reading import final_values


def random_tables(seed: int) -> tuple[list, list]:
    """Two evaluated steps of 3 layers x 8 heads x 2 query types x 3 metrics, values over many
    magnitudes (where a plain sum and a compensated one differ), a few NaN and an integer."""
    draw = random.Random(seed)
    metrics = []
    for step in (0, 50):
        for layer in (-1, 0, 1, 2):
            for query_type in ("trigger", "all"):
                for metric in ("sink_attn", "massive_ratio", "value_norm_ratio"):
                    for head in range(8 if layer >= 0 else 1):
                        value = draw.uniform(-1, 1) * 10 ** draw.randint(-8, 8)
                        value = float("nan") if draw.random() < 0.05 else value
                        metrics.append((step, layer, head if layer >= 0 else -1, query_type, metric, value))
    metrics.append((50, 0, -1, "all", "massive_position", 3))  # an integer metric, as the evaluator writes one
    losses = [(s, split, draw.random()) for s in (0, 50) for split in ("train", "eval/trigger", "baseline/all")]
    return metrics, losses


def pandas_final(metrics: list, losses: list) -> pd.DataFrame:
    """The derivation as pandas states it (what tables.py computed before it dropped pandas)."""
    m, losses = pd.DataFrame(metrics, columns=METRIC_COLUMNS), pd.DataFrame(losses, columns=LOSS_COLUMNS)
    last = m["step"].max()
    per_layer = m[m["step"] == last].groupby(["layer", "query_type", "metric"], as_index=False)["value"].mean()
    losses = losses[(losses["step"] == last) & losses["split"].str.contains("/")]
    split = losses["split"].str.split("/", n=1, expand=True)
    loss_values = pd.DataFrame(
        {"layer": -1, "query_type": split[1], "metric": "loss_" + split[0], "value": losses["loss"].to_numpy()}
    )
    return pd.concat([per_layer, loss_values], ignore_index=True)[FINAL_COLUMNS]


def test_final_rows_are_pandas_groupby_mean_bit_for_bit():
    for seed in range(5):
        metrics, losses = random_tables(seed)
        expected = list(pandas_final(metrics, losses).itertuples(index=False, name=None))
        got = final_rows(metrics, losses)
        assert len(got) == len(expected) == 4 * 2 * 3 + 1 + 2  # step 50: 24 groups, massive_position, 2 losses
        for row, want in zip(got, expected):
            assert row[:3] == want[:3]
            assert row[3] == want[3] or (row[3] != row[3] and want[3] != want[3]), (row, want)  # NaN only as NaN


def test_final_values_of_tables_read_back_are_the_rows_a_run_computed():
    metrics, losses = random_tables(7)
    m, losses_frame = pd.DataFrame(metrics, columns=METRIC_COLUMNS), pd.DataFrame(losses, columns=LOSS_COLUMNS)
    frame = final_values(m, losses_frame)
    assert list(frame.columns) == FINAL_COLUMNS
    pd.testing.assert_frame_equal(frame, pd.DataFrame(final_rows(metrics, losses), columns=FINAL_COLUMNS))
    pd.testing.assert_frame_equal(frame, pandas_final(metrics, losses), check_exact=True)


def test_a_compensated_sum_differs_from_a_plain_one_where_pandas_does():
    """The check above can fail: a naive mean misses pandas' value on these heads."""
    values = [1e16, 1.0, 1.0, -1e16]
    rows = [(0, 0, head, "all", "m", value) for head, value in enumerate(values)]
    losses = [(0, "eval/all", 1.0)]
    assert final_rows(rows, losses)[0][3] == pandas_final(rows, losses).loc[0, "value"] == 0.5
    assert sum(values) / len(values) != 0.5
