"""The massive activation of a measured language model (a `sinkexp measure` run loaded back,
analysis/measured.py) followed through its blocks: where it rises and falls (Sun et al. 2026's
step-up and step-down blocks), how constant the state it sits in is across sequences, and what
setting it to zero or to its mean does (Sun et al. 2024, §3).

    anatomy = spike_anatomy(run)          # step_up, step_down, state_cos, rest_cos, up_block, ...
    ratios = massive_ablation(run, anatomy["up_block"])    # loss ratios of massive_zero and massive_mean

The spike of sequence b is its entry (position p_b, channel c_b) of the largest |h| at the peak
layer L*, the layer whose `massive_ratio` (the run's own table) is the largest. Followed through
every block l of L: its value v_l[b] = h_l[b, p_b, c_b] after the block (v_{-1}: the embedding's
output), what the attention wrote there, a_l[b] (capture.py's attn.output: after the norm that
follows the attention where the family has one, Gemma-3's), and what the MLP wrote, m_l[b] = v_l -
v_{l-1} - a_l (Gemma-3's after its post-feedforward norm). With s_b the sign of v_{L*}[b] and
peak_b = max over l of s_b v_l[b]:
- step_up: mean over b of max over the first half of the blocks (l < L / 2) of s_b m_l[b] / peak_b,
  the share of the spike that one early block's MLP writes (Sun et al. 2026: an early step-up
  block's SwiGLU amplifies it); up_block, the block of the largest s_b m_l[b] over all blocks (the
  most frequent over the sequences);
- step_down: mean over b of 1 - s_b v_{L-1}[b] / peak_b, the share of the spike gone from the last
  block's output (the step-down blocks write against it); down_blocks, the three blocks whose
  writes take most from it (mean over b of -s_b (v_l - v_{l-1}) / peak_b);
- state_cos: mean over b of cos(h_{L*}[b, p_b], mean over b of h_{L*}[b, p_b]), how nearly the spike
  token's state is one vector across sequences (its direction: what RMSNorm keeps before its
  gain; Sun et al. 2026); rest_cos, the same at every other position t, averaged over t; at_first,
  the share of sequences whose spike sits at position 0.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import replace

import torch

from sinkexp.analysis.lm_interventions import find_massive, lm_interventions
from sinkexp.hf.capture import layer_by_layer

CHUNK = 25  # sequences a pass: every layer's stream and attention write are kept (SmolLM2: 220 MB)
ABLATED = 20  # sequences an intervention on a real LM reads: two to four passes each (Gemma-3's 262k logits)


def peak_layer(metrics) -> int:
    """The layer of the largest `massive_ratio` at the run's last step (its metrics.csv)."""
    rows = metrics[(metrics["metric"] == "massive_ratio") & (metrics["step"] == metrics["step"].max())]
    return int(rows.loc[rows["value"].idxmax(), "layer"])


@torch.no_grad()
def followed(run, inputs: torch.Tensor, peak: int) -> tuple[torch.Tensor, ...]:
    """One pass over `inputs` (b, T): (v (L + 1, b), a (L, b), the stream at the peak layer (b, T, d),
    p (b,), c (b,)) as the module's docstring defines them."""
    taps = {}

    def keep(layer: int, cache: dict) -> None:
        taps[layer] = (cache[f"blocks.{layer}.resid_post"], cache[f"blocks.{layer}.attn.output"])

    with layer_by_layer(run.model, run.family, keep):
        embedded = run.model.base_model(input_ids=inputs, use_cache=False, output_hidden_states=True).hidden_states[0]
    h = taps[peak][0]  # (b, T, d)
    where = h.abs().flatten(1).argmax(dim=1)
    p, c, b = where // h.shape[2], where % h.shape[2], torch.arange(len(inputs))
    v = torch.stack([embedded.float()[b, p, c], *(taps[layer][0][b, p, c] for layer in sorted(taps))])
    a = torch.stack([taps[layer][1][b, p, c] for layer in sorted(taps)])
    return v, a, h, p, c


def spike_anatomy(run, chunk: int = CHUNK) -> dict:
    """The spike's anatomy on the run's inputs (the module's docstring), `chunk` sequences a pass."""
    peak = peak_layer(run.metrics)
    parts = [followed(run, part, peak) for part in run.inputs.split(chunk)]
    v, a, h, p, c = (torch.cat(pieces, dim=1 if i < 2 else 0) for i, pieces in enumerate(zip(*parts)))
    L = len(a)
    sign = v[peak + 1].sign()
    signed, tallest = sign * v, (sign * v).max(dim=0).values  # (L + 1, N), (N,)
    mlp = sign * (v[1:] - v[:-1] - a)  # (L, N): what each block's MLP wrote in the spike's direction
    taken = (-(signed[1:] - signed[:-1]) / tallest).mean(dim=1)  # (L,): each block's share of the fall
    states = h[torch.arange(len(p)), p]  # (N, d)
    spot = Counter(p.tolist()).most_common(1)[0][0]
    return {
        "peak_layer": peak,
        "step_up": (mlp[: math.ceil(L / 2)].max(dim=0).values / tallest).mean().item(),
        "up_block": Counter(mlp.argmax(dim=0).tolist()).most_common(1)[0][0],
        "step_down": (1 - signed[-1] / tallest).mean().item(),
        "down_blocks": taken.topk(min(3, L)).indices.tolist(),
        "state_cos": constancy(states),
        "rest_cos": sum(constancy(h[:, t]) for t in range(h.shape[1]) if t != spot) / (h.shape[1] - 1),
        "at_first": (p == 0).float().mean().item(),
        "position": spot,
        "channel": Counter(c.tolist()).most_common(1)[0][0],
    }


def on_first(run, analysis, sequences: int = ABLATED):
    """`analysis` (a function of a measured run, e.g. lm_interventions.first_token_removed) on the
    run's first `sequences` sequences: an intervention of several passes a draw, on 2 CPU cores."""
    return analysis(replace(run, inputs=run.inputs[:sequences]))


def constancy(states: torch.Tensor) -> float:
    """Mean over the rows of (N, d) of their cosine with the rows' mean: 1 when every row points one way."""
    return torch.nn.functional.cosine_similarity(states, states.mean(dim=0, keepdim=True), dim=1).mean().item()


@torch.no_grad()
def massive_ablation(run, layer: int, sequences: int = ABLATED) -> dict:
    """Sun et al. 2024 (§3): the loss over all predictions with `layer`'s massive activations set to
    zero and to their mean (analysis/lm_interventions.py), over the unchanged model's, on the run's
    first `sequences` sequences; 1 where the layer has none (nothing to set), with `entries` their count."""
    part = replace(run, inputs=run.inputs[:sequences])
    massive = find_massive(part, [layer])
    count = len(massive[layer].entries)
    if not count:
        return {"massive_zero": 1.0, "massive_mean": 1.0, "entries": 0, "layer": layer}
    table = lm_interventions(part, [layer], names=("massive_zero", "massive_mean"), massive=massive)
    loss = table[table["query_type"] == "all"].set_index("intervention")["loss"]
    return {name: float(loss[name] / loss["none"]) for name in ("massive_zero", "massive_mean")} | {
        "entries": count,
        "layer": layer,
    }
