"""Guo et al. 2024, "Active-dormant attention heads" (arXiv 2410.13835), the Bigram-Backcopy task.

One layer: once back-copy is learned, softmax puts non-trigger queries' attention on BOS and the BOS
value norm then falls (a value drain); ReLU attention forms no sink. Three layers: Adam grows a
larger BOS residual norm than SGD (massive norms come from Adam's update rule). The figures quoted
are the source's stored curves (GuoTianYu2000/Active-Dormant-Attention BBM/figures/BBM/dynamics.pt,
ReLU_dynamics.pt, massive_dynamics_sgd_relu.pt, drawn by BBM/final-plots.ipynb cells 30 and 50), of
runs on the Tiny-Shakespeare bigram table at d = 256, L = 256, batch 512, weight decay 1e-4
(BBM/scripts/: dynamics.sh and 3L-dynamics.sh Adam at lr 3e-4, ReLU-attn.sh Adam at lr 3e-3, sgd.sh
SGD at lr 0.03; 1L-dynamics.sh sets lr 3e-4 but trains 10 steps); sinkexp's runs are on synthetic
tables, two structure seeds x three model seeds. CPU sizes (sinkexp's): d = 64, L = 64, batch 128;
one layer 1000 steps, three layers 400.

The paper also makes its claims of pre-trained LLMs (abstract; Sec. 1 and its LLM sections, Llama
and OLMo): sink tokens draw the attention (attention sinks), have much smaller value states
(value-state drains) and much larger residual-state norms (residual-state peaks) than the other
tokens. Those are judged at `scale=pretrained` on the checkpoints sinkexp ships (papers/shipped.py),
as the paper's own claims: the sink (position 0, where the heads sink) against the other positions,
per layer (`value_norm_ratio`, ||W_O v|| of the sink over the others', mean over heads; the residual
norms' ratio), averaged over the layers. The paper's LLM figures give no magnitude sinkexp could
read, so the drain and the peak are the source's direction beyond the untrained spread (each draw
against the same draw on the randomly initialised architecture).
"""
import math

from sinkexp.reproduce.declare import Condition, Experiment, Measure, Paired, Paper, Value, at_least, at_most
from sinkexp.reproduce.finished import FinishedRun
from sinkexp.reproduce.measures import curve, excess_loss, final, first_step, layer_ratio
from sinkexp.reproduce.papers.shipped import BEYOND, BEYOND_NOTE, GEMMA3, NAMES, SMOLLM2, WEIGHTS

DRAWS = {"seed": (0, 1, 2), "task.structure_seed": (0, 1)}
SOFTMAX, RELU = {"attn.name": "softmax"}, {"attn.name": "relu"}
THREE_LAYERS = {"task": "backcopy", "model.n_layers": 3}
# the BOS residual norms of Adam and SGD part by step 200 (seed 0: 16.6 vs 11.3)
THREE_LAYERS_CPU = {"train.steps": 400, "eval.every": 100}
# scale=reach (sinkexp's; docs/findings/guo2024.md, "Reach"), one structure draw x three seeds: the value
# norm's fall holds on every seed first at 4000 one-layer steps (s2: 0.76 at 2000); SGD learns back-copy
# on every seed by 1500 three-layer steps (excess <= 0.022 at 2000)
ONE_LAYER_REACH = {"train.steps": 4000, "task.structure_seed": (0,)}
THREE_LAYERS_REACH = {"train.steps": 2000, "eval.every": 250, "task.structure_seed": (0,)}
LEARNED = Condition(excess_loss("trigger"), at_most(0.05))   # back-copy learned (as backcopy_learned asks)


def value_norm_fall(run: FinishedRun) -> float:
    """BOS value norm at the last step over its value when BOS attention first reached 0.5 (< 1: it fell)."""
    formed = first_step(curve(run, "sink_attn", "non_trigger"), 0.5)
    norm = curve(run, "sink_value_norm")
    return float(norm.iloc[-1] / norm[int(formed)]) if math.isfinite(formed) else math.nan


LLMS = "abstract; Sec. 1 and the pre-trained LLM sections (Llama 2, OLMo)"


def extreme_tokens(name: str) -> tuple:
    """The three extreme-token phenomena on a checkpoint sinkexp ships (scale=pretrained)."""
    model, sinks = NAMES[name], f"{name}_sinks"
    return (
        Value(name=sinks, kind="paper", statement=f"{model} has attention sinks: its heads sink on the first "
              "position (sink rate over all heads at alpha_s > 0.3 >= 0.1).", source=LLMS,
              paper_value="sink tokens draw disproportionate attention", experiment=name,
              measure=final("sink_rate@0.3", -1), criterion=at_least(0.1), forms=True,
              note="The rate threshold is sinkexp's. " + WEIGHTS),
        Paired(name=f"{name}_value_drain", kind="paper", requires=sinks, **BEYOND, statement=f"{model}'s sink token "
               "has a smaller value state than the other tokens (a value-state drain).", source=LLMS,
               paper_value="significantly smaller value states", experiment=name,
               measure=final("value_norm_ratio", "mean"), criterion=at_most(1.0, by="direction"),
               note=BEYOND_NOTE + "A fall. " + WEIGHTS),
        Paired(name=f"{name}_residual_peak", kind="paper", requires=sinks, **BEYOND, statement=f"{model}'s sink "
               "token has a larger residual-state norm than the other tokens (a residual-state peak).", source=LLMS,
               paper_value="much larger residual-state norms", experiment=name,
               measure=layer_ratio("resid_norm_sink", "resid_norm_rest"), criterion=at_least(1.0, by="direction"),
               note=BEYOND_NOTE + "A rise. " + WEIGHTS),
    )


