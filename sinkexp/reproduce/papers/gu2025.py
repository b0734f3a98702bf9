"""Gu et al. 2025, "When attention sink emerges in language models" (ICLR 2025, arXiv 2410.10781).

Their LLM pre-training runs find sinks in 18.18% of softmax heads and 0.44% of heads with sigmoid
attention without normalisation; normalising the sigmoid brings the sink back (30.24%; their
Table 6, Sec. 7.4), and a learned key/value bias per head takes the sink off the first token
(Table 4, Sec. 7.3: the KV-biases row, Sink_1 0.04% and 72.76% on the bias; the row above it,
74.12% and 0.00%, is a learnable sink token). Their operations, as their code writes
them (sail-sg/Attention-Sink lit_gpt/model_attn_sim.py, model_kv_bias.py): sigma(s) with no bias
(`attn=sigmoid_nobias`), sigma(s) / sum sigma(s) (`attn=sigmoid_norm`), and a per-head k and v
drawn N(0, 0.02^2) that every query sees (`attn=sink_kv`). Sink rate as their evaluation counts
it (pretrain/eval_sink_pretrain.py): the share of heads whose alpha_s on the row-normalised
weights exceeds 0.3, per sequence (docs/metrics.md).

The small analogues are sinkexp's extensions, not the paper's claims: the one-layer trigger model
(Ran-Milo 2026's task) with four heads, where a sink is not forced, for the attention operations
("softmax heads become sinks" is read as at least one head in four, >= 0.25, sinkexp's threshold;
"almost none" as <= 1% of heads, against their 0.44%); and with one head for the key/value bias,
where Theorem 1 forces a softmax head to put its no-op somewhere: on the first token without the
bias (the paired control), so the claim asks whether the bias takes it instead. CPU sizes as
ranmilo2026.

Their open checkpoints (Table 1: GPT2-XL, Mistral-7B and its Instruct model, LLaMA2-7B, LLaMA3-8B;
Fig. 4: Pythia-14M) are measured with `sinkexp measure` where their weights are on the machine
(reproduce/checkpoints.py), with their protocol (sail-sg/Attention-Sink eval_sink_open_source.py:
eager attention, l. 71; float32, bf16 commented out, l. 72; 64 tokens, l. 85; epsilon 0.3, l. 92)
on 100 sequences, and what the tokenizer puts in front of a text, as their `tokenizer(prompt)`
does (`measure`'s bos=auto: BOS for LLaMA and Mistral, nothing for GPT-2 and Pythia).

Their own setting, a language model, is `task=lm` (next byte of the King James Version, the
LLaMA-style `model=llama` preset, 4 x 4, d_model 64, 2000 steps; docs/tasks.md), with the four
attention operations over three seeds: the sink rate over all 16 heads at alpha_s > 0.3. The
learning rate is the source's schedule: constant after the warm-up (their text says cosine, but
every config of sail-sg/Attention-Sink sets min_lr equal to learning_rate), not the LM default's
cosine; AdamW with betas (0.9, 0.95), weight decay 0.1 and clipping 1 are theirs too. The claims
there are the paper's; "sinks emerge" is read as a rate >= 0.1 (sinkexp's threshold, as sun2026's),
"almost none" as <= 0.01 (no head of 16), and both the sigmoid and the bias claims require the
softmax LM to sink: with no sink to remove they say nothing.

Gu's default regime has no fixed first token: their pre-training packs documents into one stream
(preprocess/prepare_file_domain.py: `tokenizer.encode(text)`, whose lit_gpt default is bos=False,
eos=True) and reads blocks at fixed offsets into it, so a sequence starts anywhere in a document;
their evaluation encodes prompts without BOS too (pretrain/eval_sink_pretrain.py, `encode(prompt,
eos=False)`). Their fixed-token variant puts one token at position 0 of every training sequence
and evaluation prompt (scripts/data_distribution/run_fix_token.sh with fix_position 0; `mode ==
"fix"` in eval_sink_pretrain.py), where the sink sits on that token. The LM claims here run that
variant (BOS at position 0, task.bos=true), and say so: in the default regime (`task.bos=false`,
barbero2025's `lm_no_bos`) this byte LM forms no sink at the reach size (largest head 0.056-0.070
on seeds 0-2, docs/findings/barbero2025.md), so no claim there could fail. Each operation's
claim reads its own route (claims.ROUTES): the normalised sigmoid's sink needs every other key's
sigmoid near 0, so the softmax sink is no evidence that the size suffices for it.
At `scale=reach` the LM runs at the scale ladder's first rung that sinks on every seed (`LM_REACH`,
papers/ladder.py: 8000 steps of 64 x 64 bytes, weight decay 0.5, the constant schedule, on seeds
3-5, not the seeds 0-2 that chose it; docs/findings/ladder.md).
"""
from sinkexp.reproduce.declare import Checkpoint, Experiment, Paired, Paper, Value, at_least, at_most, between
from sinkexp.reproduce.measures import final, loss_ratio
from sinkexp.reproduce.papers.ladder import LM_REACH
from sinkexp.reproduce.papers.shipped import GEMMA3, NAMES, SMOLLM2, WEIGHTS

