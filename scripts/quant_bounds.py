"""How far a GGUF quantization moves sinkexp's metrics: each weight matrix of a trained sinkexp run
quantized and dequantized with the gguf package's own quantizers (gguf.quants), then every final
metric and the held-out loss compared with the float weights' (docs/measure.md, "What the 4-bit
weights move").

    .venv/bin/python scripts/quant_bounds.py RUN_DIR [RUN_DIR ...] [--types Q4_1,Q4_K,Q8_0]

For each run and type: the relative weight error (||W' - W|| / ||W|| over the quantized matrices)
and the held-out loss, then per metric the largest |value| of the float model over layers and query
types and, per type, the largest |change| over them divided by it (the change itself where that
value is 0; massive_position and massive_channel: in how many layers they moved). `--markdown`
ends with one table over all the runs (docs/measure.md's). A matrix is quantized as a GGUF file stores it,
row by row in blocks (32 values for Q4_0-Q8_0, 256 for the K types); one whose rows are not a whole
number of blocks, and every vector (norms, biases), keeps its float weights as llama.cpp's
converter keeps norms in F32 (their names are printed). A type without a Python quantizer in the
installed gguf (Q4_K in gguf 0.19: its dequantizer only) is said and skipped. Needs `pip install gguf`.
"""

from __future__ import annotations

import argparse
import copy
from importlib.metadata import version
from pathlib import Path

import gguf
import numpy as np
import pandas as pd
import torch
from gguf import quants

from sinkexp import load_run
from sinkexp.evaluate.evaluator import evaluate
from sinkexp.evaluate.tables import FINAL_COLUMNS, final_rows

KEYS = ["layer", "query_type", "metric"]


def quantizable(tensor: torch.Tensor, kind: gguf.GGMLQuantizationType) -> bool:
    """A matrix whose rows are whole blocks of `kind` (GGUF quantizes along the last dimension)."""
    block, _ = gguf.GGML_QUANT_SIZES[kind]
    return tensor.dim() >= 2 and tensor.shape[-1] % block == 0


def round_trip(tensor: torch.Tensor, kind: gguf.GGMLQuantizationType) -> torch.Tensor:
    """The tensor as a GGUF file of `kind` would give it back (quantize, then dequantize)."""
    data = tensor.detach().float().cpu().numpy()
    back = quants.dequantize(quants.quantize(data, kind), kind).reshape(data.shape)
    return torch.from_numpy(np.ascontiguousarray(back)).to(tensor)


def has_quantizer(kind: gguf.GGMLQuantizationType) -> bool:
    try:
        quants.quantize(np.zeros((1, 256), dtype=np.float32), kind)
    except NotImplementedError:
        return False
    return True


def quantized(model, kind) -> tuple[object, float, list[str]]:
    """(a copy of the model with its quantizable matrices round-tripped, the relative weight error,
    the names of the tensors left in float)."""
    copied = copy.deepcopy(model)
    error = total = 0.0
    kept = []
    with torch.no_grad():
        for name, tensor in copied.named_parameters():
            if not quantizable(tensor, kind):
                kept.append(name)
                continue
            back = round_trip(tensor, kind)
            error += (back - tensor).float().pow(2).sum().item()
            total += tensor.float().pow(2).sum().item()
            tensor.copy_(back)
    return copied, (error / total) ** 0.5, kept


def finals(model, run) -> pd.Series:
    """The model's final values on the run's held-out batch, indexed by layer, query type, metric."""
    metric_rows, loss_rows = evaluate(model, run.task, run.batch, run.step)
    table = pd.DataFrame(final_rows(metric_rows, loss_rows), columns=FINAL_COLUMNS)
    return table.set_index(KEYS)["value"]


LOCATIONS = ("massive_position", "massive_channel")  # where, not how much: counted as rows that moved


