"""Gu et al. 2025, "When attention sink emerges in language models" (ICLR 2025, arXiv 2410.10781).

Their LLM pre-training runs find sinks in 18.18% of softmax heads and 0.44% of sigmoid-attention
heads (sigmoid without normalisation). The small analogue here: the one-layer trigger model
(Ran-Milo 2026's task), whose softmax head must sink; sigmoid attention, free of the sum-to-one
constraint, solves it with no sink. Sink rate: share of heads with alpha_s > 0.3 (docs/metrics.md).
CPU sizes as ranmilo2026.
"""
from sinkexp.reproduce import Claim, Experiment, Paper, at_least, at_most, final, loss_ratio

SOFTMAX, SIGMOID = {"attn.name": "softmax"}, {"attn.name": "sigmoid"}

PAPER = Paper(
    name="gu2025",
    title="Gu et al. 2025, sink rate of softmax vs sigmoid attention (arXiv 2410.10781)",
    experiments=(
        Experiment("trigger", ("task=trigger",), {"attn": "softmax,sigmoid", "seed": "0,1,2"},
                   ("train.steps=1000", "eval.every=250")),
    ),
    claims=(
        Claim("softmax_sink_rate", "Softmax heads become sinks.", "attention-operation ablation",
              "18.18% of heads (LLMs)", "trigger", SOFTMAX, final("sink_rate@0.3", -1), at_least(1.0)),
        Claim("sigmoid_sink_rate", "Sigmoid attention (no normalisation) forms almost no sinks.",
              "attention-operation ablation", "0.44% of heads (LLMs)", "trigger", SIGMOID,
              final("sink_rate@0.3", -1), at_most(0.0)),
        Claim("sigmoid_solves", "Sigmoid attention still solves the task.", "-", "-", "trigger", SIGMOID,
              loss_ratio("trigger"), at_most(0.1)),
    ),
)