SOFTMAX, SIGMOID, SIGMOID_NORM = ({"attn.name": "softmax"}, {"attn.name": "sigmoid_nobias"},
                                  {"attn.name": "sigmoid_norm"})
CPU = {"train.steps": 1000, "eval.every": 250}
LM_SINK_RATE = final("sink_rate@0.3", -1)
TABLE_6 = "Sec. 7.4, Table 6 (p. 10; attention operations)"
TABLE_1 = "Sec. 3.3, Table 1 (p. 5; natural text, T = 64, epsilon 0.3)"
# Their open checkpoints (Table 1, natural text): name -> (hub id, label, sink rate there)
OPEN_LMS = {"gpt2_xl": ("openai-community/gpt2-xl", "GPT2-XL", 0.7700),
            "mistral_7b": ("mistralai/Mistral-7B-v0.1", "Mistral-7B", 0.9749),
            "llama2_7b": ("meta-llama/Llama-2-7b-hf", "LLaMA2-7B Base", 0.9247),
            "llama3_8b": ("meta-llama/Meta-Llama-3-8B", "LLaMA3-8B Base", 0.9902)}
OPEN_LM_NOTE = ("Within 10 points (sinkexp's tolerance) of the paper's value: the text is sinkexp's (the built-in "
                "KJV; their probe file is not in their repository), 100 sequences of 64 tokens as theirs; their "
                "Fig. 9 finds the domain changes the rate little at epsilon 0.3.")


def open_lm_claim(name: str) -> Value:
    model, label, rate = OPEN_LMS[name]
    return Value(name=f"{name}_sink_rate", kind="paper",
                 statement=f"{label}: {rate:.2%} of its heads sink on the first token (natural text).",
                 source=TABLE_1, paper_value=f"{rate:.2%}", experiment=name, measure=LM_SINK_RATE,
                 criterion=between(rate - 0.1, min(1.0, rate + 0.1)), forms=True, note=OPEN_LM_NOTE)


def shipped_sink_rate(name: str) -> Value:
    """Table 1's content, the share of heads that sink on natural text by Gu's protocol, on a
    checkpoint sinkexp ships: an extension (their checkpoints are others), judged at scale=pretrained."""
    return Value(name=f"{name}_sink_rate", kind="extension",
                 statement=f"{NAMES[name]}'s heads sink on the first token (sink rate over all heads at alpha_s > "
                           "0.3 >= 0.1; natural text, Gu's 100 x 64 tokens).",
                 source=TABLE_1, paper_value="77.00%-99.02% of heads (their five LMs)", experiment=name,
                 measure=LM_SINK_RATE, criterion=at_least(0.1), forms=True,
                 note="Table 1's measure on a model it does not list; the rate threshold (one head in ten) is "
                      "sinkexp's, as lm_softmax_sinks'. " + WEIGHTS)


