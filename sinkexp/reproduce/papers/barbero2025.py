"""Barbero et al. 2025, "Why do LLMs attend to the first token?".

Table 2: a model pre-trained with BOS always first forms its sink on BOS, and loses it when BOS is
removed at inference, with a large loss of performance. sinkexp's small analogue (extensions): the
one-layer trigger model (Ran-Milo 2026's task; BOS is always position 0), evaluated on its held-out
batch with and without BOS (`sinkexp intervene` prints the same). CPU sizes: 1000 steps.

Sec. 3-4, Fig. 2 (perturbation, their Gemma 7B analysis): with BOS the change of one token stays
local, without it it spreads through the representations. Measured here (sinkexp/analysis/
perturbation.py) on the trigger model, on the one-layer backcopy model at seq_len 64 (the
`context_64` runs below) and on the LM, each with BOS and with BOS removed at inference; the
synthetic models' claims are extensions, the LM's is the paper's own setting.

Fig. 5 (Sec. 4, context length): at a fixed number of tokens per step, models pre-trained on longer
contexts form stronger sinks (the shortest almost none), and form them sooner, then saturate. The
small analogue: one-layer Bigram-Backcopy (Guo et al. 2024's task; synthetic tables, two structure
draws x three seeds) at seq_len 16 ... 256 with batch x seq_len = 8192 tokens (the backcopy CPU
default's 128 x 64) and 1000 steps each; the sink measure is non-trigger attention on BOS. Each
length is its own experiment (batch and length change together); a trend claim ranks a draw's
five runs by length. On a real table, per length L: `sinkexp train -m task=backcopy task.seq_len=L
train.batch_size=8192/L train.steps=1000 eval.every=50 task.bigram_table=PATH seed=0,1,2` (sinkexp's
other analogue, the BOS removal on the trigger task, has no table key).

Their own setting, a language model, is `task=lm` (next byte of the King James Version, BOS first,
the LLaMA-style `model=llama` preset, 4 x 4, d_model 64, 2000 steps; docs/tasks.md), three seeds:
Table 2's claims on it. "Forms its sink on BOS" is read as a sink rate over all heads >= 0.1
(alpha_s > 0.3 is the paper's epsilon, Sec. 2, after Gu et al.; the rate 0.1 is sinkexp's threshold,
as sun2026's and gu2025's LM claims), and the sink leaving, and the loss rising, require it. The
paper gives no figure for how far the sink leaves, the loss rises (Table 2's values are not in the
summary sinkexp has) or the perturbation spreads (Fig. 2), so those claims read the source's
direction beyond the spread: each run's value over its own untrained value (step 0, where no sink
formed), beyond what the untrained values differ by across seeds (`ratio beyond spread` against
UNTRAINED, docs/reproduce.md "Thresholds"), not sinkexp's factors (half the attention, twice the
loss, 1.5x the change) as before.
They pre-train with Gu et al.'s setup (Sec. 4; their App. A.1, not in the summary sinkexp has, was
not read), so every LM experiment here takes Gu's learning-rate schedule as Gu's code sets it,
constant after the warm-up (Gu's text says cosine; gu2025.py says where each stands). On the same LM, at
sinkexp's sizes:
- Fig. 5(a), context length: 64, 128, 256 and 512 bytes per sequence (BOS included) at 4096 bytes
  per step (the LM default's 32 x 128), 2000 steps each; the paper trains ~120M-parameter models on
  5B tokens at the same tokens per step. The trend requires that the LM sinks (`lm_sinks_on_bos`),
  not that the longest context does: that premise would hide a trend running the other way. Each model
  is measured on held-out windows of its own length (the paper measures every model with the same
  prompts).
- Sec. 5, trained without BOS (`task.bos=false`): the sink should form on the first byte, slightly
  weaker than on BOS. No token marks the first byte, and RoPE gives a layer-0 head relative
  positions only, so its sink must form by another route than the BOS model's (claims.ROUTES): the
  BOS model's sink is no evidence that the size suffices for it. "Weaker" is the source's direction
  beyond the BOS runs' spread (the BOS model's mean first-token attention over all heads, run for
  run); "slightly" has no figure.
- depth: the over-squashing bound (Sec. 3) says deeper models need more sinking heads; the paper
  tests it on LLaMA 3.1 8B-405B (Sec. 4), where depth and width grow together. Here only depth
  moves: 2, 4 and 8 layers at d_model 64, sinkexp's question (an extension). The trend requires
  sinks at 8 layers; the share of heads in the first and last layer changes with depth too (the
  per-layer values are in each run).
At `scale=reach` the LM runs at the scale ladder's first rung that sinks on every seed (`LM_REACH`,
papers/ladder.py: 8000 steps of 64 x 64 bytes, weight decay 0.5, the constant schedule, on seeds
3-5, not the seeds 0-2 that chose it; docs/findings/ladder.md): `lm` and `lm_no_bos`, and each
context length at its own length and 4096 bytes a step with the rung's steps and recipe
(`lm_context_64` is the rung itself); depth stays at the CPU size. The rung was shown to sink for
the 64-byte BOS model only: the longer contexts (the same route, BOS) count it as evidence only
where it formed by half of training on every seed (verdicts.py); the no-BOS model does not at all.
"""
from sinkexp.reproduce.declare import (
    UNTRAINED,
    Checkpoint,
    Experiment,
    Measure,
    Paired,
    Paper,
    Trend,
    Value,
    at_least,
    at_most,
    between,
)
from sinkexp.reproduce.finished import FinishedRun
from sinkexp.reproduce.measures import bos_removed, curve, final, first_step, perturbation_spread
from sinkexp.reproduce.papers.ladder import LM_REACH, LM_REACH_AT_ITS_LENGTH
from sinkexp.reproduce.papers.shipped import BEYOND as CHECKPOINT_BEYOND
from sinkexp.reproduce.papers.shipped import BEYOND_NOTE as CHECKPOINT_NOTE
from sinkexp.reproduce.papers.shipped import FIRST, GEMMA3, SMOLLM2, WEIGHTS

