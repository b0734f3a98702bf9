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
"""
import math

from sinkexp.reproduce import (Claim, Experiment, Measure, Paper, Run, at_least, at_most, bos_removed,
                               final)

LENGTHS = (16, 32, 64, 128, 256)
TOKENS_PER_STEP = 8192
CONTEXT = tuple(f"context_{length}" for length in LENGTHS)
DRAWS = {"seed": "0,1,2", "task.structure_seed": "0,1"}
BOS_ATTENTION = final("sink_attn", 0, "non_trigger")


def sink_formed_at(run: Run) -> float:
    """The first evaluated step at which non-trigger attention on BOS reaches 0.5 (inf: never)."""
    m = run.metrics
    rows = m[(m["layer"] == 0) & (m["head"] == 0) & (m["metric"] == "sink_attn") & (m["query_type"] == "non_trigger")]
    formed = rows[rows["value"] >= 0.5]["step"]
    return float(formed.min()) if len(formed) else math.inf

PAPER = Paper(
    name="barbero2025",
    title="Barbero et al. 2025, why LLMs attend to the first token (BOS removed at inference; context length)",
    experiments=(
        Experiment("trigger", ("task=trigger", "attn=softmax"), {"seed": "0,1,2"},
                   ("train.steps=1000", "eval.every=250")),
        *(Experiment(name, ("task=backcopy", f"task.seq_len={length}", f"train.batch_size={TOKENS_PER_STEP // length}"),
                     DRAWS, ("train.steps=1000", "eval.every=50")) for name, length in zip(CONTEXT, LENGTHS)),
    ),
    claims=(
        Claim("sink_leaves_with_bos", "Without BOS at inference the first position no longer draws the attention.",
              "Table 2", "sink gone", "trigger", {}, bos_removed("first_attn"), at_most(0.5)),
        Claim("loss_rises_without_bos", "Without BOS at inference the model performs much worse.", "Table 2",
              "large drop", "trigger", {}, bos_removed("loss"), at_least(2.0)),
        Claim("longer_context_stronger_sink", "Trained on longer contexts (same tokens per step), models form "
              "stronger sinks.", "Sec. 4, Fig. 5(a)", "sinks rise with length; the shortest almost none", CONTEXT, {},
              BOS_ATTENTION, at_least(0.8), trend="task.seq_len"),
        Claim("longer_context_sinks_sooner", "... and form them sooner (the speed saturates at long contexts).",
              "Sec. 4, Fig. 5(b)", "faster with length, then saturates", CONTEXT, {},
              Measure("first step with sink_attn[layer 0, non_trigger] >= 0.5", sink_formed_at), at_most(-0.8),
              trend="task.seq_len", note="A draw whose sink never forms at some length ranks that length last."),
    ),
)
