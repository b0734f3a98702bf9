"""Sun, Canziani, LeCun and Zhu 2026, "The Spike, the Sparse and the Sink: anatomy of massive
activations and attention sinks" (arXiv 2603.05498).

In their LLMs, a few tokens carry massive activations and the same tokens draw the sinks; the
pre-norm configuration is what lets the two co-occur, and ablating it decouples them (abstract).
The summary sinkexp has gives the ablation's results: a sandwich norm or DynamicTanh in place of
pre-RMSNorm removes most of the spike while the sink ratio is kept or grows. Where in the paper
these results, the gating, head-dimension and context-length results stand (section, figure) is
not located: only the abstract and the start of Sec. 1 were readable here, so those claims cite
the summary's results. They also vary the learning rate, weight decay and
AdamW's momentum; the summary sinkexp has gives no direction or figure for weight decay, so the
weight-decay claims are sinkexp's questions (extensions). The small analogue here: the one-layer
Bigram-Backcopy model (Guo et al. 2024's task), whose softmax head sinks on BOS; `massive_ratio`
is max |h| / median |h| of the residual stream after the block (docs/metrics.md). Paired run for
run against the pre-LayerNorm model of the same seed and table. CPU sizes: 1000 steps (at 500 the
pre-norm sinks had formed, but a sandwich sink formed later: BOS attention 0.24-0.98 over the six
draws, DyT 0.71-1.00). Weight decay 0, 1e-4 (the task's default: the `norms` experiment's pre-norm
runs) and 0.1, with one layer and with three (the massive ratio of the loudest layer).

The paper's own setting, a language model, is `task=lm` (next byte of the King James Version, the
LLaMA-style `model=llama` preset, 4 x 4, d_model 64, 2000 steps; docs/tasks.md): pre-RMSNorm
against a sandwich norm and against DynamicTanh, three seeds each. The claims there are the paper's;
at this size the model may well neither spike nor sink, and then they are not reached. The 100x
threshold of a "spike" is sinkexp's (Sun et al. 2024's abstract, arXiv 2402.17762, speaks of
activations "e.g., 100,000 times larger" than others; i.i.d. Gaussian entries give ~7-8).
Also on the LM, at sinkexp's sizes:
- context length, an extension: the paper changes the mix of context lengths in training and finds
  that models trained only on long contexts sink much less. sinkexp asks the nearest question its
  runs answer: at fixed windows of 64-512 bytes (barbero2025's runs at 4096 bytes per step, with Gu
  et al.'s constant learning rate, copied, not retrained; 512 bytes is a short context by an LLM's
  measure), do fewer heads sink the longer the window? barbero2025 claims the opposite direction on
  the same runs.
- head dimension: the larger, the clearer the sink. d_model stays 64, so 8, 4 and 2 heads give
  head dimensions 8, 16 and 32 (the number of heads changes with it); "clearer" is read as the mean
  first-token attention over all heads, which does not depend on how many heads there are. The
  trend requires sinks at head dimension 32.
- weight decay 0, 0.1 (the LM default) and 1.0. AdamW decays every parameter (norm gains and
  embeddings too); the decay budget wd x the summed learning rate (about 3.0 over the 2000 steps of
  warm-up and cosine) is 0, 0.3 and 3. sinkexp asks whether the spike is larger without weight decay,
  at nearly the same loss.
- gated attention removes the sink without a loss of performance. The gate is sinkexp's choice:
  Qiu et al. 2025's element-wise sigmoid gate on the attention output (`attn=gated
  attn.gate=elementwise`).
At `scale=reach` the LM runs at the scale ladder's first rung that sinks on every seed (`LM_REACH`,
papers/ladder.py: 8000 steps of 64 x 64 bytes, weight decay 0.5, the constant schedule, on seeds
3-5, not the seeds 0-2 that chose it; docs/findings/ladder.md), for the norms and gating claims
(`lm_norms`, `lm_gated`); the other LM experiments stay at the CPU size. The rung was shown to sink
for the pre-norm arm; the sandwich arm's sink claim counts that as evidence (`reached`) by the same
route (claims.ROUTES): the rung's sink is a layer-0 head on BOS with no spike (its largest
`massive_ratio` 22-28 on seeds 0-2), and a sandwich norm gives layer 0's attention the same input,
the normalised embedding (Sun et al.'s sandwich keeps its sink "by another strategy" where the
pre-norm sink is spike-fed, not here). It counts only where the pre-norm sink formed by half of
training on every seed (verdicts.py). "No degradation" with gating has no figure: the source's
direction within the pre-norm runs' spread (`ratio over spread`, as fesser2026's penalty), not
sinkexp's 10%.
"""
from sinkexp.reproduce.declare import Experiment, Paired, Paper, Trend, Value, at_least, at_most, between
from sinkexp.reproduce.measures import excess_loss, final, loss_ratio
from sinkexp.reproduce.papers import sun2026_pretrained
from sinkexp.reproduce.papers.ladder import LM_REACH

