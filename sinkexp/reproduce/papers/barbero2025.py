"""Barbero et al. 2025, "Why do LLMs attend to the first token?".

Table 2: a model pre-trained with BOS always first forms its sink on BOS, and loses it when BOS is
removed at inference, with a large loss of performance. The small analogue here: the one-layer
trigger model (Ran-Milo 2026's task; BOS is always position 0), evaluated on its held-out batch
with and without BOS (`sinkexp intervene` prints the same). CPU sizes: 1000 steps.
"""
from sinkexp.reproduce import Claim, Experiment, Paper, at_least, at_most, bos_removed

PAPER = Paper(
    name="barbero2025",
    title="Barbero et al. 2025, why LLMs attend to the first token (BOS removed at inference)",
    experiments=(
        Experiment("trigger", ("task=trigger", "attn=softmax"), {"seed": "0,1,2"},
                   ("train.steps=1000", "eval.every=250")),
    ),
    claims=(
        Claim("sink_leaves_with_bos", "Without BOS at inference the first position no longer draws the attention.",
              "Table 2", "sink gone", "trigger", {}, bos_removed("first_attn"), at_most(0.5)),
        Claim("loss_rises_without_bos", "Without BOS at inference the model performs much worse.", "Table 2",
              "large drop", "trigger", {}, bos_removed("loss"), at_least(2.0)),
    ),
)
