"""The report's figures of a measured language model (a `sinkexp measure` run), from its run
directory's files only (docs/rundir.md; hf/record.py writes the last two at measure time):

    first_token_<setting>.png  each head's attention on the first position (sink_attn of the text
                               queries, metrics.csv): one heatmap of every layer x head, layers as rows
    heads_maps_<setting>.png   chosen heads' attention maps among the first positions (attention.npz),
                               by default the heads of the largest, the median and the smallest sink score
    massive_<setting>.png      the massive-activation profile (massive.csv): per layer the three largest
                               |h| and the median, each a mean over the sequences, as Sun et al. 2024 (§2)
                               draw it, with the position and channel of the largest |h|

report/runs.py calls draw_measured for one measured run per setting; the trained runs' step
dynamics (figures.py) are not drawn for measured runs. Every figure goes through the `save` given
to draw_measured (report/save.py's Saver: the formats and dpi of --format and --dpi).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from sinkexp.hf import quantization
from sinkexp.report.maps import attention_panel, colour_scale
from sinkexp.report.save import Saver
from sinkexp.rundir import files as rundir_files
from sinkexp.rundir.reading import read_settings

SAVE = Saver()  # PNG at the report's default dpi
PROFILE = (("top1", "largest |h|", "C0", "o"), ("top2", "2nd", "C2", "s"), ("top3", "3rd", "C4", "^"))


class BadHeads(ValueError):
    """--heads names a head that is not LAYER.HEAD or not in the measured model: one line, exit 2."""


def per_head(run: Path, metric: str, query_type: str) -> pd.DataFrame:
    """A layer x head grid of a per-head metric at the run's (last) step."""
    metrics = pd.read_csv(run / rundir_files.METRICS_CSV)
    chosen = metrics[
        (metrics["metric"] == metric)
        & (metrics["query_type"] == query_type)
        & (metrics["head"] >= 0)
        & (metrics["step"] == metrics["step"].max())
    ]
    return chosen.pivot_table(index="layer", columns="head", values="value")


def plot_first_token(run: Path, label: str, path: Path, save=SAVE):
    """Every head's attention on the first position in one heatmap (a 30 x 9 grid stays readable:
    one colour bar, the values written in the cells while they fit)."""
    grid = per_head(run, "sink_attn", "text")
    layers, heads = grid.shape
    fig, ax = plt.subplots(figsize=(2.2 + 0.55 * heads, 1.3 + 0.3 * layers))
    image = ax.imshow(grid.values, cmap="viridis", vmin=0, vmax=1, aspect="auto", interpolation="nearest")
    if heads <= 16 and layers <= 48:
        for (i, j), value in np.ndenumerate(grid.values):
            colour = "white" if value < 0.5 else "black"
            ax.text(j, i, f"{value:.2f}", ha="center", va="center", color=colour, fontsize=6.5)
    ax.set_xticks(range(heads), [str(h) for h in grid.columns], fontsize=8)
    ax.set_yticks(range(layers), [str(layer) for layer in grid.index], fontsize=7)
    ax.set(xlabel="head", ylabel="layer")
    fig.colorbar(image, ax=ax, fraction=0.08, pad=0.03, label="attention on the first position")
    ax.set_title(f"{label}\nattention on position 0, mean over queries and sequences", fontsize=9)
    return save(fig, path)


