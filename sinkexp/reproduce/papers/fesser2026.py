"""Fesser et al. 2026, "A unifying view of attention sinks: no-ops and broadcasts" (arXiv 2606.08105).

Conditional damping (the adaptive NOP; source: the NOP notebook, Kempner
toy/notebooks/noop_dynamics.ipynb): a one-head model learns to
leave undamped tokens alone by attending to a dedicated sink token whose value it shrinks; the
interaction matrix W_Q W_K^T grows one dominant direction. Global broadcast (source:
toy/global_pathway/common.py, whose `layer_diagnostics` define sink_match_seq): the layer-2 head routes every query to the hub j*, whose value is not
suppressed, and its update is rank one. Both tasks draw structure (v; u and R): every claim is
checked on two structure seeds x three model seeds. CPU sizes: batch 256, 500 damping steps (in
2000-step runs, seed 0, the nop sink attention was 0.983-0.986 at step 500 on three structure
draws) and 1000 broadcast steps (layer-2 hub routing 0.94-0.95 there; 0.91-0.92 at 500).

Section 5's mitigation (source: toy/global_pathway): a global pathway beside each attention
(`model.global_pathway=learned`), with and without the common-mode penalty on the attention write
(`train.common_mode_penalty=1`, the source's lambda_B); its base arm is the `broadcast` experiment,
whose runs start from the same weights and data. Section 6's NOP-side mitigations on damping: an
output gate (`attn=gated`) and a register (`model.n_registers=1`).
"""
from sinkexp.reproduce import (Claim, Experiment, Paper, at_least, at_most, between, final, intervention,
                               loss_ratio, payload_transfer)

DRAWS = {"seed": "0,1,2", "task.structure_seed": "0,1"}
GAMMA_0 = {"task.gamma": 0.0}
GLOBAL, PENALISED = ({"train.common_mode_penalty": 0.0}, {"train.common_mode_penalty": 1.0})