TABLE_4 = "Sec. 7.3, Table 4 (p. 9), the KV-biases row"
FIXED_TOKEN = ", in Gu's fixed-token variant (BOS at position 0 of every sequence)."
FIXED_NOTE = ("Run in Gu et al.'s fixed-token variant (their scripts/data_distribution/run_fix_token.sh at "
              "position 0), not their default packing, where no token is first in every sequence and this LM "
              "forms no sink at the reach size (the module's docstring).")

PAPER = Paper(
    name="gu2025",
    title="Gu et al. 2025, sink rate of softmax vs sigmoid attention (arXiv 2410.10781)",
    experiments=(
        Experiment(name="four_heads", overrides={"task": "trigger", "model.n_heads": 4},
                   grid={"attn": ("softmax", "sigmoid_nobias", "sigmoid_norm"), "seed": (0, 1, 2)}, cpu=CPU),
        Experiment(name="one_head_kv_bias", overrides={"task": "trigger"},
                   grid={"attn": ("softmax", "sink_kv"), "seed": (0, 1, 2)}, cpu=CPU),
        Experiment(name="lm_attention", overrides={"task": "lm", "train.schedule": "constant"},
                   grid={"attn": ("softmax", "sigmoid_nobias", "sigmoid_norm", "sink_kv"), "seed": (0, 1, 2)},
                   reach=LM_REACH),
        *(Checkpoint(name=name, model=model) for name, (model, _, _) in OPEN_LMS.items()),
        Checkpoint(name="mistral_7b_instruct", model="mistralai/Mistral-7B-Instruct-v0.1"),
        Checkpoint(name="pythia_14m", model="EleutherAI/pythia-14m", untrained="step0"),
        SMOLLM2, GEMMA3,
    ),
    claims=(
        Value(name="softmax_sink_rate", kind="extension", statement="Softmax heads become sinks.",
              source=TABLE_6, paper_value="18.18% of heads (LLMs)", experiment="four_heads",
              where=SOFTMAX, measure=final("sink_rate@0.3", -1), criterion=at_least(0.25), forms=True,
              note="The model of ranmilo2026/four_heads (evaluated every 250 steps here): no head sinks; the "
                   "heads' writes cancel after the readout instead (docs/findings/ranmilo2026.md, 'Four heads')."),
        Value(name="sigmoid_solves", kind="extension", statement="Sigmoid attention still solves the task.",
              source="-", paper_value="-", experiment="four_heads", where=SIGMOID, measure=loss_ratio("trigger"),
              criterion=at_most(0.1), forms=True),
        Value(name="sigmoid_sink_rate", kind="extension",
              statement="Sigmoid attention without normalisation forms almost no sinks.",
              source=TABLE_6, paper_value="0.44% of heads (LLMs)", experiment="four_heads",
              where=SIGMOID, measure=final("sink_rate@0.3", -1), criterion=at_most(0.01),
              requires="sigmoid_solves", contrast="softmax_sink_rate"),
        Value(name="normalised_sigmoid_sinks", kind="extension",
              statement="Normalising the sigmoid brings the sink back.", source=TABLE_6,
              paper_value="30.24% of heads (LLMs)", experiment="four_heads", where=SIGMOID_NORM,
              measure=final("sink_rate@0.3", -1), criterion=at_least(0.25), forms=True, route="bos_sigmoid_norm",
              note="No claim here forms by its route: the softmax heads' sink is no evidence that the size suffices."),
        Value(name="one_head_softmax_sinks", kind="extension",
              statement="One softmax head, which Theorem 1 of ranmilo2026 forces to a no-op, sinks on the first token.",
              source="-", paper_value="-", experiment="one_head_kv_bias", where=SOFTMAX,
              measure=final("sink_attn", 0, "non_trigger"), criterion=at_least(0.9), forms=True),
        Paired(name="kv_bias_takes_the_first_token_sink", kind="extension",
               statement="A learned key/value bias takes the sink off the first token.",
               source=TABLE_4, paper_value="Sink_1 0.04% (LLMs)",
               experiment="one_head_kv_bias", where={"attn.name": "sink_kv"},
               measure=final("sink_score", 0), criterion=at_most(-0.5), against=SOFTMAX,
               requires="one_head_softmax_sinks",
               note="Paired with the one-head softmax run of the same seed, whose no-op Theorem 1 forces onto a key."),
        Value(name="kv_bias_holds_the_sink", kind="extension",
              statement="... and the bias takes the attention the first token held.",
              source=TABLE_4, paper_value="Sink_1* 72.76% (on the bias)", experiment="one_head_kv_bias",
              where={"attn.name": "sink_kv"}, measure=final("slot_attn", 0, "non_trigger"), criterion=at_least(0.5),
              requires="one_head_softmax_sinks"),
        Value(name="lm_softmax_sinks", kind="paper",
              statement="A softmax LM's heads sink (sink rate >= 0.1)" + FIXED_TOKEN,
              source=TABLE_6, paper_value="18.18% of heads", experiment="lm_attention",
              where=SOFTMAX, measure=LM_SINK_RATE, criterion=at_least(0.1), forms=True, route="bos_softmax",
              note="The threshold (one head in ten) is sinkexp's, below the paper's 18.18%. " + FIXED_NOTE),
        Value(name="lm_sigmoid_almost_no_sinks", kind="paper", requires="lm_softmax_sinks",
              statement="An LM with sigmoid attention without normalisation forms almost no sinks (rate <= 0.01)"
                        + FIXED_TOKEN, source=TABLE_6, paper_value="0.44% of heads", experiment="lm_attention",
              where=SIGMOID, measure=LM_SINK_RATE, criterion=at_most(0.01), contrast="lm_softmax_sinks",
              note=FIXED_NOTE),
        Value(name="lm_normalised_sigmoid_sinks", kind="paper",
              statement="Normalising the sigmoid brings the LM's sinks back (rate >= 0.1)" + FIXED_TOKEN,
              source=TABLE_6, paper_value="30.24% of heads", experiment="lm_attention",
              where=SIGMOID_NORM, measure=LM_SINK_RATE, criterion=at_least(0.1), forms=True, route="bos_sigmoid_norm",
              note="No claim here forms by its route: the softmax LM's sink is no evidence that the size suffices, "
                   "so a normalised sigmoid that forms none is not reached. " + FIXED_NOTE),
        Value(name="lm_kv_bias_takes_the_first_token_sink", kind="paper", requires="lm_softmax_sinks",
              statement="With a learned key/value bias the LM's heads no longer sink on the first token "
                        "(rate <= 0.01)" + FIXED_TOKEN, source=TABLE_4,
              paper_value="Sink_1 0.04% (Sink_1* on the bias 72.76%)", experiment="lm_attention",
              where={"attn.name": "sink_kv"}, measure=LM_SINK_RATE, criterion=at_most(0.01),
              contrast="lm_softmax_sinks", note=FIXED_NOTE),
        *(open_lm_claim(name) for name in OPEN_LMS),
        Paired(name="instruction_tuning_keeps_the_sink", kind="paper",
               statement="Instruction tuning changes the sink rate little (Mistral-7B Instruct vs base, "
                         "within 10 points).", source="Sec. 3.4, Table 1 (right)", paper_value="88.34% vs 97.49%",
               experiment="mistral_7b_instruct", against={}, against_in="mistral_7b", measure=LM_SINK_RATE,
               criterion=between(-0.1, 0.1), requires="mistral_7b_sink_rate", note=OPEN_LM_NOTE),
        Value(name="pythia_14m_sinks", kind="paper", statement="Sinks emerge even in the smallest LM, Pythia-14M "
              "(sink rate >= 0.1).", source="Sec. 3.4, Fig. 4 (left)", paper_value="sinks even in Pythia-14M",
              experiment="pythia_14m", measure=LM_SINK_RATE, criterion=at_least(0.1), forms=True,
              note="The rate threshold is sinkexp's; its untrained revision (step0) is measured beside it."),
        *(shipped_sink_rate(exp.name) for exp in (SMOLLM2, GEMMA3)),
    ),
)