def chosen_heads(run: Path, heads: list[tuple[int, int]] | None) -> list[tuple[int, int]]:
    """`heads` as given, else the heads of the largest, the median and the smallest sink score."""
    scores = per_head(run, "sink_score", "all").stack().dropna().sort_values(ascending=False)
    if heads:
        missing = [f"{layer}.{head}" for layer, head in heads if (layer, head) not in scores.index]
        if missing:
            raise BadHeads(
                f"--heads {missing[0]}: {run.name} has layers 0..{scores.index.levels[0].max()} and heads "
                f"0..{scores.index.levels[1].max()}"
            )
        return heads
    ranks = sorted({0, len(scores) // 2, len(scores) - 1})
    return [(int(layer), int(head)) for layer, head in scores.index[ranks]]


def plot_head_maps(run: Path, label: str, path: Path, heads: list[tuple[int, int]] | None = None, save=SAVE):
    """The chosen heads' attention maps (attention.npz: the first positions, mean over sequences)."""
    chosen = chosen_heads(run, heads)
    scores = per_head(run, "sink_score", "all")
    with np.load(run / rundir_files.ATTENTION) as maps:
        panels = [(layer, head, maps[f"layer{layer}"][head]) for layer, head in chosen]
    fig, axes = plt.subplots(
        1, len(panels), figsize=(3.6 * len(panels) + 0.8, 3.6), squeeze=False, layout="constrained"
    )
    norm = colour_scale([weights for _, _, weights in panels])
    for ax, (layer, head, weights) in zip(axes[0], panels):
        title = f"layer {layer}, head {head} (sink score {scores.loc[layer, head]:.2f})"
        image = attention_panel(ax, weights, 0, title, norm)
        ax.set(xlabel="key (sink 0: red mark)", ylabel="query")
    fig.colorbar(image, ax=axes, extend="min", label="attention (log scale)", aspect=25)
    positions = panels[0][2].shape[0]
    fig.suptitle(f"{label}: attention among the first {positions} positions, mean over sequences", fontsize=9)
    return save(fig, path)


def plot_massive(run: Path, label: str, path: Path, save=SAVE):
    """Per layer the three largest |h| and the median (log scale; Sun et al.'s axis is linear), and
    where the largest |h| of any sequence sits, written where it moves from the layer before."""
    profile = pd.read_csv(run / rundir_files.MASSIVE)
    fig, ax = plt.subplots(figsize=(max(5.0, 0.22 * len(profile) + 3), 3.8))
    for column, name, colour, marker in PROFILE:
        ax.plot(profile["layer"], profile[column], color=colour, marker=marker, markersize=4, label=name)
    ax.plot(profile["layer"], profile["median"], color="0.4", marker="v", markersize=4, label="median |h|")
    before, last, lift = None, (-9, 1.0), 0
    for row in profile.itertuples():
        if (row.position, row.channel) != before:  # stacked higher when the last one is close by, 3 high at most
            near = row.layer - last[0] <= 2 and abs(np.log10(max(row.top1, 1e-30) / max(last[1], 1e-30))) < 1
            lift = lift + 18 if near and lift < 43 else 7
            ax.annotate(
                f"pos {row.position}\nch {row.channel}",
                (row.layer, row.top1),
                textcoords="offset points",
                xytext=(0, lift),
                ha="center",
                fontsize=6,
                arrowprops=dict(arrowstyle="-", color="0.6", lw=0.5) if lift > 7 else None,
            )
            before, last = (row.position, row.channel), (row.layer, row.top1)
    ax.set(xlabel="layer (the residual stream after the block)", ylabel="|h|", yscale="log")
    ax.set_xticks(profile["layer"][:: max(1, len(profile) // 15)])
    ax.set_ylim(top=profile[["top1", "top2", "top3", "median"]].to_numpy().max() * 300)  # room for the labels
    ax.legend(fontsize=7, frameon=False, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.18))
    ax.set_title(
        f"{label}\nmassive activations: |h| per layer, mean over sequences (pos/ch: the largest |h|)", fontsize=9
    )
    return save(fig, path)


def draw_measured(run: Path, label: str, name: str, out: Path, heads=None, save=SAVE) -> list:
    """A measured run's figures into `out` (name: the setting in file names), each written by
    `save(fig, path)`; those whose files the run lacks (measured before hf/record.py) are left out.
    Titles name the measured model (and its quantization) and the rest of the setting."""
    settings = read_settings(run)
    model = Path(str(settings.get("model", run.name))).name
    kind = settings.get(quantization.FILE_TYPE)
    model += f" ({quantization.short(kind)})" if kind else ""
    setting = [part for part in label.split(", ") if label != "all runs" and not part.startswith("model=")]
    label = ", ".join([model, *setting])  # the model once: the title begins with it
    drawn = [plot_first_token(run, label, out / f"first_token_{name}.png", save)]
    if (run / rundir_files.ATTENTION).exists():
        drawn.append(plot_head_maps(run, label, out / f"heads_maps_{name}.png", heads, save))
    if (run / rundir_files.MASSIVE).exists():
        drawn.append(plot_massive(run, label, out / f"massive_{name}.png", save))
    return drawn


def parse_heads(text: str) -> list[tuple[int, int]]:
    """`3.1,10.4` -> [(3, 1), (10, 4)] (LAYER.HEAD pairs); BadHeads naming the bad one."""
    pairs = []
    for item in text.split(","):
        layer, _, head = item.strip().partition(".")
        if not (layer.isdigit() and head.isdigit()):
            raise BadHeads(f"--heads {item!r} is not LAYER.HEAD (e.g. --heads 3.1,10.4)")
        pairs.append((int(layer), int(head)))
    return pairs