LENGTHS = (16, 32, 64, 128, 256)
TOKENS_PER_STEP = 8192
CONTEXT = tuple(f"context_{length}" for length in LENGTHS)
DRAWS = {"seed": (0, 1, 2), "task.structure_seed": (0, 1)}
BOS_ATTENTION = final("sink_attn", 0, "non_trigger")
LM_LENGTHS = (64, 128, 256, 512)
LM_BYTES_PER_STEP = 4096
LM_CONTEXT = tuple(f"lm_context_{length}" for length in LM_LENGTHS)
LM_SEEDS = {"seed": (0, 1, 2)}
LM = {"task": "lm", "train.schedule": "constant"}    # Gu et al.'s schedule as their code sets it
LM_SINK_RATE = final("sink_rate@0.3", -1)
FIRST_TOKEN = final("sink_attn", "mean", "text")     # mean attention on position 0 over every head
PERTURBATION = perturbation_spread()
PERTURBATION_NOTE = ("The paper shows the change (Fig. 2) and states no figure: the factor 1.5 is sinkexp's, as are "
                     "the changed token (a quarter of the way in, swapped with the next sequence's) and the measure "
                     "(the relative change of every block's output after it, mean over layers; docs/metrics.md).")
BEYOND = {"against": UNTRAINED, "compare": "ratio beyond spread"}   # the source's direction, no figure
BEYOND_NOTE = ("The paper gives no figure: each run's ratio over its own untrained ratio (step 0), beyond the "
               "untrained ratios' max / min over the seeds (docs/reproduce.md, 'Thresholds'). ")
SOURCE_ROUTE = "bos_softmax"    # how the BOS-first softmax LM sinks (claims.ROUTES)