PAPER = Paper(
    name="guo2024",
    title="Guo et al. 2024, Bigram-Backcopy (arXiv 2410.13835)",
    experiments=(
        Experiment(name="one_layer", overrides={"task": "backcopy"}, grid={"attn": ("softmax", "relu"), **DRAWS},
                   cpu={"train.steps": 1000, "eval.every": 50}, reach=ONE_LAYER_REACH),
        Experiment(name="three_layers_adam", overrides=THREE_LAYERS, grid=DRAWS, cpu=THREE_LAYERS_CPU,
                   reach=THREE_LAYERS_REACH),
        Experiment(name="three_layers_sgd", overrides={**THREE_LAYERS, "train.optim": "sgd", "train.lr": 0.03},
                   grid=DRAWS, cpu=THREE_LAYERS_CPU, reach=THREE_LAYERS_REACH),
        SMOLLM2, GEMMA3,   # the shipped checkpoints, at scale=pretrained
    ),
    claims=(
        Value(name="backcopy_learned", kind="paper",
              statement="The one-layer softmax model learns the back-copy (trigger queries).",
              source="dynamics.pt icl_risks (1 layer)", paper_value="excess 0.0074 at 1k, 1e-4 at 10k steps",
              experiment="one_layer", where=SOFTMAX, measure=excess_loss("trigger"), criterion=at_most(0.05),
              forms=True),
        Value(name="softmax_sinks", kind="paper",
              statement="Non-trigger queries attend to BOS once back-copy is learned.",
              source="dynamics.pt attns_on_bos (1 layer)", paper_value="0.779 at 1k, 0.811 at 10k steps",
              experiment="one_layer", where=SOFTMAX, measure=final("sink_attn", 0, "non_trigger"),
              criterion=at_least(0.5), requires="backcopy_learned"),
        Value(name="bos_value_norm_falls", kind="paper",
              statement="After the sink forms, the BOS value norm falls below its value then (value drain).",
              source="dynamics.pt value_states_norm (8.71 at step 100 -> 1.42 at 10k)",
              paper_value="0.54 of it by 1k steps (on the source's 20-step grid)",
              experiment="one_layer", where=SOFTMAX,
              measure=Measure("sink_value_norm[layer 0] last / when BOS attention first >= 0.5", value_norm_fall,
                              ("sink_attn", "sink_value_norm")),
              criterion=at_most(1.0, by="direction"), requires="softmax_sinks", contrast="softmax_sinks",
              note="The source's ||W_O v_BOS|| at 1k steps is 0.54 of its value where BOS attention first reached "
                   "0.5 (step 260 on its 20-step grid; 0.635 read on a 100-step grid), at lr 3e-4, batch 512, "
                   "d 256: a magnitude read at the source's length, so only its direction is asked here (below its "
                   "value when the sink formed; docs/reproduce.md, 'Thresholds'). Untrained there is no sink to "
                   "time it by (NaN): it counts beside softmax_sinks, on the same runs, which fails untrained."),
        Value(name="relu_no_sink", kind="paper", statement="ReLU attention forms no sink.",
              source="ReLU_dynamics.pt attns_on_bos (ReLU-attn.sh)", paper_value="0 from step 1000",
              experiment="one_layer", where=RELU, measure=final("sink_attn", 0, "non_trigger"),
              criterion=at_most(0.1), contrast="softmax_sinks"),
        Value(name="sgd_learned", kind="extension", statement="3 layers: SGD learns back-copy too.",
              source="the premise of the Adam-vs-SGD comparison (the source stores no SGD loss)", paper_value="-",
              experiment="three_layers_sgd", measure=excess_loss("trigger"), criterion=at_most(0.05), forms=True),
        Paired(name="adam_larger_bos_residual", kind="paper", requires="sgd_learned",
               statement="3 layers: Adam grows a larger BOS residual norm than SGD (at least 2x).",
               source="massive_dynamics_sgd_relu.pt (3 layers, step 10k)", paper_value="140.7 vs 20.4 (7x)",
               experiment="three_layers_adam", where={"train.optim": "adamw"}, measure=final("resid_norm_sink", 0),
               criterion=at_least(2.0), against={"train.optim": "sgd"}, against_in="three_layers_sgd",
               compare="ratio", among=LEARNED,
               note="Counted among the Adam runs that learned back-copy; SGD's must have learned too (sgd_learned); "
                    "the factor 2 is sinkexp's."),
        *extreme_tokens("smollm2"), *extreme_tokens("gemma3"),
    ),
)
