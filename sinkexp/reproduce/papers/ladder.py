"""The scale ladder of the language-model claims: sinkexp's own experiment set, not a paper.

Where does this machine's reach end? `task=lm` (model=llama) at sizes above the CPU defaults, with
the measures the LM claims of sun2026, gu2025 and barbero2025 read, three seeds per rung. The rungs
and their order are sinkexp's choice: the defaults (sun2026's pre-norm LM runs, copied where
`reproduce sun2026` has finished them), then Gu et al.'s training recipe at the same compute, then
that recipe with 4x the steps or twice the width (training FLOPs per run: `reproduce ladder --estimate`),
then the search for a size that sinks on every seed: from the 8000-step rung, one lever at a time
(twice its steps; twice the learning rate and twice the weight decay, Gu et al.'s levers: a higher
rate or decay, more sinks; half the context at the same bytes per step, Sun et al.'s: sinks arise
mainly in short-context training). The corpus is fixed (4.15 MB), so Gu et al.'s lever of more
unique data is not one this machine has.
Gu et al.'s recipe is read from their code (sail-sg/Attention-Sink): every config sets min_lr equal
to learning_rate, so after the warm-up the rate is constant (their text says cosine); weight decay
0.5 gave their largest sink rate (41% against 18% at 0.1, their Table 2).

Each rung asks whether the phenomena the LM claims need form at its size: a head whose sink score
alpha_s exceeds 0.3 (Gu et al.'s and Barbero et al.'s epsilon), and a massive activation of at
least 100x the median entry (sinkexp's threshold, as sun2026's; i.i.d. Gaussian entries of the
stream's shape give ~7: docs/metrics.md). All claims are extensions. Findings: docs/findings/ladder.md.
"""
from pathlib import Path

from sinkexp.reproduce.declare import Experiment, Paper, Value, at_least
from sinkexp.reproduce.measures import final, head_extreme

SEEDS = {"seed": (0, 1, 2)}
GU = {"train.schedule": "constant"}
GU_DECAY = {**GU, "train.weight_decay": 0.5}
RUNGS = {                                       # each: the overrides of task=lm's defaults
    "defaults": {},                             # 4 x 4, d_model 64, 2000 steps of 32 x 128 bytes, cosine
    "constant_lr": GU,                          # Gu's schedule, the same compute
    "constant_lr_wd0.5": GU_DECAY,              # and Gu's most sinking weight decay
    "constant_lr_wd0.5_steps_8000": {**GU_DECAY, "train.steps": 8000},   # 4x the bytes
    "constant_lr_wd0.5_d128": {**GU_DECAY, "model.d_model": 128},        # ~3.5x the parameters
    # The reach search (docs/findings/ladder.md): from the 8000-step rung, one lever at a time
    "constant_lr_wd0.5_steps_16000": {**GU_DECAY, "train.steps": 16000},                    # 2x the steps
    "constant_lr_wd0.5_steps_8000_lr6e-3": {**GU_DECAY, "train.steps": 8000, "train.lr": 6e-3},  # 2x the rate
    "constant_lr_wd1.0_steps_8000": {**GU, "train.weight_decay": 1.0, "train.steps": 8000},      # 2x the decay
    # half the context at the same bytes per step (Sun et al.: sinks arise mainly in short contexts)
    "constant_lr_wd0.5_steps_8000_ctx64": {**GU_DECAY, "train.steps": 8000, "task.seq_len": 64,
                                           "train.batch_size": 64},
}
# scale=reach for the LM experiments of gu2025, barbero2025 and sun2026: the search's first rung whose
# three seeds all sink (docs/findings/ladder.md), as overrides of task=lm's defaults, on seeds 3-5:
# seeds 0-2 chose the rung (its rows stay the ladder's), so a rung picked because it sank on them
# cannot make a claim hold. Its bytes per step (64 x 64 = 4096) are the LM context experiments' too,
# which keep their own length and batch. It was shown to sink for the BOS-first pre-norm softmax LM
# alone: the other arms' claims count it only through `reached` evidence of their own route.
REACH_RUNG = "constant_lr_wd0.5_steps_8000_ctx64"
REACH_SEEDS = (3, 4, 5)
LM_REACH = {**RUNGS[REACH_RUNG], "seed": REACH_SEEDS}
LM_REACH_AT_ITS_LENGTH = {key: value for key, value in LM_REACH.items()
                          if key not in ("task.seq_len", "train.batch_size")}
