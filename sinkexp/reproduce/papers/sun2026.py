"""Sun et al. 2026, "The Spike, the Sparse and the Sink: anatomy of massive activations and attention sinks".

In their LLMs, pre-norm lets a few tokens carry massive activations, and the sink rides on them;
a sandwich norm or DynamicTanh in place of LayerNorm removes most of the spike while the sink
stays (or grows): the two can be decoupled. Without weight decay the spike grows about 3x at
nearly the same loss. The small analogue here: the one-layer
Bigram-Backcopy model (Guo et al. 2024's task), whose softmax head sinks on BOS; `massive_ratio`
is max |h| / median |h| of the residual stream after the block (docs/metrics.md). Paired run for
run against the pre-LayerNorm model of the same seed and table. CPU sizes: 1000 steps (at 500 the
pre-norm sinks had formed, but a sandwich sink formed later: BOS attention 0.24-0.98 over the six
draws, DyT 0.71-1.00). Weight decay 0, 1e-4 (the task's default: the `norms` experiment's pre-norm
runs) and 0.1, with one layer and with three (the massive ratio of the loudest layer).
"""
from sinkexp.reproduce import Claim, Experiment, Paper, at_least, at_most, between, final

DRAWS = {"seed": "0,1,2", "task.structure_seed": "0,1"}
CPU = ("train.steps=1000", "eval.every=250")
PRE = {"model.norm": "pre", "model.norm_type": "layernorm"}
SPIKE, BOS = final("massive_ratio", 0), final("sink_attn", 0, "non_trigger")
LOSS = final("loss_eval", -1, "all")

PAPER = Paper(
    name="sun2026",
    title="Sun et al. 2026, The Spike, the Sparse and the Sink (massive activations vs attention sinks)",
    experiments=(
        Experiment("norms", ("task=backcopy",), {"model.norm": "pre,sandwich", **DRAWS}, CPU),
        Experiment("dyt", ("task=backcopy", "model.norm_type=dyt"), DRAWS, CPU),
        Experiment("weight_decay", ("task=backcopy",), {"train.weight_decay": "0.0,0.1", **DRAWS}, CPU),
        Experiment("weight_decay_3_layers", ("task=backcopy", "model.n_layers=3"),
                   {"train.weight_decay": "0.0,0.0001,0.1", **DRAWS}, CPU),
    ),
    claims=(
        Claim("sandwich_lowers_the_spike", "A sandwich norm lowers the massive ratio (vs pre-norm).",
              "normalisation ablation", "spike mostly gone", "norms", {"model.norm": "sandwich"}, SPIKE,
              at_most(0.0), against=PRE),
        Claim("sandwich_keeps_the_sink", "With a sandwich norm the sink stays.", "normalisation ablation",
              "sink ratio kept", "norms", {"model.norm": "sandwich"}, BOS, at_least(0.9)),
        Claim("dyt_lowers_the_spike", "DynamicTanh lowers the massive ratio (vs pre-LayerNorm).",
              "normalisation ablation", "spike mostly gone", "dyt", {"model.norm_type": "dyt"}, SPIKE,
              at_most(0.0), against=PRE, against_in="norms"),
        Claim("dyt_keeps_the_sink", "With DynamicTanh the sink stays.", "normalisation ablation",
              "sink ratio kept", "dyt", {"model.norm_type": "dyt"}, BOS, at_least(0.9)),
        Claim("no_weight_decay_larger_spike", "Without weight decay the spike is larger (vs weight decay 0.1).",
              "weight-decay ablation", "~3x (3,800 -> 12,000)", "weight_decay", {"train.weight_decay": 0.0}, SPIKE,
              at_least(1.0), against={"train.weight_decay": 0.1}, compare="ratio"),
        Claim("no_weight_decay_same_loss", "... at nearly the same loss (within 10%).", "weight-decay ablation",
              "nearly the same", "weight_decay", {"train.weight_decay": 0.0}, LOSS, between(0.9, 1.1),
              against={"train.weight_decay": 0.1}, compare="ratio"),
        Claim("less_weight_decay_larger_spike", "The less weight decay (0.1, 1e-4, 0), the larger the spike.",
              "weight-decay ablation", "spike grows as weight decay falls", ("weight_decay", "norms"), PRE, SPIKE,
              at_most(-0.8), trend="train.weight_decay",
              note="Three values per draw: rho <= -0.8 means the order is exactly reversed."),
        Claim("less_weight_decay_larger_spike_3_layers", "... also with three layers (loudest layer).",
              "weight-decay ablation", "spike grows as weight decay falls", "weight_decay_3_layers", {},
              final("massive_ratio", "max"), at_most(-0.8), trend="train.weight_decay"),
    ),
)
