"""Sun et al. 2026's claims on the pre-trained checkpoints sinkexp ships (papers/shipped.py), judged at
`scale=pretrained`: the paper's own on SmolLM2-135M (a pre-norm LLaMA-architecture LM, the kind the
paper dissects), extensions on Gemma-3-270M, whose RMSNorm before and after each sub-layer is the
sandwich norm the paper finds removes most of the spike.

The paper's text could not be read past its abstract (sun2026.py), so the claims follow the summary
sinkexp has, and every magnitude is sinkexp's, labelled, chosen before any model was measured:
- a spike is a residual-stream entry >= 100x its stream's median (as the tiny LM's claims);
- step-up: one MLP in the first half of the blocks writes >= half of the spike's peak value (the
  summary: early step-up blocks, where SwiGLU amplifies it; "early" read as the first half);
- step-down: >= half of the spike is gone from the last block's output (the summary: late
  step-down blocks cancel it, back to an ordinary size);
- near-constant: the spike token's state has a mean cosine >= 0.9 with its mean over the sequences
  (the summary: RMSNorm turns it into a nearly constant, sparse vector), on SmolLM2 only: Gemma-3's
  inputs begin with BOS, the same state in every sequence by construction (position 0 of a causal
  model), whatever the training, so where its spike sat there the claim could not fail; read
  without its BOS it needs a second measurement of every draw, which this CPU budget leaves out;
- same position: the spike sits at the sink position (position 0) in >= 0.9 of the sequences, at
  the layer of the largest spike;
- the ablation (an extension; Sun et al. 2024, §3, on LLaMA2-7B, the reading sun2026's summary gives
  the spike, "implicit parameters"): at the spike's step-up block, the massive activations set to zero
  at least double the loss (sinkexp's 2x, as barbero2025's 'much worse' was) and set to their mean
  move it by at most 10% (sinkexp's tolerance, as lm_no_weight_decay_same_loss'), on the first 20
  sequences of each draw (analysis/spike.py). Untrained there are no massive activations: both ratios
  are 1, so the mean claim counts beside the zero claim, which holds only trained.
"""
from sinkexp.reproduce.declare import Value, at_least, at_most
from sinkexp.reproduce.measures import at_peak, final, largest_spike, massive_ablation, spike
from sinkexp.reproduce.papers.shipped import FIRST, GEMMA3, NAMES, SMOLLM2, WEIGHTS

EXPERIMENTS = (SMOLLM2, GEMMA3)
CO_OCCUR = "abstract and Sec. 1 (spikes and sinks co-occur in pre-norm LLMs)"
STEPS = "summary: methodology, step-up and step-down blocks; finding 2, SwiGLU's amplifier (section not located)"
CONSTANT = "summary: finding A, RMSNorm makes the spike token near-constant (section not located)"
ABLATION = "Sun et al. 2024 (arXiv 2402.17762), Sec. 3, LLaMA2-7B; sun2026's summary: spikes as implicit parameters"
SPIKE_NOTE = "The 100x threshold is sinkexp's (Sun et al. 2024's abstract: 'e.g., 100,000 times larger'). "
SANDWICH = ("Gemma-3 normalises before and after each sub-layer (the sandwich norm the paper finds removes most "
            "of the spike), so the claim is an extension there. ")


def kind_of(name: str) -> tuple[str, str]:
    """(kind, note's opening) of a claim on checkpoint `name`: the paper's on the pre-norm SmolLM2."""
    return ("paper", "") if name == "smollm2" else ("extension", SANDWICH)