SINK = head_extreme("sink_attn", "all", "text")
SPIKE = final("massive_ratio", "max")


def rung_claims(rung: str) -> tuple:
    return (
        Value(name=f"{rung}_sinks", kind="extension",
              statement="Some head of the LM sinks on the first token (its mean attention there > 0.3).",
              source="Gu et al. 2025 / Barbero et al. 2025: a sink is alpha_s > 0.3", paper_value="> 0.3",
              experiment=rung, measure=SINK, criterion=at_least(0.3, by="source"), forms=True),
        Value(name=f"{rung}_spikes", kind="extension",
              statement="The LM grows a massive activation (max |h| >= 100 x median |h| after some block).",
              source="sinkexp's threshold (sun2026's)", paper_value="-", experiment=rung, measure=SPIKE,
              criterion=at_least(100.0), forms=True),
    )


def rung_row(rung: str, folder: Path) -> str:
    """One rung's line of the table: per seed (0, 1, 2) the held-out loss, the sink rate over heads,
    the largest head's sink score (bold above 0.3) and the largest massive_ratio, at the final step."""
    # lazy: pulls in torch (~2.4 s) for the FLOPs; the declarations load without it
    from omegaconf import OmegaConf

    from sinkexp.config.validate import from_dictconfig
    from sinkexp.jobs.cost import training_flops
    from sinkexp.rundir.reading import FINISHED, RunFiles, collect

    runs, finals = collect(folder) if folder.is_dir() else ([], None)
    runs = runs[runs["status"].isin(FINISHED)].sort_values("seed") if len(runs) else runs
    if not len(runs):
        return f"| `{rung}` | not run yet | | | | | |"
    cells, flops = {"loss": [], "rate": [], "head": [], "massive": []}, set()
    for run in runs["run"]:
        mine, files = finals[finals["run"] == run], RunFiles(folder / run)
        cfg = from_dictconfig(OmegaConf.load(folder / run / "config.yaml"))
        flops.add(f"{training_flops(cfg) * cfg.train.steps:.2e}")
        at = (mine["layer"] == -1) & (mine["query_type"] == "all")
        cells["loss"].append(f"{mine[at & (mine['metric'] == 'loss_eval')]['value'].iloc[0]:.3f}")
        cells["rate"].append(f"{mine[at & (mine['metric'] == 'sink_rate@0.3')]['value'].iloc[0]:.3g}")
        m = files.metrics
        heads = m[(m["step"] == m["step"].max()) & (m["metric"] == "sink_attn") & (m["head"] >= 0)]
        top = heads[heads["query_type"] == "text"]["value"].max()
        cells["head"].append(f"**{top:.3f}**" if top > 0.3 else f"{top:.3f}")
        cells["massive"].append(f"{mine[mine['metric'] == 'massive_ratio']['value'].max():.1f}")
    sinking = sum("**" in cell for cell in cells["head"])
    values = " | ".join(", ".join(cells[name]) for name in cells)
    return f"| `{rung}` | {', '.join(sorted(flops))} | {values} | {sinking} of {len(runs)} |"


def rung_table(root: Path) -> str:
    """The ladder's table (docs/findings/ladder.md), every rung from its runs below `root`."""
    lines = [
        "| rung | training FLOPs per run | held-out loss (nats/byte) | sink rate over heads (0.3) "
        "| largest head sink score | largest `massive_ratio` | seeds with a head > 0.3 |",
        "|---|---|---|---|---|---|---|",
    ]
    return "\n".join(lines + [rung_row(rung, root / rung) for rung in RUNGS])


PAPER = Paper(
    name="ladder",
    title="The LM claims' measures up a scale ladder (sinkexp's own, task=lm)",
    experiments=tuple(Experiment(name=rung, overrides={"task": "lm", **extra}, grid=SEEDS)
                      for rung, extra in RUNGS.items()),
    claims=tuple(claim for rung in RUNGS for claim in rung_claims(rung)),
    findings=rung_table,
)
