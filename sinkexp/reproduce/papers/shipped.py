"""The pre-trained checkpoints sinkexp ships (hf/shipped.py), as the experiments of the claims judged
at `scale=pretrained`: SmolLM2-135M-Instruct (`smollm2-135m`: LLaMA architecture, pre-RMSNorm,
SwiGLU, RoPE, 30 layers x 9 heads; its tokenizer puts nothing in front of a text) and Gemma-3-270M,
the base model (`gemma3-270m`: RMSNorm before and after each sub-layer, a q/k norm, sliding windows,
18 layers x 4 heads; BOS first), both 4-bit GGUF weights dequantized to float32 (docs/measure.md
bounds what that moves).

Each is measured, not trained, on DRAWS: three texts (sinkexp/data/, the same bytes on every
machine: the KJV, prose the models may have memorised; CPython's argparse.py, public code; sinkexp's
own docs, prose no pre-trained model has seen; scripts/build_texts.py) x two windows each (WINDOWS:
from the text's start and 6400 tokens in, disjoint), each window 100 sequences of 64 tokens (Gu et
al.'s open-source protocol, eval_sink_open_source.py: 100 x 64), with what the tokenizer puts in
front of a text (measure's bos=auto); Gemma-3 on the first two texts only (the KJV and argparse.py,
4 draws), cut while its first draws were being measured, before any claim was judged, when a
draw of Gemma-3 with its interventions proved to take over 10 minutes on the 2 shared cores. A
claim is judged on every draw (its value per draw: <text>@<skip> in claims.csv), so one draw that
misses decides, and the values' spread is over texts and windows. The texts and windows were
fixed before any claim was judged, their number by the CPU time a run may take here: none was
chosen to make a claim pass. The
interventions (BOS removed, the perturbation, the massive ablation) read each draw's first 20
sequences (analysis/spike.py: ABLATED).

A claim's untrained value is the same architecture at random initialisation (untrained=INIT):
transformers' own initialisation of the model's config (`from_config`: linear and embedding
weights N(0, 0.02^2), norms at the identity) after torch.manual_seed(0), measured on the same
draws; so a claim that holds untrained too cannot fail.
"""
from sinkexp.reproduce.declare import UNTRAINED, Checkpoint
from sinkexp.reproduce.experiment import INIT

TEXTS = ("kjv", "argparse", "sinkexp-docs")
WINDOWS = (0, 6400)   # tokens skipped: disjoint windows of 100 x 64 tokens
DRAWS = tuple({"text": text, "skip": skip} for text in TEXTS for skip in WINDOWS)
SETTINGS = {"n": 100, "seq_len": 64}   # Gu et al.'s eval_sink_open_source.py: 100 sequences of 64 tokens
INIT_SEED = 0


def shipped(name: str, model: str, texts: int = len(TEXTS)) -> Checkpoint:
    """Checkpoint `name` measured on the first `texts` of TEXTS, each at every window."""
    draws = tuple(draw for draw in DRAWS if draw["text"] in TEXTS[:texts])
    return Checkpoint(name=name, model=model, untrained=INIT, seed=INIT_SEED, settings=SETTINGS, draws=draws)


SMOLLM2 = shipped("smollm2", "smollm2-135m")
GEMMA3 = shipped("gemma3", "gemma3-270m", texts=2)   # 2 texts: the CPU time (module docstring)
NAMES = {"smollm2": "SmolLM2-135M-Instruct", "gemma3": "Gemma-3-270M"}
WEIGHTS = ("4-bit GGUF weights dequantized (docs/measure.md); measured on 3 texts (Gemma-3: 2) x 2 windows of "
           "100 x 64 tokens, the untrained value on the architecture at transformers' random initialisation, seed 0 "
           "(reproduce/papers/shipped.py).")
FIRST = "The intervention reads each draw's first 20 sequences (analysis/spike.py: ABLATED). "
# a direction with no figure, on a checkpoint: each draw against the same draw at random initialisation
BEYOND = {"against": UNTRAINED, "compare": "ratio beyond spread"}
BEYOND_NOTE = ("The paper gives no figure: each draw's value over the same draw's on the randomly initialised "
               "architecture, beyond what those untrained values differ by over the draws (max / min; "
               "docs/reproduce.md, 'Thresholds'). ")