def spike_claims(name: str, constancy: bool = True) -> tuple:
    """The spike and where it rises and falls, on checkpoint `name` (one of shipped.NAMES)."""
    kind, opening = kind_of(name)
    model, spikes = NAMES[name], f"{name}_spikes"
    claims = [
        Value(name=spikes, kind=kind, statement=f"{model} grows a massive activation (max |h| >= 100 x the "
              "median |h| of its residual stream after some block).", source=CO_OCCUR,
              paper_value="e.g. 100,000x larger (Sun et al. 2024)", experiment=name, measure=largest_spike(),
              criterion=at_least(100.0), forms=True, note=opening + SPIKE_NOTE + WEIGHTS),
        Value(name=f"{name}_spike_steps_up", kind=kind, requires=spikes, statement=f"{model}'s spike is "
              "written by the MLP of an early block (a step-up block: one MLP of the first half of the "
              "blocks writes at least half of it).", source=STEPS, paper_value="early step-up blocks (SwiGLU)",
              experiment=name, measure=spike("step_up"), criterion=at_least(0.5),
              note=opening + "Half, and the first half of the blocks as 'early', are sinkexp's. " + WEIGHTS),
        Value(name=f"{name}_spike_steps_down", kind=kind, requires=spikes, statement=f"{model}'s spike is "
              "cancelled in its late blocks (step-down blocks: at least half of it gone from the last "
              "block's output).", source=STEPS, paper_value="late step-down blocks cancel it",
              experiment=name, measure=spike("step_down"), criterion=at_least(0.5),
              note=opening + "Half is sinkexp's. " + WEIGHTS),
    ]
    if constancy:
        claims.append(
            Value(name=f"{name}_spike_state_constant", kind=kind, requires=spikes, statement=f"{model}'s spike "
                  "token's state is nearly the same vector in every sequence (mean cosine with its mean >= 0.9).",
                  source=CONSTANT, paper_value="a near-constant, sparse vector after RMSNorm", experiment=name,
                  measure=spike("state_cos"), criterion=at_least(0.9),
                  note=opening + "The cosine of the state's direction (RMSNorm's output before its gain) at the "
                                 "layer of the largest spike; 0.9 is sinkexp's. " + WEIGHTS))
    return tuple(claims)


def sink_claims(name: str) -> tuple:
    """The sink and the spike on one position, and the spike ablated, on checkpoint `name`."""
    kind, opening = kind_of(name)
    model, spikes, sinks = NAMES[name], f"{name}_spikes", f"{name}_sinks"
    ablation = dict(kind="extension", requires=spikes, source=ABLATION, experiment=name)
    return (
        Value(name=sinks, kind=kind, statement=f"{model}'s heads sink on the first position (sink rate over all "
              "heads at alpha_s > 0.3 >= 0.1).", source=CO_OCCUR, paper_value="sinks in pre-norm LLMs",
              experiment=name, measure=final("sink_rate@0.3", -1), criterion=at_least(0.1), forms=True,
              note=opening + "The rate threshold is sinkexp's. " + WEIGHTS),
        Value(name=f"{name}_sink_on_the_spike", kind=kind, requires=(spikes, sinks), statement=f"{model}'s spike "
              "sits where its heads sink, on the first position (in at least 9 of 10 sequences).", source=CO_OCCUR,
              paper_value="the same tokens", experiment=name, measure=at_peak("massive_at_sink"),
              criterion=at_least(0.9), note=opening + "At the layer of the largest spike; 0.9 is sinkexp's. "
              + WEIGHTS),
        Value(name=f"{name}_massive_zero_breaks", statement=f"Setting {model}'s massive activations to zero breaks "
              "it (the loss at least doubles).", paper_value="perplexity to infinity (LLaMA2-7B)",
              measure=massive_ablation("massive_zero"), criterion=at_least(2.0),
              note="The factor 2 is sinkexp's. " + FIRST + WEIGHTS, **ablation),
        Value(name=f"{name}_massive_mean_keeps", statement="... setting them to their mean over the sequences "
              "does not (the loss within 10%).", paper_value="perplexity unchanged (LLaMA2-7B)",
              measure=massive_ablation("massive_mean"), criterion=at_most(1.1), contrast=f"{name}_massive_zero_breaks",
              note="The 10% is sinkexp's. " + FIRST + WEIGHTS, **ablation),
    )


CLAIMS = (*spike_claims("smollm2"), *sink_claims("smollm2"), *spike_claims("gemma3", constancy=False),
          *sink_claims("gemma3"))
