"""Barbero et al. 2025, "Why do LLMs attend to the first token?".

Table 2: a model pre-trained with BOS always first forms its sink on BOS, and loses it when BOS is
removed at inference, with a large loss of performance. The small analogue here: the one-layer
trigger model (Ran-Milo 2026's task; BOS is always position 0), evaluated on its held-out batch
with and without BOS (`sinkexp intervene` prints the same). CPU sizes: 1000 steps.

Fig. 5 (Sec. 4, context length): at a fixed number of tokens per step, models pre-trained on longer
contexts form stronger sinks (the shortest almost none), and form them sooner, then saturate. The
small analogue: one-layer Bigram-Backcopy (Guo et al. 2024's task; synthetic tables, two structure
draws x three seeds) at seq_len 16 ... 256 with batch x seq_len = 8192 tokens (the backcopy CPU
default's 128 x 64) and 1000 steps each; the sink measure is non-trigger attention on BOS. Each
length is its own experiment (batch and length change together); a trend claim ranks a draw's
five runs by length. On a real table, per length L: `sinkexp train -m task=backcopy task.seq_len=L
train.batch_size=8192/L train.steps=1000 eval.every=50 task.bigram_table=PATH seed=0,1,2` (the
paper's other experiment, on the trigger task, has no table key).

Their own setting, a language model, is `task=lm` (next byte of the King James Version, BOS first,
the LLaMA-style `model=llama` preset, 4 x 4, d_model 64, 2000 steps; docs/tasks.md), three seeds:
Table 2's claims on it. "Forms its sink on BOS" is read as a sink rate over all heads >= 0.1 (alpha_s
> 0.3; sinkexp's threshold, as sun2026's and gu2025's LM claims), and the sink leaving requires it.
"""
from sinkexp.reproduce.declare import Experiment, Measure, Paper, Trend, Value, at_least, at_most
from sinkexp.reproduce.measures import FinishedRun, bos_removed, curve, final, first_step

LENGTHS = (16, 32, 64, 128, 256)
TOKENS_PER_STEP = 8192
CONTEXT = tuple(f"context_{length}" for length in LENGTHS)
DRAWS = {"seed": (0, 1, 2), "task.structure_seed": (0, 1)}
BOS_ATTENTION = final("sink_attn", 0, "non_trigger")


def sink_formed_at(run: FinishedRun) -> float:
    """The first evaluated step at which non-trigger attention on BOS reaches 0.5 (inf: never)."""
    return first_step(curve(run, "sink_attn", "non_trigger"), 0.5)


PAPER = Paper(
    name="barbero2025",
    title="Barbero et al. 2025, why LLMs attend to the first token (BOS removed at inference; context length)",
    experiments=(
        Experiment(name="trigger", overrides={"task": "trigger", "attn": "softmax"}, grid={"seed": (0, 1, 2)},
                   cpu={"train.steps": 1000, "eval.every": 250}),
        Experiment(name="lm", overrides={"task": "lm"}, grid={"seed": (0, 1, 2)}),
        *(Experiment(name=name, overrides={"task": "backcopy", "task.seq_len": length,
                                           "train.batch_size": TOKENS_PER_STEP // length},
                     grid=DRAWS, cpu={"train.steps": 1000, "eval.every": 50})
          for name, length in zip(CONTEXT, LENGTHS)),
    ),
    claims=(
        Value(name="sink_leaves_with_bos", kind="paper",
              statement="Without BOS at inference the first position no longer draws the attention.",
              source="Table 2", paper_value="sink gone", experiment="trigger", measure=bos_removed("first_attn"),
              criterion=at_most(0.5)),
        Value(name="loss_rises_without_bos", kind="paper",
              statement="Without BOS at inference the model performs much worse.",
              source="Table 2", paper_value="large drop", experiment="trigger", measure=bos_removed("loss"),
              criterion=at_least(2.0)),
        Trend(name="longer_context_stronger_sink", kind="extension",
              statement="Trained on longer contexts (same tokens per step), models form stronger sinks.",
              source="Sec. 4, Fig. 5(a)", paper_value="sinks rise with length; the shortest almost none",
              experiment=CONTEXT, measure=BOS_ATTENTION, criterion=at_least(0.8), key="task.seq_len"),
        Trend(name="longer_context_sinks_sooner", kind="extension",
              statement="... and form them sooner (the speed saturates at long contexts).",
              source="Sec. 4, Fig. 5(b)", paper_value="faster with length, then saturates", experiment=CONTEXT,
              measure=Measure("first step with sink_attn[layer 0, non_trigger] >= 0.5", sink_formed_at, ("sink_attn",)),
              criterion=at_most(-0.8), key="task.seq_len",
              note="A draw whose sink never forms at some length ranks that length last."),
        Value(name="lm_sinks_on_bos", kind="paper", statement="An LM pre-trained with BOS first sinks on it "
              "(sink rate over all heads at alpha_s > 0.3 >= 0.1).", source="Table 2", paper_value="sink on BOS",
              experiment="lm", measure=final("sink_rate@0.3", -1), criterion=at_least(0.1),
              note="The threshold (one head in ten) is sinkexp's."),
        Value(name="lm_sink_leaves_with_bos", kind="paper", requires="lm_sinks_on_bos",
              statement="Without BOS at inference the LM's first position no longer draws the attention.",
              source="Table 2", paper_value="sink gone", experiment="lm", measure=bos_removed("first_attn"),
              criterion=at_most(0.5)),
        Value(name="lm_loss_rises_without_bos", kind="paper", statement="Without BOS at inference the LM performs "
              "much worse.", source="Table 2", paper_value="large drop", experiment="lm",
              measure=bos_removed("loss"), criterion=at_least(2.0)),
    ),
)