DRAWS = {"seed": (0, 1, 2), "task.structure_seed": (0, 1)}
CPU = {"train.steps": 1000, "eval.every": 250}
PRE = {"model.norm": "pre", "model.norm_type": "layernorm"}
SPIKE, BOS = final("massive_ratio", 0), final("sink_attn", 0, "non_trigger")
LOSS = final("loss_eval", -1, "all")
BACKCOPY = {"task": "backcopy"}
LM, LM_SEEDS = {"task": "lm"}, {"seed": (0, 1, 2)}
LM_PRE = {"model.norm": "pre", "model.norm_type": "rmsnorm"}
LM_SPIKE, LM_SINK_RATE = final("massive_ratio", "max"), final("sink_rate@0.3", -1)
# What the normalisation-ablation claims share, on backcopy and on the LM alike.
LM_LENGTHS, LM_BYTES_PER_STEP = (64, 128, 256, 512), 4096          # barbero2025's LM context experiments
LM_CONTEXT = tuple(f"lm_context_{length}" for length in LM_LENGTHS)
LM_LOSS = final("loss_eval", -1, "all")
FIRST_TOKEN = final("sink_attn", "mean", "text")     # mean attention on position 0 over every head
CO_OCCUR = "abstract and Sec. 1 (spikes and sinks co-occur in pre-norm LLMs)"
NORMS = "abstract (ablating pre-norm decouples the two); summary: results, normalisation (section not located)"
LOWERS = dict(source=NORMS, paper_value="spike mostly gone", criterion=at_most(0.0, by="direction"))
KEEPS = dict(source=NORMS, paper_value="sink ratio kept or grows (vs pre-norm)",
             note="The threshold is sinkexp's; the paper compares the sink ratio with pre-norm's.")
GATING = "summary: results, gated attention (section not located)"
GATE_NOTE = ("The gate is sinkexp's choice (Qiu et al. 2025's element-wise sigmoid); the paper's conditional gate is "
             "not located.")
HEAD_DIM = "summary: results, head dimension (section not located)"
CONTEXT = "summary: key findings, context length (section not located)"
SPIKE_NOTE = ("Gaussian noise over this stream gives ~8 (max |z| / median |z| of 512 x 64 x 64 N(0, 1) draws); the "
              "threshold 100 is sinkexp's (Sun et al. 2024's abstract: 'e.g., 100,000 times larger').")
WEIGHT_DECAY = dict(source="- (the summary: weight decay was varied; no direction or figure)", paper_value="-")