def compare(float_values: pd.Series, changed: pd.Series) -> pd.DataFrame:
    """Per metric: the largest |change| over its layers and query types, the float model's largest
    |value|, and their ratio (the reference predictor's loss, which no weight changes, left out)."""
    frame = pd.DataFrame({"float": float_values, "quantized": changed}).dropna()
    metrics = frame.index.get_level_values("metric")
    frame = frame[~metrics.isin((*LOCATIONS, "loss_baseline"))]
    frame["change"] = (frame["quantized"] - frame["float"]).abs()
    by = frame.groupby(level="metric")
    table = pd.DataFrame(
        {"largest_change": by["change"].max(), "largest_value": by["float"].apply(lambda v: v.abs().max())}
    )
    ratio = table["largest_change"] / table["largest_value"].where(table["largest_value"] > 0)
    table["relative"] = ratio.fillna(table["largest_change"])  # a metric 0 everywhere: its change itself
    return table


def moved(float_values: pd.Series, changed: pd.Series) -> str:
    """How many layers' massive_position and massive_channel moved."""
    said = []
    for metric in LOCATIONS:
        before, after = float_values.xs(metric, level="metric"), changed.xs(metric, level="metric")
        said.append(f"{metric} moved in {int((before != after).sum())} of {len(before)} layers")
    return ", ".join(said)


def report(path: str, kinds: list) -> pd.DataFrame:
    """The run's comparison: a line per type, then the table (per metric, the float model's largest
    |value| and, per type, the largest |change| over it), printed and returned."""
    run = load_run(path)
    reference = finals(run.model, run)
    loss = reference.xs(("all", "loss_eval"), level=("query_type", "metric")).iloc[0]
    columns = {}
    for kind in kinds:
        model, error, kept = quantized(run.model, kind)
        values = finals(model, run)
        columns[kind.name] = compare(reference, values)
        changed = values.xs(("all", "loss_eval"), level=("query_type", "metric")).iloc[0]
        print(
            f"{path}: {kind.name}: weight error {error:.4f} (relative, Frobenius), held-out loss {loss:.5f} -> "
            f"{changed:.5f} ({(changed - loss) / loss:+.2%}), {moved(reference, values)}"
        )
        print(f"  kept in float: {', '.join(kept)}")
    table = pd.concat({name: table["relative"] for name, table in columns.items()}, axis=1)
    table.insert(0, "float", columns[kinds[0].name]["largest_value"])
    print(f"{path}: per metric, the largest |value| with float weights and the largest |change| over it:")
    with pd.option_context("display.width", 160, "display.max_rows", 200, "display.float_format", "{:.3g}".format):
        print(table.to_string())
    return table


def markdown(tables: dict[str, pd.DataFrame]) -> str:
    """One table over every run (a column group each): the rows of docs/measure.md."""
    joined = pd.concat(tables, axis=1)
    header = ["metric", *(f"{run} {column}" for run, column in joined.columns)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for metric, row in joined.iterrows():
        lines.append(f"| `{metric}` | " + " | ".join("" if pd.isna(v) else f"{v:.2g}" for v in row) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="finished sinkexp run directories")
    parser.add_argument("--types", default="Q4_1,Q4_K,Q8_0", help="GGUF quantization types, comma-separated")
    parser.add_argument("--markdown", action="store_true", help="then one markdown table over the runs")
    args = parser.parse_args(argv)
    kinds = [gguf.GGMLQuantizationType[name] for name in args.types.split(",")]
    print(f"gguf {version('gguf')}, torch {torch.__version__}, {torch.get_num_threads()} threads")
    for kind in kinds:
        if not has_quantizer(kind):
            print(f"{kind.name}: gguf {version('gguf')} has no Python quantizer for it (a dequantizer only): skipped")
    tables = {Path(path).name: report(path, [kind for kind in kinds if has_quantizer(kind)]) for path in args.runs}
    if args.markdown:
        print(markdown(tables))


if __name__ == "__main__":
    main()
