"""Guo et al. 2024, "Active-dormant attention heads" (arXiv 2410.13835), the Bigram-Backcopy task.

One layer: once back-copy is learned, softmax puts non-trigger queries' attention on BOS and the
BOS value norm then falls (a value drain); ReLU attention forms no sink. Three layers: Adam grows a
larger BOS residual norm than SGD (massive norms come from Adam's update rule). Sources: BBM/scripts/1L-dynamics.sh, ReLU-attn.sh, 3L-dynamics.sh,
sgd.sh (the paper ran them on Tiny Shakespeare; the figures quoted are from that table). Synthetic tables,
two structure seeds x three model seeds. CPU sizes: d = 64, L = 64, batch 128; one layer 1000 steps,
three layers 400.
"""
import math

from sinkexp.reproduce import Claim, Experiment, Measure, Paper, Run, at_least, at_most, excess_loss, final

DRAWS = {"seed": "0,1,2", "task.structure_seed": "0,1"}
SOFTMAX, RELU = {"attn.name": "softmax"}, {"attn.name": "relu"}
THREE_LAYERS = ("task=backcopy", "model.n_layers=3")
THREE_LAYERS_CPU = ("train.steps=400", "eval.every=100")   # the BOS residual norms part by step 200 (seed 0: 16.6 vs 11.3)


def value_norm_fall(run: Run) -> float:
    """BOS value norm at the last step over its value when BOS attention first reached 0.5 (< 1: it fell)."""
    m = run.metrics
    head0 = m[(m["layer"] == 0) & (m["head"] == 0)]
    bos = head0[(head0["metric"] == "sink_attn") & (head0["query_type"] == "non_trigger")].set_index("step")["value"]
    norm = head0[head0["metric"] == "sink_value_norm"].set_index("step")["value"]
    formed = bos[bos >= 0.5].index
    return float(norm.iloc[-1] / norm[formed.min()]) if len(formed) else math.nan


PAPER = Paper(
    name="guo2024",
    title="Guo et al. 2024, Bigram-Backcopy (arXiv 2410.13835)",
    experiments=(
        Experiment("one_layer", ("task=backcopy",), {"attn": "softmax,relu", **DRAWS},
                   ("train.steps=1000", "eval.every=50")),
        Experiment("three_layers_adam", THREE_LAYERS, DRAWS, THREE_LAYERS_CPU),
        Experiment("three_layers_sgd", (*THREE_LAYERS, "train.optim=sgd", "train.lr=0.03"), DRAWS, THREE_LAYERS_CPU),
    ),
    claims=(
        Claim("backcopy_learned", "The one-layer softmax model learns the back-copy (trigger queries).",
              "1-layer dynamics", "excess ~0", "one_layer", SOFTMAX, excess_loss("trigger"), at_most(0.05)),
        Claim("softmax_sinks", "Non-trigger queries attend to BOS once back-copy is learned.",
              "1-layer dynamics (Shakespeare: 0.78 at 1k, 0.81 at 10k steps)", "0.81", "one_layer", SOFTMAX,
              final("sink_attn", 0, "non_trigger"), at_least(0.5)),
        Claim("bos_value_norm_falls", "After the sink forms, the BOS value norm falls (value drain).",
              "1-layer dynamics (8.7 at step 100 -> 1.42 at 10k)", "falls", "one_layer", SOFTMAX,
              Measure("sink_value_norm[layer 0] last / when BOS attention first >= 0.5", value_norm_fall),
              at_most(0.99)),
        Claim("relu_no_sink", "ReLU attention forms no sink.", "ReLU attention run", "~0", "one_layer", RELU,
              final("sink_attn", 0, "non_trigger"), at_most(0.1)),
        Claim("adam_larger_bos_residual", "3 layers: Adam grows a larger BOS residual norm than SGD.",
              "3-layer Adam vs SGD runs (141 vs 20 at 10k steps)", "141 - 20", "three_layers_adam", {"train.optim": "adamw"},
              final("resid_norm_sink", 0), at_least(0.0), against={"train.optim": "sgd"},
              against_in="three_layers_sgd"),
    ),
)
