"""Gu et al. 2025, "When attention sink emerges in language models" (ICLR 2025, arXiv 2410.10781).

Their LLM pre-training runs find sinks in 18.18% of softmax heads and 0.44% of sigmoid-attention
heads (sigmoid without normalisation). The small analogue here: the one-layer trigger model
(Ran-Milo 2026's task) with four heads, where a sink is not forced: with one head Theorem 1 forces
the softmax head to sink, so a one-head sink rate would only repeat ranmilo2026/softmax_sinks.
Sink rate: share of heads with alpha_s > 0.3 (docs/metrics.md); "softmax heads become sinks" is
read as at least one of the four (>= 0.25), sinkexp's threshold. CPU sizes as ranmilo2026.
"""
from sinkexp.reproduce.declare import Experiment, Paper, Value, at_least, at_most
from sinkexp.reproduce.measures import final, loss_ratio

SOFTMAX, SIGMOID = {"attn.name": "softmax"}, {"attn.name": "sigmoid"}

PAPER = Paper(
    name="gu2025",
    title="Gu et al. 2025, sink rate of softmax vs sigmoid attention (arXiv 2410.10781)",
    experiments=(
        Experiment(name="four_heads", overrides={"task": "trigger", "model.n_heads": 4},
                   grid={"attn": ("softmax", "sigmoid"), "seed": (0, 1, 2)},
                   cpu={"train.steps": 1000, "eval.every": 250}),
    ),
    claims=(
        Value(name="softmax_sink_rate", kind="paper", statement="Softmax heads become sinks.",
              source="attention-operation ablation", paper_value="18.18% of heads (LLMs)", experiment="four_heads",
              where=SOFTMAX, measure=final("sink_rate@0.3", -1), criterion=at_least(0.25),
              note="The model of ranmilo2026/four_heads (evaluated every 250 steps here): no head sinks; the "
                   "heads' writes cancel after the readout instead (docs/reproduce.md, 'Four heads')."),
        Value(name="sigmoid_sink_rate", kind="paper",
              statement="Sigmoid attention (no normalisation) forms almost no sinks.",
              source="attention-operation ablation", paper_value="0.44% of heads (LLMs)", experiment="four_heads",
              where=SIGMOID, measure=final("sink_rate@0.3", -1), criterion=at_most(0.0)),
        Value(name="sigmoid_solves", kind="extension", statement="Sigmoid attention still solves the task.",
              source="-", paper_value="-", experiment="four_heads", where=SIGMOID, measure=loss_ratio("trigger"),
              criterion=at_most(0.1)),
    ),
)
