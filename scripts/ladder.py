"""The scale ladder of the language-model claims: the measures the LM claims read, at sizes above the
CPU defaults, beside the papers' values (where does the laptop's reach end?).

    python scripts/ladder.py             # train the rungs not yet finished (outputs/ladder/), then report
    python scripts/ladder.py --plan      # the rungs, their runs and training FLOPs; nothing trains
    python scripts/ladder.py --report    # the table and figure from the runs that exist
    python scripts/ladder.py --rungs defaults constant_lr  # only these rungs

Each rung is `task=lm` (model=llama) with a few overrides, three seeds: the defaults, then Gu et
al.'s training recipe at the same compute, then that recipe with 4x the steps or twice the width
(training FLOPs: config.training_flops x steps). Per run, the measures the LM claims of
sun2026, gu2025 and barbero2025 read (docs/metrics.md):
- sink rate over all heads at alpha_s > 0.3 (Gu et al. 2025: 18.18% over the heads of softmax LMs);
- the largest head sink score, the largest mean attention on the first token of any head at text
  queries (a sink: > 0.3, Gu's and Barbero's epsilon);
- the largest massive_ratio over layers (Sun et al.: spikes of ~1,000-10,000 x the median; i.i.d.
  Gaussian entries of the stream's shape give ~7).
A rung's run that `sinkexp reproduce` has finished already (the same config and seed: the same
directory name, below outputs/reproduce/ or `--copy-from DIR`) is copied, not trained again: the
defaults, for one, are sun2026's pre-norm LM runs.
Writes outputs/ladder/ladder.csv (a row per run) and ladder.png (each measure per rung, with its
training FLOPs, one point per seed, the paper's value dashed). Which rungs, and their order, are
sinkexp's choice.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from sinkexp.plan import plan
from sinkexp.runfiles import RunFiles, collect, write_csv

ROOT = Path("outputs/ladder")
REPRODUCED = Path("outputs/reproduce")          # sinkexp reproduce's runs, copied where a rung repeats one
SEEDS = (0, 1, 2)
# Gu et al.'s recipe, from their code (sail-sg/Attention-Sink): every config sets min_lr equal to
# learning_rate, so after 100 warm-up steps the rate is constant (their text says cosine); weight
# decay 0.1, and 0.5 gave their largest sink rate (41% against 18% at 0.1, Table 2).
GU = ("train.schedule=constant",)
GU_DECAY = (*GU, "train.weight_decay=0.5")
RUNGS = {                                       # each: the overrides of task=lm's defaults
    "defaults": (),                             # 4 x 4, d_model 64, 2000 steps of 32 x 128 bytes, cosine
    "constant_lr": GU,                          # Gu's schedule, the same compute
    "constant_lr_wd0.5": GU_DECAY,              # and Gu's most sinking weight decay
    "constant_lr_wd0.5_steps_8000": (*GU_DECAY, "train.steps=8000"),   # 4x the bytes
    "constant_lr_wd0.5_d128": (*GU_DECAY, "model.d_model=128"),        # ~3.5x the parameters
}
# measure -> (what it is, the paper's value, where that value comes from)
MEASURES = {
    "sink_rate": ("sink rate over all heads (alpha_s > 0.3)", 0.1818, "Gu et al. 2025: 18.18% (softmax LMs)"),
    "largest_head_sink_score": ("largest head sink score", 0.3, "a sink: alpha_s > 0.3 (Gu, Barbero)"),
    "largest_massive_ratio": ("largest massive_ratio over layers", 1000.0, "Sun et al.: ~1,000-10,000x"),
}


def rung_overrides(rung: str, seeds=SEEDS) -> list[str]:
    return ["task=lm", *RUNGS[rung], f"seed={','.join(map(str, seeds))}"]


def measures(run: Path) -> dict[str, float]:
    """The three measures of one finished run, from its final step."""
    files = RunFiles(run)
    m = files.metrics
    last = m[m["step"] == m["step"].max()]
    heads = last[(last["metric"] == "sink_attn") & (last["query_type"] == "text") & (last["head"] >= 0)]
    rate = last[(last["metric"] == "sink_rate@0.3") & (last["layer"] == -1)]["value"]
    massive = last[(last["metric"] == "massive_ratio") & (last["layer"] >= 0)]["value"]
    return {"sink_rate": float(rate.iloc[0]), "largest_head_sink_score": float(heads["value"].max()),
            "largest_massive_ratio": float(massive.max())}


def table(root: Path, flops: dict[str, float]) -> pd.DataFrame:
    """A row per finished run of the rungs (`flops`: each rung's training FLOPs per run): rung, seed,
    training FLOPs, held-out loss (nats per byte), the measures."""
    rows = []
    for rung, train_flops in flops.items():
        runs, _ = collect(root / rung) if (root / rung).is_dir() else (pd.DataFrame(columns=["status"]), None)
        for _, run in runs[runs["status"] == "done"].iterrows():
            path = root / rung / run["run"]
            rows.append({"rung": rung, "seed": int(run["seed"]), "train_flops": train_flops,
                         "loss": RunFiles(path).summary["loss"]["all"], **measures(path)})
    return pd.DataFrame(rows)


def summary(rows: pd.DataFrame) -> pd.DataFrame:
    """A row per rung: its runs, training FLOPs, and each value as mean [min, max] over the seeds."""
    def spread(values: pd.Series) -> str:
        return f"{values.mean():.4g} [{values.min():.4g}, {values.max():.4g}]"
    grouped = rows.groupby("rung", sort=False)
    return pd.DataFrame({"runs": grouped.size(), "train_flops": grouped["train_flops"].first().map("{:.3g}".format),
                         **{name: grouped[name].agg(spread) for name in ("loss", *MEASURES)}}).reset_index()


def figure(rows: pd.DataFrame, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rungs = list(dict.fromkeys(rows["rung"]))      # in ladder order; rungs of equal compute stand apart
    flops = rows.groupby("rung")["train_flops"].first()
    fig, axes = plt.subplots(1, len(MEASURES), figsize=(5 * len(MEASURES), 4.5))
    for ax, (name, (label, paper, source)) in zip(axes, MEASURES.items()):
        ax.scatter(rows["rung"].map(rungs.index), rows[name], color="C0", label="a seed")
        ax.axhline(paper, color="k", linestyle="--", linewidth=1, label=source)
        ax.set_xticks(range(len(rungs)), [f"{rung}\n{flops[rung]:.2g} FLOPs" for rung in rungs],
                      rotation=30, ha="right", fontsize=7)
        if name == "largest_massive_ratio":
            ax.set_yscale("log")
        ax.set_title(label, fontsize=10)
        ax.legend(fontsize=7)
    fig.suptitle("task=lm, model=llama: the LM claims' measures up the ladder (one point per seed)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None, root: Path = ROOT, extra: tuple[str, ...] = ()) -> int:
    """`extra`: overrides for every run (tests: tiny sizes)."""
    from sinkexp.errors import ConfigError
    from sinkexp.reproduce.execute import copy_finished_twins, planned_dirs, run_pool

    parser = argparse.ArgumentParser(prog="scripts/ladder.py", description=__doc__.splitlines()[0])
    parser.add_argument("--plan", action="store_true", help="list the rungs; train nothing")
    parser.add_argument("--report", action="store_true", help="table and figure from the runs that exist")
    parser.add_argument("--rungs", nargs="+", default=list(RUNGS), choices=list(RUNGS), metavar="RUNG",
                        help=f"rungs to train and report (default: all: {', '.join(RUNGS)})")
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS), help="model seeds (default: 0 1 2)")
    parser.add_argument("--copy-from", type=Path, default=REPRODUCED, metavar="DIR",
                        help=f"copy finished runs of the same config from below DIR (default: {REPRODUCED})")
    args = parser.parse_args(argv)
    try:
        plans = {("ladder", rung): plan([f"hydra.sweep.dir={root / rung}", *rung_overrides(rung, args.seeds), *extra],
                                        multirun=True) for rung in args.rungs}
    except ConfigError as err:
        print(f"sinkexp: error: {err}", file=sys.stderr)
        return 2
    if args.plan:
        for (_, rung), planned in plans.items():
            print(f"{rung}: {len(planned.runs)} runs, {planned.jobs[0].flops:.3g} training FLOPs each "
                  f"({' '.join(RUNGS[rung]) or 'the task=lm defaults'})")
        return 0
    if not args.report:
        for planned in plans.values():
            copy_finished_twins(planned_dirs(planned), args.copy_from)
        run_pool(plans, root, list(extra))
    rows = table(root, {rung: planned.jobs[0].flops for (_, rung), planned in plans.items()})
    if rows.empty:
        print("no finished runs yet", file=sys.stderr)
        return 1
    write_csv(root / "ladder.csv", rows)
    figure(rows, root / "ladder.png")
    print(summary(rows).to_string(index=False))
    print(f"written: {root / 'ladder.csv'}, {root / 'ladder.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
