"""Gu et al. 2025, "When attention sink emerges in language models" (ICLR 2025, arXiv 2410.10781).

Their LLM pre-training runs find sinks in 18.18% of softmax heads and 0.44% of heads with sigmoid
attention without normalisation; normalising the sigmoid brings the sink back, and a learned
key/value bias per head takes the sink off the first token. Their operations, as their code writes
them (sail-sg/Attention-Sink lit_gpt/model_attn_sim.py, model_kv_bias.py): sigma(s) with no bias
(`attn=sigmoid_nobias`), sigma(s) / sum sigma(s) (`attn=sigmoid_norm`), and a per-head k and v
drawn N(0, 0.02^2) that every query sees (`attn=sink_kv`). Sink rate as their evaluation counts
it (pretrain/eval_sink_pretrain.py): the share of heads whose alpha_s on the row-normalised
weights exceeds 0.3, per sequence (docs/metrics.md).

The small analogues (sinkexp's): the one-layer trigger model (Ran-Milo 2026's task) with four
heads, where a sink is not forced, for the attention operations ("softmax heads become sinks" is
read as at least one head in four, >= 0.25, sinkexp's threshold; "almost none" as <= 1% of heads,
against their 0.44%); and with one head for the key/value bias, where Theorem 1 forces a softmax
head to put its no-op somewhere: on the first token without the bias (the paired control), so
the claim asks whether the bias takes it instead. CPU sizes as ranmilo2026.

Their own setting, a language model, is `task=lm` (next byte of the King James Version, the
LLaMA-style `model=llama` preset, 4 x 4, d_model 64, 2000 steps; docs/tasks.md), with the four
attention operations over three seeds: the sink rate over all 16 heads at alpha_s > 0.3. The
learning rate is the source's schedule: constant after the warm-up (their text says cosine, but
every config of sail-sg/Attention-Sink sets min_lr equal to learning_rate), not the LM default's
cosine; AdamW with betas (0.9, 0.95), weight decay 0.1 and clipping 1 are theirs too. The claims
there are the paper's; "sinks emerge" is read as a rate >= 0.1 (sinkexp's threshold, as sun2026's),
"almost none" as <= 0.01 (no head of 16), and both the sigmoid and the bias claims require the
softmax LM to sink: with no sink to remove they say nothing.
"""
from sinkexp.reproduce.declare import Experiment, Paired, Paper, Value, at_least, at_most
from sinkexp.reproduce.measures import final, loss_ratio

SOFTMAX, SIGMOID, SIGMOID_NORM = ({"attn.name": "softmax"}, {"attn.name": "sigmoid_nobias"},
                                  {"attn.name": "sigmoid_norm"})
CPU = {"train.steps": 1000, "eval.every": 250}
LM_SINK_RATE = final("sink_rate@0.3", -1)

PAPER = Paper(
    name="gu2025",
    title="Gu et al. 2025, sink rate of softmax vs sigmoid attention (arXiv 2410.10781)",
    experiments=(
        Experiment(name="four_heads", overrides={"task": "trigger", "model.n_heads": 4},
                   grid={"attn": ("softmax", "sigmoid_nobias", "sigmoid_norm"), "seed": (0, 1, 2)}, cpu=CPU),
        Experiment(name="one_head_kv_bias", overrides={"task": "trigger"},
                   grid={"attn": ("softmax", "sink_kv"), "seed": (0, 1, 2)}, cpu=CPU),
        Experiment(name="lm_attention", overrides={"task": "lm", "train.schedule": "constant"},
                   grid={"attn": ("softmax", "sigmoid_nobias", "sigmoid_norm", "sink_kv"), "seed": (0, 1, 2)}),
    ),
    claims=(
        Value(name="softmax_sink_rate", kind="paper", statement="Softmax heads become sinks.",
              source="attention-operation ablation", paper_value="18.18% of heads (LLMs)", experiment="four_heads",
              where=SOFTMAX, measure=final("sink_rate@0.3", -1), criterion=at_least(0.25),
              note="The model of ranmilo2026/four_heads (evaluated every 250 steps here): no head sinks; the "
                   "heads' writes cancel after the readout instead (docs/reproduce.md, 'Four heads')."),
        Value(name="sigmoid_sink_rate", kind="paper",
              statement="Sigmoid attention without normalisation forms almost no sinks.",
              source="attention-operation ablation", paper_value="0.44% of heads (LLMs)", experiment="four_heads",
              where=SIGMOID, measure=final("sink_rate@0.3", -1), criterion=at_most(0.01)),
        Value(name="sigmoid_solves", kind="extension", statement="Sigmoid attention still solves the task.",
              source="-", paper_value="-", experiment="four_heads", where=SIGMOID, measure=loss_ratio("trigger"),
              criterion=at_most(0.1)),
        Value(name="normalised_sigmoid_sinks", kind="paper",
              statement="Normalising the sigmoid brings the sink back.", source="attention-operation ablation",
              paper_value="sinks emerge (LLMs)", experiment="four_heads", where=SIGMOID_NORM,
              measure=final("sink_rate@0.3", -1), criterion=at_least(0.25)),
        Paired(name="kv_bias_takes_the_first_token_sink", kind="paper",
               statement="A learned key/value bias takes the sink off the first token.",
               source="key/value-bias ablation", paper_value="first-token sink gone (LLMs)",
               experiment="one_head_kv_bias", where={"attn.name": "sink_kv"},
               measure=final("sink_score", 0), criterion=at_most(-0.5), against=SOFTMAX,
               note="Paired with the one-head softmax run of the same seed, whose no-op Theorem 1 forces onto a key."),
        Value(name="kv_bias_holds_the_sink", kind="paper",
              statement="... and the bias takes the attention the first token held.",
              source="key/value-bias ablation", paper_value="attention on the bias", experiment="one_head_kv_bias",
              where={"attn.name": "sink_kv"}, measure=final("slot_attn", 0, "non_trigger"), criterion=at_least(0.5)),
        Value(name="lm_softmax_sinks", kind="paper", statement="A softmax LM's heads sink (sink rate >= 0.1).",
              source="attention-operation ablation", paper_value="18.18% of heads", experiment="lm_attention",
              where=SOFTMAX, measure=LM_SINK_RATE, criterion=at_least(0.1),
              note="The threshold (one head in ten) is sinkexp's, below the paper's 18.18%."),
        Value(name="lm_sigmoid_almost_no_sinks", kind="paper", requires="lm_softmax_sinks",
              statement="An LM with sigmoid attention without normalisation forms almost no sinks (rate <= 0.01).",
              source="attention-operation ablation", paper_value="0.44% of heads", experiment="lm_attention",
              where=SIGMOID, measure=LM_SINK_RATE, criterion=at_most(0.01)),
        Value(name="lm_normalised_sigmoid_sinks", kind="paper",
              statement="Normalising the sigmoid brings the LM's sinks back (rate >= 0.1).",
              source="attention-operation ablation", paper_value="sinks emerge", experiment="lm_attention",
              where=SIGMOID_NORM, measure=LM_SINK_RATE, criterion=at_least(0.1)),
        Value(name="lm_kv_bias_takes_the_first_token_sink", kind="paper", requires="lm_softmax_sinks",
              statement="With a learned key/value bias the LM's heads no longer sink on the first token "
                        "(rate <= 0.01).", source="key/value-bias ablation", paper_value="first-token sink gone",
              experiment="lm_attention", where={"attn.name": "sink_kv"}, measure=LM_SINK_RATE,
              criterion=at_most(0.01)),
    ),
)