def perturbation_claim(name: str, kind: str, experiment: str, requires: str, statement: str) -> Value:
    """Sec. 3-4, Fig. 2: the change of one token spreads less with the BOS sink than without BOS, by
    sinkexp's factor 1.5."""
    return Value(name=name, kind=kind, requires=requires, statement=statement, source="Sec. 3-4, Fig. 2 (Gemma 7B)",
                 paper_value="local with BOS, spreads without", experiment=experiment, measure=PERTURBATION,
                 criterion=at_least(1.5), note=PERTURBATION_NOTE)


def sink_formed_at(run: FinishedRun) -> float:
    """The first evaluated step at which non-trigger attention on BOS reaches 0.5 (inf: never)."""
    return first_step(curve(run, "sink_attn", "non_trigger"), 0.5)


PAPER = Paper(
    name="barbero2025",
    title="Barbero et al. 2025, why LLMs attend to the first token (BOS removed at inference; context length)",
    experiments=(
        Experiment(name="trigger", overrides={"task": "trigger", "attn": "softmax"}, grid={"seed": (0, 1, 2)},
                   cpu={"train.steps": 1000, "eval.every": 250}),
        Experiment(name="lm", overrides=LM, grid=LM_SEEDS, reach=LM_REACH),
        *(Experiment(name=name, overrides={"task": "backcopy", "task.seq_len": length,
                                           "train.batch_size": TOKENS_PER_STEP // length},
                     grid=DRAWS, cpu={"train.steps": 1000, "eval.every": 50})
          for name, length in zip(CONTEXT, LENGTHS)),
        *(Experiment(name=name, overrides={**LM, "task.seq_len": length,
                                           "train.batch_size": LM_BYTES_PER_STEP // length}, grid=LM_SEEDS,
                     reach=LM_REACH_AT_ITS_LENGTH)
          for name, length in zip(LM_CONTEXT, LM_LENGTHS)),
        Experiment(name="lm_no_bos", overrides={**LM, "task.bos": False}, grid=LM_SEEDS, reach=LM_REACH),
        Experiment(name="lm_depth", overrides=LM, grid={"model.n_layers": (2, 4, 8), **LM_SEEDS}),
        Checkpoint(name="llama31_405b", model="meta-llama/Llama-3.1-405B", settings={"dtype": "bfloat16"}),
        GEMMA3, SMOLLM2,   # the shipped checkpoints, at scale=pretrained
    ),
    claims=(
        Value(name="trigger_sinks_on_bos", kind="extension",
              statement="The one-layer trigger model sinks on BOS (Theorem 1 of ranmilo2026).", source="-",
              paper_value="-", experiment="trigger", measure=BOS_ATTENTION, criterion=at_least(0.9), forms=True),
        Value(name="sink_leaves_with_bos", kind="extension",
              statement="Without BOS at inference the first position no longer draws the attention.",
              source="Sec. 5, Table 2", paper_value="sink gone", experiment="trigger",
              measure=bos_removed("first_attn"), criterion=at_most(0.5), requires="trigger_sinks_on_bos"),
        Value(name="loss_rises_without_bos", kind="extension",
              statement="Without BOS at inference the model performs much worse.",
              source="Sec. 5, Table 2", paper_value="large drop", experiment="trigger", measure=bos_removed("loss"),
              criterion=at_least(2.0), requires="trigger_sinks_on_bos", note="The factor 2 is sinkexp's."),
        perturbation_claim("perturbation_stays_local_with_bos", "extension", "trigger", "trigger_sinks_on_bos",
                           "A one-token change moves the trigger model's representations less with its BOS sink "
                           "than with BOS removed at inference."),
        Value(name="backcopy_sinks_on_bos", kind="extension",
              statement="The one-layer Bigram-Backcopy model (seq_len 64) sinks on BOS (Guo et al. 2024).",
              source="-", paper_value="-", experiment="context_64", measure=BOS_ATTENTION, criterion=at_least(0.9),
              forms=True, note="The premise of the perturbation claim below; the threshold is sinkexp's."),
        perturbation_claim("backcopy_perturbation_stays_local_with_bos", "extension", "context_64",
                           "backcopy_sinks_on_bos", "... and a one-token change moves its representations less "
                           "with the sink than with BOS removed at inference."),
        Value(name="long_context_sinks", kind="extension",
              statement="Trained on the longest context (256), the backcopy model sinks on BOS.",
              source="Sec. 4, Fig. 5(a)", paper_value="most sinks at the longest contexts", experiment="context_256",
              measure=BOS_ATTENTION, criterion=at_least(0.5), forms=True,
              note="The premise of the trends below; the threshold 0.5 is sinkexp's."),
        Trend(name="longer_context_stronger_sink", kind="extension",
              statement="Trained on longer contexts (same tokens per step), models form stronger sinks.",
              source="Sec. 4, Fig. 5(a)", paper_value="sinks rise with length; the shortest almost none",
              experiment=CONTEXT, measure=BOS_ATTENTION, criterion=at_least(0.8), key="task.seq_len",
              requires="long_context_sinks"),
        Trend(name="longer_context_sinks_sooner", kind="extension",
              statement="... and form them sooner (the speed saturates at long contexts).",
              source="Sec. 4, Fig. 5(b)", paper_value="faster with length, then saturates", experiment=CONTEXT,
              measure=Measure("first step with sink_attn[layer 0, non_trigger] >= 0.5", sink_formed_at, ("sink_attn",)),
              criterion=at_most(-0.8), key="task.seq_len", requires="long_context_sinks",
              note="A draw whose sink never forms at some length ranks that length last."),
        Value(name="lm_sinks_on_bos", kind="paper", statement="An LM pre-trained with BOS first sinks on it "
              "(sink rate over all heads at alpha_s > 0.3 >= 0.1).", source="Sec. 5, Table 2",
              paper_value="sink on BOS", experiment="lm", measure=final("sink_rate@0.3", -1),
              criterion=at_least(0.1), forms=True, route=SOURCE_ROUTE,
              note="The rate threshold (one head in ten) is sinkexp's."),
        Paired(name="lm_sink_leaves_with_bos", kind="paper", requires="lm_sinks_on_bos", **BEYOND,
               statement="Without BOS at inference the LM's first position no longer draws the attention.",
               source="Sec. 5, Table 2", paper_value="sink gone", experiment="lm", measure=bos_removed("first_attn"),
               criterion=at_most(1.0, by="direction"),
               note=BEYOND_NOTE + "A fall: x (max / min) <= 1. sinkexp's reading of 'gone', at most half the "
                    "attention it had, is no longer the criterion."),
        Paired(name="lm_loss_rises_without_bos", kind="paper", requires="lm_sinks_on_bos", **BEYOND,
               statement="Without BOS at inference the LM performs much worse.", source="Sec. 5, Table 2",
               paper_value="large drop", experiment="lm", measure=bos_removed("loss"),
               criterion=at_least(1.0, by="direction"),
               note=BEYOND_NOTE + "A rise: / (max / min) >= 1. sinkexp's factor 2 for 'much worse' is no longer "
                    "the criterion."),
        Paired(name="lm_perturbation_stays_local_with_bos", kind="paper", requires="lm_sinks_on_bos", **BEYOND,
               statement="A one-token change moves the LM's representations less with its BOS sink than with BOS "
                         "removed at inference.", source="Sec. 3-4, Fig. 2 (Gemma 7B)",
               paper_value="local with BOS, spreads without", experiment="lm", measure=PERTURBATION,
               criterion=at_least(1.0, by="direction"),
               note=BEYOND_NOTE + "A rise: / (max / min) >= 1. sinkexp's factor 1.5 (its trigger and backcopy "
                    "analogues') is no longer the criterion; the changed token and the measure are sinkexp's, as "
                    "there."),
        Value(name="lm_long_context_sinks", kind="extension", statement="An LM pre-trained on the longest context "
              "here (512 bytes) sinks (sink rate over all heads at alpha_s > 0.3 >= 0.1).", source="-",
              paper_value="-", experiment="lm_context_512", measure=LM_SINK_RATE, criterion=at_least(0.1), forms=True,
              reached="lm_sinks_on_bos", route=SOURCE_ROUTE,
              note="sinkexp's: the paper's most sinks are at its longest contexts (Sec. 4.1, Fig. 5(a)) in "
                   "~120M-parameter LMs, not at 512 bytes; the threshold is sinkexp's. The 64-byte LM's sink "
                   "(lm_sinks_on_bos: BOS first too, the same route) shows the size suffices where it formed by "
                   "half of training on every seed."),
        Trend(name="lm_longer_context_more_sinks", kind="paper", requires="lm_sinks_on_bos",
              reached="lm_sinks_on_bos", route=SOURCE_ROUTE,
              statement="Pre-trained on longer contexts (same bytes per step), more of the LM's heads sink.",
              source="Sec. 4.1, Fig. 5(a)", paper_value="sinks rise with length; the shortest almost none",
              experiment=LM_CONTEXT, measure=LM_SINK_RATE, criterion=at_least(0.8), key="task.seq_len",
              note="rho >= 0.8 over the four lengths per seed is sinkexp's reading of 'rise'. Its premise is "
                   "that the LM sinks, at whatever length: a sink required at the longest length alone would "
                   "leave a trend the other way not reached. The longer contexts may not have formed yet: a miss "
                   "counts only where the 64-byte LM (the same route) sank by half of training on every seed."),
        Value(name="lm_no_bos_sinks_on_first_token", kind="paper", statement="An LM pre-trained without BOS sinks on "
              "its first token (sink rate over all heads at alpha_s > 0.3 >= 0.1).", source="Sec. 5, Table 2",
              paper_value="a sink on the first token", experiment="lm_no_bos", measure=LM_SINK_RATE,
              criterion=at_least(0.1), forms=True, route="first_position",
              note="The threshold is sinkexp's. No claim here forms its sink by this route (no token marks the "
                   "first byte), so the BOS model's sink is no evidence that the size suffices: a model that "
                   "forms none is not reached."),
        Paired(name="lm_no_bos_sink_slightly_weaker", kind="paper",
               requires=("lm_sinks_on_bos", "lm_no_bos_sinks_on_first_token"),
               statement="... slightly weaker than the BOS model's sink on BOS (its mean first-token attention "
                         "over all heads, run for run).", source="Sec. 5, Table 2", paper_value="slightly weaker",
               experiment="lm_no_bos", measure=FIRST_TOKEN, against={"task.bos": True}, against_in="lm",
               compare="ratio beyond spread", criterion=at_most(1.0, by="direction"),
               note="Weaker: the ratio x the BOS runs' max / min <= 1 (a fall beyond their spread); 'slightly' "
                    "has no figure, and sinkexp's 0.5-1x is no longer the criterion."),
        Value(name="lm_deep_model_sinks", kind="extension",
              statement="An 8-layer LM sinks (sink rate over all heads at alpha_s > 0.3 >= 0.1).",
              source="Sec. 4.2, LLaMA 3.1 8B-405B (and the contributions)",
              paper_value="80% of heads sink in LLaMA 3.1 405B", experiment="lm_depth",
              where={"model.n_layers": 8}, measure=LM_SINK_RATE, criterion=at_least(0.1), forms=True,
              note="The premise of the trend below, sinkexp's: the paper's sinks are in LLMs of 8B-405B "
                   "parameters, not in an 8-layer LM; the threshold is sinkexp's."),
        Trend(name="lm_deeper_more_sinks", kind="extension", requires="lm_deep_model_sinks",
              statement="The deeper the LM (2, 4, 8 layers), the more of its heads sink.",
              source="Sec. 3, over-squashing bound; Sec. 4.2, LLaMA 3.1 8B-405B",
              paper_value="more sinks in larger models", experiment="lm_depth", measure=LM_SINK_RATE,
              criterion=at_least(0.8), key="model.n_layers",
              note="The paper's models grow in depth and width together; here only depth does (sinkexp's "
                   "question). rho >= 0.8 over three depths per seed (the order exactly kept) is sinkexp's reading."),
        Value(name="llama31_405b_sinks", kind="paper", statement="About 80% of LLaMA 3.1 405B's heads sink on "
              "the first token (70-90%).", source="Sec. 1 (contributions); Sec. 4.2, Table 1 (LLaMA 3.1 405B)",
              paper_value="~80% of heads", experiment="llama31_405b", measure=LM_SINK_RATE,
              criterion=between(0.7, 0.9), forms=True,
              note="The 70-90% band is sinkexp's. The contributions say ~80% of heads form a strong sink; Sec. 1 "
                   "also says ~80% of the attention goes to BOS on a typical prompt, another quantity. Table 1's "
                   "own figure and epsilon are not in the summary sinkexp has: epsilon 0.3 is the paper's default "
                   "(Sec. 2). The text is sinkexp's (100 x 64 tokens of the KJV; the paper's prompts are not "
                   "located)."),
        # Gemma-3-270M, pre-trained with BOS first (its tokenizer puts <bos> in front of every text), and
        # SmolLM2-135M, whose tokenizer puts nothing there: Table 2's two regimes on released models
        Value(name="gemma3_sinks_on_bos", kind="paper", statement="Gemma-3-270M, pre-trained with BOS first, sinks "
              "on it (sink rate over all heads at alpha_s > 0.3 >= 0.1).", source="Sec. 5, Table 2",
              paper_value="sink on BOS", experiment="gemma3", measure=LM_SINK_RATE, criterion=at_least(0.1),
              forms=True, note="The rate threshold is sinkexp's. " + WEIGHTS),
        Paired(name="gemma3_sink_leaves_with_bos", kind="paper", requires="gemma3_sinks_on_bos", **CHECKPOINT_BEYOND,
               statement="Without BOS at inference Gemma-3-270M's first position no longer draws the attention.",
               source="Sec. 5, Table 2", paper_value="sink gone", experiment="gemma3",
               measure=bos_removed("first_attn"), criterion=at_most(1.0, by="direction"),
               note=CHECKPOINT_NOTE + "A fall. " + FIRST + WEIGHTS),
        Paired(name="gemma3_loss_rises_without_bos", kind="paper", requires="gemma3_sinks_on_bos", **CHECKPOINT_BEYOND,
               statement="Without BOS at inference Gemma-3-270M performs much worse.", source="Sec. 5, Table 2",
               paper_value="large drop", experiment="gemma3", measure=bos_removed("loss"),
               criterion=at_least(1.0, by="direction"), note=CHECKPOINT_NOTE + "A rise. " + FIRST + WEIGHTS),
        Paired(name="gemma3_perturbation_stays_local_with_bos", kind="paper", requires="gemma3_sinks_on_bos",
               **CHECKPOINT_BEYOND, statement="A one-token change moves Gemma-3-270M's representations less with its "
               "BOS sink than with BOS removed at inference.", source="Sec. 3-4, Fig. 2 (Gemma 7B)",
               paper_value="local with BOS, spreads without", experiment="gemma3", measure=PERTURBATION,
               criterion=at_least(1.0, by="direction"),
               note=CHECKPOINT_NOTE + "A rise; the changed token and the measure are sinkexp's (the LM claim's). "
                    + FIRST + WEIGHTS),
        Value(name="smollm2_first_token_sinks", kind="paper", statement="SmolLM2-135M, given no fixed first token "
              "(its tokenizer puts no BOS in front of a text), sinks on its first token (sink rate over all heads "
              "at alpha_s > 0.3 >= 0.1).", source="Sec. 5, Table 2", paper_value="a sink on the first token",
              experiment="smollm2", measure=LM_SINK_RATE, criterion=at_least(0.1), forms=True,
              note="Position 0 is an ordinary token of the text, a different one in every window. How SmolLM2's "
                   "pre-training packed its documents is not read here; the rate threshold is sinkexp's. "
                   + WEIGHTS),
    ),
)
