"""rundir/files.py writes a run's tables without pandas (write_rows): the bytes must be what
pandas' to_csv wrote for the same rows before, since runs already on disk are compared with new ones
byte for byte (scripts/compare_tables.sh) and read back with pandas (rundir/reading.py)."""

import math
import random

import pandas as pd

from sinkexp.evaluate.tables import LOSS_COLUMNS, METRIC_COLUMNS
from sinkexp.rundir import files


def test_write_rows_writes_what_pandas_to_csv_writes(tmp_path):
    draw = random.Random(0)
    metrics = [
        (step, layer, head, "trigger", "sink_attn", draw.uniform(-1, 1) * 10 ** draw.randint(-20, 20))
        for step in (0, 10)
        for layer in (-1, 0)
        for head in (-1, 0, 1)
    ]
    metrics += [(10, 0, -1, "all", "massive_position", 3), (10, 0, -1, "all", "qk_sigma1/sigma2", 1e16)]
    losses = [(0, "train", math.nan), (0, "eval/a", math.inf), (10, "eval/a", 0.1), (10, "baseline/a", 1e-5)]
    for name, columns, rows in (("metrics.csv", METRIC_COLUMNS, metrics), ("losses.csv", LOSS_COLUMNS, losses)):
        files.write_rows(tmp_path / name, columns, rows)
        pd.DataFrame(rows, columns=columns).to_csv(tmp_path / f"pandas_{name}", index=False)
        written = (tmp_path / name).read_bytes()
        assert written == (tmp_path / f"pandas_{name}").read_bytes()
    assert b"massive_position,3.0\n" in (tmp_path / "metrics.csv").read_bytes()  # an int in a float column
    assert (tmp_path / "losses.csv").read_text().splitlines()[1] == "0,train,"  # NaN: an empty field


def test_a_table_of_integers_stays_integers(tmp_path):
    files.write_rows(tmp_path / "t.csv", ["step", "n"], [(0, 1), (1, 2)])
    assert (tmp_path / "t.csv").read_text() == "step,n\n0,1\n1,2\n"
    pd.DataFrame([(0, 1), (1, 2)], columns=["step", "n"]).to_csv(tmp_path / "p.csv", index=False)
    assert (tmp_path / "p.csv").read_text() == "step,n\n0,1\n1,2\n"