PAPER = Paper(
    name="fesser2026",
    title="Fesser et al. 2026, no-op and broadcast sinks (arXiv 2606.08105)",
    experiments=(
        Experiment("damping", ("task=damping",), {"task.gamma": "0.0,0.01,0.1,1.0", **DRAWS},
                   ("train.steps=500", "eval.every=100")),
        Experiment("broadcast", ("task=broadcast",), DRAWS, ("train.steps=1000", "eval.every=100")),
        Experiment("global_pathway", ("task=broadcast", "model.global_pathway=learned"),
                   {"train.common_mode_penalty": "0.0,1.0", **DRAWS}, ("train.steps=1000", "eval.every=100")),
        Experiment("damping_gated", ("task=damping", "task.gamma=0.0", "attn=gated"), DRAWS,
                   ("train.steps=500", "eval.every=100")),
        Experiment("damping_register", ("task=damping", "task.gamma=0.0", "model.n_registers=1"), DRAWS,
                   ("train.steps=500", "eval.every=100")),
    ),
    claims=(
        Claim("damping_solved", "The one-head model learns the damping task.", "NOP notebook",
              "MSE 0.0187 (reference 0.5)", "damping", GAMMA_0, loss_ratio("all"), at_most(0.1)),
        Claim("damping_nop_sink", "Queries that must not be updated attend to the sink token.",
              "NOP notebook", "0.993", "damping", GAMMA_0, final("sink_attn", 0, "nop"),
              at_least(0.9)),
        Claim("damping_active_no_sink", "Queries that must be damped do not attend to the sink.",
              "NOP notebook", "0.012", "damping", GAMMA_0, final("sink_attn", 0, "active"),
              at_most(0.1)),
        Claim("damping_silent_sink", "The sink's value is suppressed (NOP-like: <= 0.2).", "NOP notebook",
              "0.008", "damping", GAMMA_0, final("value_norm_ratio", 0), at_most(0.2)),
        Claim("damping_qk_spike", "W_Q W_K^T grows a dominant singular value (sigma1/sigma2 = 1.04 at init).",
              "NOP notebook", "dominant sigma1", "damping", GAMMA_0, final("qk_sigma1/sigma2", 0),
              at_least(3.0)),
        Claim("damping_sink_at_gamma_0.01", "A near-zero gamma still forms the sink.", "gamma sweep",
              "sink", "damping", {"task.gamma": 0.01}, final("sink_attn", 0, "nop"), at_least(0.9)),
        Claim("damping_no_sink_at_gamma_0.1", "gamma = 0.1 forms no sink.", "gamma sweep",
              "no sink", "damping", {"task.gamma": 0.1}, final("sink_attn", 0, "nop"), at_most(0.2)),
        Claim("damping_no_sink_at_gamma_1", "gamma = 1 (nothing to damp) forms no sink.", "gamma sweep",
              "no sink", "damping", {"task.gamma": 1.0}, final("sink_attn", 0, "nop"), at_most(0.2)),
        Claim("damping_zero_sink_value_is_a_noop", "Zeroing the sink's value (attention fixed) changes nothing.",
              "App. A.3, Table 2 (causal interventions)", "MSE 0.018669 vs 0.0187", "damping", GAMMA_0,
              intervention("zero_sink_value", 0), at_most(1.1)),
        Claim("damping_content_at_sink_breaks", "A donor's non-sink value put at the sink breaks the no-op.",
              "App. A.3, Table 2", "MSE 0.5001 (26.7x)", "damping", GAMMA_0,
              intervention("donor_value_at_sink", 0), at_least(10.0)),
        Claim("damping_redirect_breaks", "Taking the sink's attention away (rows renormalised) breaks it.",
              "App. A.3, Table 2", "MSE 0.1439 (7.7x)", "damping", GAMMA_0, intervention("redirect", 0),
              at_least(3.0)),
        Claim("broadcast_routes_to_hub", "Layer 2's most-attended key is the hub j* (per sequence).",
              "broadcast toy, App. A.1", "0.98", "broadcast", {},
              final("sink_match_seq", 1), at_least(0.9)),
        Claim("broadcast_attention_on_hub", "Layer 2 puts most of each query's attention on j*.", "broadcast toy, App. A.1",
              "0.97", "broadcast", {}, final("sink_attn", 1), at_least(0.8)),
        Claim("broadcast_loud_sink", "The hub's value is not suppressed (broadcast-like: ~1).", "broadcast toy, App. A.1",
              "1.04", "broadcast", {}, final("value_norm_ratio", 1), between(0.5, 2.0)),
        Claim("broadcast_rank_one", "Layer 2's update is rank one.", "broadcast toy, App. A.1", "~1",
              "broadcast", {}, final("stable_rank", 1), at_most(1.5)),
        Claim("broadcast_zero_hub_value_breaks", "Zeroing the hub's value in layer 2 breaks the task.",
              "App. A.4, Table 3", "MSE 3.073 vs 0.0481 (64x)", "broadcast", {},
              intervention("zero_sink_value", 1), at_least(10.0)),
        Claim("broadcast_zero_other_value_is_harmless", "Zeroing a random non-hub value in layer 2 does not.",
              "App. A.4, Table 3", "MSE 0.0487 vs 0.0481", "broadcast", {},
              intervention("zero_random_value", 1), at_most(1.2)),
        Claim("broadcast_donor_payload_arrives", "A donor's hub value in layer 2 delivers the donor's payload "
              "to every recipient.", "App. A.4, Table 3", "cosine 0.944", "broadcast", {},
              payload_transfer("cosine", 1), at_least(0.8)),
        Claim("broadcast_change_is_common", "That change is the same at every token (rank one).",
              "App. A.4, Table 3", "common energy 0.99995", "broadcast", {}, payload_transfer("common_energy", 1),
              at_least(0.99)),
        Claim("broadcast_redirect_breaks", "Taking layer 2's attention off the hub breaks the task.",
              "App. A.4, Table 3", "MSE 2.269 (47x)", "broadcast", {}, intervention("redirect", 1),
              at_least(5.0)),
        Claim("global_pathway_keeps_the_hub", "With a global pathway beside attention, layer 2 still sinks on the hub.",
              "Sec. 5, Fig. 7B (+ Global)", "max inflow 0.908 (base 0.906)", "global_pathway", GLOBAL,
              final("max_inflow", 1), at_least(0.8)),
        Claim("global_pathway_takes_layer_1", "... while layer 1's sink goes.", "Sec. 5 (toy/global_pathway README)",
              "max inflow 0.103 vs base 0.888 (-0.785)", "global_pathway", GLOBAL, final("max_inflow", 0),
              at_most(-0.5), against={"model.global_pathway": "none"}, against_in="broadcast",
              note="Paired with the attention-only run: the drop is the finding (the source's base sinks in layer 1 "
                   "by 30k steps; its own code at 1000 x 256 had not yet: 0.044, seed 0)."),
        Claim("penalty_removes_the_hub_sink", "With the common-mode penalty the broadcast sink goes from layer 2.",
              "Sec. 5, Fig. 7B (+ Global + Pen.)", "max inflow 0.057", "global_pathway", PENALISED,
              final("max_inflow", 1), at_most(0.2)),
        Claim("penalty_keeps_the_mse", "... at about the same task MSE as attention alone (within 20%).",
              "Sec. 5, Fig. 7B", "MSE 0.1441 vs 0.1397 (1.03x)", "global_pathway", PENALISED,
              loss_ratio("all"), at_most(1.2), against={"model.global_pathway": "none"}, against_in="broadcast",
              compare="ratio", note="Paired run for run (seed, structure seed) with the attention-only model."),
        Claim("gated_damping_solved", "With a head-wise output gate the one-head model still learns damping.",
              "Sec. 6: gating solves the NOP", "solved", "damping_gated", GAMMA_0, loss_ratio("all"), at_most(0.1)),
        Claim("gate_shuts_on_nop_queries", "The gate performs the no-op: it shuts on queries that must not move.",
              "Sec. 6: gating lets a head suppress its output", "gate ~0", "damping_gated", GAMMA_0,
              final("gate", 0, "nop"), at_most(0.2),
              note="The paper states the mechanism for ViTs; the toy check is sinkexp's."),
    ),
)
