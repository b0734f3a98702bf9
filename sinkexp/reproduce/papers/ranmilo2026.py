"""Ran-Milo 2026, "Attention sinks are provably necessary in softmax transformers" (arXiv 2603.11487).

Theorems 1 and 2: a softmax model that solves the trigger-conditional mean puts almost all of a
non-trigger query's attention on BOS (one layer: that layer; several: at least one). Theorem 3: ReLU
attention solves it with no sink. The abstract reports both for single- and multi-head
models; the paper warns that mitigations which take the sink away break the no-op
(`model.hide_bos=true` hides the BOS key from every other query; `train.bos_penalty` adds
lambda x the mean attention on BOS to the loss). CPU sizes: batch 128, 1000 steps for one layer and four heads (the sink has formed by step
~300), the task file's 3000 for two layers (at 1000 steps seed 2's sink was still forming: 0.886,
and seed 0 had collapsed to the zero predictor while sinking in layer 2).
"""
from sinkexp.reproduce import (Claim, Experiment, Paper, at_least, at_most, final, head_extreme,
                               loss_ratio)

SEEDS = {"seed": "0,1,2"}
CPU = ("train.steps=1000", "eval.every=100")
SOFTMAX, RELU = {"attn.name": "softmax"}, {"attn.name": "relu"}
BOS = ("sink_attn", "non_trigger")

PAPER = Paper(
    name="ranmilo2026",
    title="Ran-Milo 2026, trigger-conditional mean (arXiv 2603.11487)",
    experiments=(
        Experiment("one_layer", ("task=trigger",), {"attn": "softmax,relu", **SEEDS}, CPU),
        Experiment("two_layers", ("task=trigger", "model.n_layers=2"), {"attn": "softmax,relu", **SEEDS},
                   ("train.steps=3000", "eval.every=250")),
        Experiment("hidden_bos", ("task=trigger", "model.hide_bos=true"), {"attn": "softmax,relu", **SEEDS}, CPU),
        Experiment("four_heads", ("task=trigger", "model.n_heads=4"), {"attn": "softmax,relu", **SEEDS}, CPU),
        Experiment("bos_penalty", ("task=trigger",), {"attn": "softmax,relu", "train.bos_penalty": "0.1,1.0,10.0",
                                                      **SEEDS}, CPU),
    ),
    claims=(
        Claim("softmax_solves", "A one-layer softmax model solves the task.", "experiments",
              "solved", "one_layer", SOFTMAX, loss_ratio("trigger"), at_most(0.1)),
        Claim("softmax_sinks", "Solving it, softmax puts almost all non-trigger attention on BOS.",
              "Thm. 1; experiments", "~1 (strong sink)", "one_layer", SOFTMAX, final(BOS[0], 0, BOS[1]), at_least(0.9)),
        Claim("relu_solves", "A one-layer ReLU-attention model solves the task.", "Thm. 3; experiments",
              "solved", "one_layer", RELU, loss_ratio("trigger"), at_most(0.1)),
        Claim("relu_no_sink", "ReLU attention solves it with no sink.", "Thm. 3; experiments", "~0 (no sink)",
              "one_layer", RELU, final(BOS[0], 0, BOS[1]), at_most(0.1)),
        Claim("two_layers_softmax_solves", "A two-layer softmax model solves the task.", "experiments", "solved",
              "two_layers", SOFTMAX, loss_ratio("trigger"), at_most(0.1)),
        Claim("two_layers_softmax_sinks", "With two layers, at least one softmax layer sinks.", "Thm. 2",
              "one layer ~1", "two_layers", SOFTMAX, final(BOS[0], "max", BOS[1]), at_least(0.9)),
        Claim("two_layers_relu_no_sink", "With two layers, no ReLU layer sinks.", "Thm. 3; experiments", "~0",
              "two_layers", RELU, final(BOS[0], "max", BOS[1]), at_most(0.1)),
        Claim("four_heads_relu_no_sink", "Multi-head ReLU attention forms no sink in any head.", "experiments (abstract)",
              "~0", "four_heads", RELU, head_extreme(BOS[0], 0, BOS[1], "max"), at_most(0.1)),
        Claim("four_heads_softmax_no_sink", "With 4 heads, softmax solves the task with no head sinking.",
              "experiments (abstract): multi-head softmax 'develops strong sinks'", "strong sink",
              "four_heads", SOFTMAX, head_extreme(BOS[0], 0, BOS[1], "max"), at_most(0.5),
              note="What sinkexp sees, not the paper's claim: with 4 heads of width 16 every head keeps "
                   "~0.1 of a non-trigger query's attention on BOS. The heads still write there (norms "
                   "0.6-1.5, sum 0.96, head_cancellation 0.27 at seed 0), and the linear readout (64 -> 16) "
                   "maps that write to ~0 (non-trigger loss 1e-5): the no-op goes through the readout's "
                   "null space, not through a sink."),
        Claim("four_heads_softmax_solves", "With 4 heads, softmax solves the task.", "experiments", "solved",
              "four_heads", SOFTMAX, loss_ratio("trigger"), at_most(0.1)),
        Claim("hidden_bos_softmax_fails", "With the BOS key hidden, softmax can no longer solve the task.",
              "discussion: mitigations that remove the sink break the no-op", "fails", "hidden_bos",
              {**SOFTMAX, "model.hide_bos": True}, loss_ratio("trigger"), at_least(5.0),
              against={**SOFTMAX, "model.hide_bos": False}, against_in="one_layer", compare="ratio",
              note="Paired run for run with the one-layer model that sees BOS: the trigger loss (over the zero "
                   "predictor's) must rise at least 5-fold."),
        Claim("hidden_bos_relu_solves", "ReLU attention does not need BOS: it still solves the task.",
              "Thm. 3", "solved", "hidden_bos", RELU, loss_ratio("trigger"), at_most(0.1)),
        Claim("bos_penalty_softmax_fails", "With a BOS-attention penalty (lambda 1) softmax can no longer solve it.",
              "discussion: mitigations that penalise the sink break the no-op", "fails", "bos_penalty",
              {**SOFTMAX, "train.bos_penalty": 1.0}, loss_ratio("trigger"), at_least(5.0),
              against={**SOFTMAX, "model.hide_bos": False}, against_in="one_layer", compare="ratio",
              note="Paired run for run with the unpenalised one-layer model; lambda 0.1 and 10 are run beside it."),
        Claim("bos_penalty_relu_solves", "ReLU attention is unaffected by the penalty (lambda 1).", "Thm. 3",
              "solved", "bos_penalty", {**RELU, "train.bos_penalty": 1.0}, loss_ratio("trigger"), at_most(0.1)),
    ),
)