PAPER = Paper(
    name="sun2026",
    title="Sun et al. 2026, The Spike, the Sparse and the Sink (massive activations vs attention sinks)",
    experiments=(
        Experiment(name="norms", overrides=BACKCOPY, grid={"model.norm": ("pre", "sandwich"), **DRAWS}, cpu=CPU),
        Experiment(name="dyt", overrides={**BACKCOPY, "model.norm_type": "dyt"}, grid=DRAWS, cpu=CPU),
        Experiment(name="weight_decay", overrides=BACKCOPY, grid={"train.weight_decay": (0.0, 0.1), **DRAWS}, cpu=CPU),
        Experiment(name="weight_decay_3_layers", overrides={**BACKCOPY, "model.n_layers": 3},
                   grid={"train.weight_decay": (0.0, 0.0001, 0.1), **DRAWS}, cpu=CPU),
        Experiment(name="lm_norms", overrides=LM, grid={"model.norm": ("pre", "sandwich"), **LM_SEEDS},
                   reach=LM_REACH),
        Experiment(name="lm_dyt", overrides={**LM, "model.norm_type": "dyt"}, grid=LM_SEEDS),
        *(Experiment(name=name, overrides={**LM, "train.schedule": "constant", "task.seq_len": length,
                                           "train.batch_size": LM_BYTES_PER_STEP // length},
                     grid=LM_SEEDS) for name, length in zip(LM_CONTEXT, LM_LENGTHS)),
        Experiment(name="lm_heads", overrides=LM, grid={"model.n_heads": (2, 4, 8), **LM_SEEDS}),
        Experiment(name="lm_weight_decay", overrides=LM, grid={"train.weight_decay": (0.0, 0.1, 1.0), **LM_SEEDS}),
        Experiment(name="lm_gated", overrides={**LM, "attn": "gated", "attn.gate": "elementwise"}, grid=LM_SEEDS,
                   reach=LM_REACH),
        *sun2026_pretrained.EXPERIMENTS,   # the shipped checkpoints, at scale=pretrained
    ),
    claims=(
        Value(name="pre_norm_spikes", kind="extension",
              statement="The pre-norm model grows a massive activation (max |h| >= 100 x median |h|).",
              source="Sun et al. 2024, abstract (arXiv 2402.17762)", paper_value="e.g. 100,000x larger (LLMs)",
              experiment="norms", where={"model.norm": "pre"}, measure=SPIKE, criterion=at_least(100.0), forms=True,
              note=SPIKE_NOTE),
        Value(name="pre_norm_sinks", kind="extension", statement="The pre-norm model sinks on BOS.",
              source="-", paper_value="-", experiment="norms", where={"model.norm": "pre"}, measure=BOS,
              criterion=at_least(0.9), forms=True, note="The premise of the claims that a norm keeps the sink."),
        Value(name="backcopy_learned", kind="extension", statement="The pre-norm model learns the back-copy.",
              source="-", paper_value="-", experiment="norms", where={"model.norm": "pre"},
              measure=excess_loss("trigger"), criterion=at_most(0.05), forms=True,
              note="Untrained, two runs' losses are alike: a loss ratio counts only beside a model that learned."),
        Paired(name="sandwich_lowers_the_spike", kind="extension", requires="pre_norm_spikes",
               statement="A sandwich norm lowers the massive ratio (vs pre-norm).", experiment="norms",
               where={"model.norm": "sandwich"}, measure=SPIKE, against=PRE, **LOWERS),
        Value(name="sandwich_keeps_the_sink", kind="extension", statement="With a sandwich norm the sink stays.",
              experiment="norms", where={"model.norm": "sandwich"}, measure=BOS, criterion=at_least(0.9),
              requires="pre_norm_sinks", **KEEPS),
        Paired(name="dyt_lowers_the_spike", kind="extension", requires="pre_norm_spikes",
               statement="DynamicTanh lowers the massive ratio (vs pre-LayerNorm).", experiment="dyt",
               where={"model.norm_type": "dyt"}, measure=SPIKE, against=PRE, against_in="norms", **LOWERS),
        Value(name="dyt_keeps_the_sink", kind="extension", statement="With DynamicTanh the sink stays.",
              experiment="dyt", where={"model.norm_type": "dyt"}, measure=BOS, criterion=at_least(0.9),
              requires="pre_norm_sinks", **KEEPS),
        Paired(name="no_weight_decay_larger_spike", kind="extension", requires="pre_norm_spikes",
               statement="Without weight decay the spike is larger (vs weight decay 0.1).", experiment="weight_decay",
               where={"train.weight_decay": 0.0}, measure=SPIKE, criterion=at_least(1.0),
               against={"train.weight_decay": 0.1}, compare="ratio", **WEIGHT_DECAY),
        Paired(name="no_weight_decay_same_loss", kind="extension", requires="pre_norm_spikes",
               statement="... at nearly the same loss (within 10%).", experiment="weight_decay",
               where={"train.weight_decay": 0.0}, measure=LOSS, criterion=between(0.9, 1.1),
               against={"train.weight_decay": 0.1}, compare="ratio", contrast="backcopy_learned", **WEIGHT_DECAY),
        Trend(name="less_weight_decay_larger_spike", kind="extension", requires="pre_norm_spikes",
              statement="The less weight decay (0.1, 1e-4, 0), the larger the spike.",
              experiment=("weight_decay", "norms"), where=PRE, measure=SPIKE, criterion=at_most(-0.8),
              key="train.weight_decay", note="Three values per draw: rho <= -0.8 means the order is exactly reversed.",
              **WEIGHT_DECAY),
        Trend(name="less_weight_decay_larger_spike_3_layers", kind="extension", requires="pre_norm_spikes",
              statement="... also with three layers (loudest layer).", experiment="weight_decay_3_layers",
              measure=final("massive_ratio", "max"), criterion=at_most(-0.8), key="train.weight_decay",
              **WEIGHT_DECAY),
        Value(name="lm_pre_norm_spikes", kind="paper",
              statement="A pre-norm LM grows a massive activation (max |h| >= 100 x median |h| after some block).",
              source=CO_OCCUR, paper_value="massive activations (no figure located)",
              experiment="lm_norms", where={"model.norm": "pre"}, measure=LM_SPIKE, criterion=at_least(100.0),
              forms=True, note="i.i.d. Gaussian entries of this stream's shape give ~7 (docs/metrics.md); the "
                               "threshold 100 is sinkexp's."),
        Value(name="lm_pre_norm_sinks", kind="paper",
              statement="The pre-norm LM's heads sink on the first token (sink rate over all heads at "
                        "alpha_s > 0.3 >= 0.1).",
              source=CO_OCCUR, paper_value="sinks (qualitative)",
              experiment="lm_norms", where={"model.norm": "pre"}, measure=LM_SINK_RATE, criterion=at_least(0.1),
              forms=True, route="bos_softmax",
              note="The threshold (one head in ten) is sinkexp's: the paper reports sinks, not a rate."),
        Value(name="lm_learns_the_text", kind="extension",
              statement="The pre-norm LM learns the text (held-out loss <= 0.6 of the bigram model's).",
              source="-", paper_value="-", experiment="lm_norms", where={"model.norm": "pre"},
              measure=loss_ratio("all"), criterion=at_most(0.6), forms=True,
              note="Untrained, two LMs' losses are alike: a loss ratio counts only beside an LM that learned."),
        Paired(name="lm_sandwich_lowers_the_spike", kind="paper", requires="lm_pre_norm_spikes",
               statement="A sandwich norm lowers the LM's massive ratio (vs pre-norm).", experiment="lm_norms",
               where={"model.norm": "sandwich"}, measure=LM_SPIKE, against=LM_PRE, **LOWERS),
        Value(name="lm_sandwich_keeps_the_sink", kind="paper", requires="lm_pre_norm_sinks",
              statement="With a sandwich norm the LM's heads still sink (rate >= 0.1).", experiment="lm_norms",
              where={"model.norm": "sandwich"}, measure=LM_SINK_RATE, criterion=at_least(0.1), forms=True,
              reached="lm_pre_norm_sinks", route="bos_softmax", source=NORMS,
              paper_value="sink ratio kept or grows (vs pre-norm)",
              note=KEEPS["note"] + " Its evidence that the size suffices is the pre-norm sink of the same route "
                   "(layer 0's attention sees the same normalised embedding under both norms), where it formed "
                   "by half of training on every seed."),
        Paired(name="lm_dyt_lowers_the_spike", kind="paper", requires="lm_pre_norm_spikes",
               statement="DynamicTanh lowers the LM's massive ratio (vs pre-RMSNorm).", experiment="lm_dyt",
               where={"model.norm_type": "dyt"}, measure=LM_SPIKE, against=LM_PRE, against_in="lm_norms", **LOWERS),
        Value(name="lm_dyt_keeps_the_sink", kind="paper", requires="lm_pre_norm_sinks",
              statement="With DynamicTanh the LM's heads still sink (rate >= 0.1).", experiment="lm_dyt",
              where={"model.norm_type": "dyt"}, measure=LM_SINK_RATE, criterion=at_least(0.1), **KEEPS),
        Value(name="lm_short_context_sinks", kind="extension",
              statement="An LM trained on short contexts (64 bytes) sinks "
              "(sink rate over all heads at alpha_s > 0.3 >= 0.1).", source=CONTEXT,
              paper_value="sinks arise mainly in short-context training", experiment="lm_context_64",
              measure=LM_SINK_RATE, criterion=at_least(0.1), forms=True,
              note="The premise of the trend below; the threshold is sinkexp's."),
        Trend(name="lm_longer_context_fewer_sinks", kind="extension", requires="lm_short_context_sinks",
              statement="Trained on longer contexts (same bytes per step), fewer of the LM's heads sink.",
              source=CONTEXT, paper_value="the sink ratio falls sharply with long contexts only",
              experiment=LM_CONTEXT, measure=LM_SINK_RATE, criterion=at_most(-0.8), key="task.seq_len",
              note="The paper compares training-length mixes, not fixed windows; rho <= -0.8 over four lengths "
                   "per seed is sinkexp's. barbero2025's lm_longer_context_more_sinks claims the opposite on the "
                   "same runs."),
        Value(name="lm_wide_heads_sink", kind="extension", statement="An LM with 2 heads of dimension 32 sinks (sink "
              "rate over all heads at alpha_s > 0.3 >= 0.1).", source="-", paper_value="-", experiment="lm_heads",
              where={"model.n_heads": 2}, measure=LM_SINK_RATE, criterion=at_least(0.1), forms=True,
              note="The premise of the trend below, sinkexp's: the paper gives a trend, not that head dimension "
                   "32 sinks; the threshold is sinkexp's."),
        Trend(name="lm_larger_head_dimension_clearer_sink", kind="paper", requires="lm_wide_heads_sink",
              statement="The larger the head dimension (d_model / heads: 8, 16, 32), the more attention the "
                        "heads put on the first token.",
              source=HEAD_DIM, paper_value="sinks clearer as the head dimension grows",
              experiment="lm_heads", measure=FIRST_TOKEN, criterion=at_most(-0.8), key="model.n_heads",
              note="Ranked against the number of heads at d_model 64, which changes with the head dimension "
                   "(the summary lists head count and head dimension as separate settings; coupling them is "
                   "sinkexp's): rho <= -0.8 (sinkexp's) means larger heads, more first-token attention."),
        Paired(name="lm_no_weight_decay_larger_spike", kind="extension", requires="lm_pre_norm_spikes",
               statement="Without weight decay the LM's spike is larger (vs weight decay 0.1).",
               experiment="lm_weight_decay", where={"train.weight_decay": 0.0}, measure=LM_SPIKE,
               criterion=at_least(1.0), against={"train.weight_decay": 0.1}, compare="ratio",
               note="Tests the direction only (ratio >= 1).", **WEIGHT_DECAY),
        Paired(name="lm_no_weight_decay_same_loss", kind="extension", requires="lm_pre_norm_spikes",
               statement="... at nearly the same loss (within 10%).", experiment="lm_weight_decay",
               where={"train.weight_decay": 0.0}, measure=LM_LOSS, criterion=between(0.9, 1.1),
               against={"train.weight_decay": 0.1}, compare="ratio", contrast="lm_learns_the_text",
               note="The 10% tolerance is sinkexp's.", **WEIGHT_DECAY),
        Trend(name="lm_less_weight_decay_larger_spike", kind="extension", requires="lm_pre_norm_spikes",
              statement="The less weight decay (1.0, 0.1, 0; decay budgets 3, 0.3, 0), the larger the LM's spike.",
              experiment="lm_weight_decay", measure=LM_SPIKE, criterion=at_most(-0.8), key="train.weight_decay",
              note="Three values per seed: rho <= -0.8 means the order is exactly reversed (sinkexp's).",
              **WEIGHT_DECAY),
        Value(name="lm_gating_removes_the_sink", kind="paper", requires="lm_pre_norm_sinks",
              statement="With gated attention the LM's heads no longer sink (sink rate <= 0.01).",
              source=GATING, paper_value="the sink disappears", experiment="lm_gated",
              measure=LM_SINK_RATE, criterion=at_most(0.01), contrast="lm_pre_norm_sinks",
              note="The threshold (one head in a hundred) is sinkexp's. " + GATE_NOTE),
        Paired(name="lm_gating_keeps_the_loss", kind="paper", requires="lm_pre_norm_sinks",
               statement="... without a loss of performance (held-out loss no further above the pre-norm LM's "
                         "than the pre-norm runs are from one another).",
               source=GATING, paper_value="no degradation", experiment="lm_gated", measure=LM_LOSS,
               criterion=at_most(1.0, by="direction"), against=LM_PRE, against_in="lm_norms",
               compare="ratio over spread", contrast="lm_learns_the_text",
               note="The paper gives no figure: the ratio to the pre-norm LM of the same seed over the pre-norm "
                    "runs' max / min (docs/reproduce.md, 'Thresholds'); sinkexp's 10% is no longer the criterion. "
                    + GATE_NOTE),
        *sun2026_pretrained.CLAIMS,
    ),
)
