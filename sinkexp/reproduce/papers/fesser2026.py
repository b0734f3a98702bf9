"""Fesser et al. 2026, "A Unifying View of Attention Sinks: From Mechanisms to Architectural Interventions"
(arXiv 2606.08105; the title of the source repository's README, KempnerInstitute/attention_sink at a83cd59).

Conditional damping (the adaptive NOP; source: the NOP notebooks, Kempner toy/notebooks/): a
one-head model learns to leave undamped tokens alone by attending to a sink token whose value it
shrinks; the interaction matrix W_Q W_K^T grows one dominant direction. The causal-intervention
claims run in noop_causal_intervention.ipynb's form (`task=damping`: a dedicated zero sink token,
the block output x + W_O A V supervised; the notebooks' README ties it to App. A.3, and describes
Eqs. 6-7 differently, as supervising the attention branch against (1-m)X + m gamma X); the gamma
sweep (Fig. 11B) and the damping-frequency sweep (Fig. 11A) in noop_dynamics.ipynb's form
(`task=damping_dynamics`: token 0 an ordinary token, residual on LN(x + pos + bos)), whose stored
outputs are the figures' source. In the causal notebook's form gamma only scales the damped
update, so gamma = 0.1 needs the no-op as gamma = 0 does: that sweep is sinkexp's extension (under
Eqs. 6-7 as the README reads them no token would need a no-op at gamma = 0.1). The dynamics form's
CPU size (batch 256, 1000 steps, sinkexp's) is far below the source's (batch 2048, 30k steps):
docs/findings/fesser2026.md shows where the sink forms; `scale=reach` runs it where it does.

Global broadcast (source: toy/global_pathway/common.py, whose `layer_diagnostics` define the
per-sequence hub match, `sink_match` there and `sink_match_seq` here): the layer-2 head routes every
query to the hub j*, whose value is not suppressed, and its update is rank one. Both tasks draw
structure (v; u and R): every claim is checked on two structure seeds x three model seeds. CPU
sizes: batch 256, 500 damping steps (in 2000-step runs, seed 0, the nop sink attention was
0.983-0.986 at step 500 on three structure draws) and 1000 broadcast steps (layer-2 hub routing
0.94-0.95 there; 0.91-0.92 at 500).

Section 5's mitigation (source: toy/global_pathway): a global pathway beside each attention
(`model.global_pathway=learned`), with and without the common-mode penalty on the attention write
(`train.common_mode_penalty=1`, the source's lambda_B); its base arm is the `broadcast` experiment,
whose runs start from the same weights and data. On damping, sinkexp's toy checks of two
architectural interventions the paper studies in ViTs (the README's abstract: gating eliminates
NOP-like sinks, registers relocate rather than remove sink computation): an output gate
(`attn=gated`) and a register (`model.n_registers=1`).

Claims that a phenomenon forms (a solved task, a sink, a dominant singular value, a hub) are not
reached where it does not form at the size run; the claims about the sink's properties and the
interventions on it require it (docs/reproduce.md, "The verdict").
"""
from sinkexp.reproduce.declare import Experiment, Paired, Paper, Value, at_least, at_most, between
from sinkexp.reproduce.measures import final, intervention, loss_ratio, payload_transfer, pooled_peak

DRAWS = {"seed": (0, 1, 2), "task.structure_seed": (0, 1)}
GAMMA_0 = {"task.gamma": 0.0}
GLOBAL, PENALISED = ({"train.common_mode_penalty": 0.0}, {"train.common_mode_penalty": 1.0})
DAMPING_CPU = {"train.steps": 500, "eval.every": 100}
DYNAMICS_CPU = {"train.steps": 1000, "eval.every": 250}
BROADCAST_CPU = {"train.steps": 1000, "eval.every": 100}
# scale=reach (sinkexp's; docs/findings/fesser2026.md, "Reach"): the qk spike's top-two ratio is >= 6.85 on
# all six draws at 1000 steps (2.34 at 500); the dynamics form leaves its plateau at batch 1024 after
# 6.5k-9k steps (s0/t0 in both codes), so 12k steps on one structure draw x three seeds (~27 min a run)
DAMPING_REACH = {"train.steps": 1000}
DYNAMICS_REACH = {"train.batch_size": 1024, "train.steps": 12000, "eval.every": 500, "task.structure_seed": (0,)}
# the source's own code (toy/global_pathway, attention only) at batch 256 forms the layer-1 sink (max inflow
# >= 0.5) between 8k and 10k steps on seeds 0-2 (0.85, 0.80, 0.69 at 15-16k; batch 1024: 0.18 at 3.5k steps),
# so 15k steps on one structure draw x three seeds (~18 min a run; docs/findings/fesser2026.md, "Reach")
BROADCAST_REACH = {"train.steps": 15000, "eval.every": 1000, "task.structure_seed": (0,)}
NOP_SINK = final("sink_attn", 0, "nop")
PEAK = pooled_peak(0)      # the dynamics notebook's sink score: the most-attended position, pooled over queries


DAMPING = {"experiment": "damping", "where": GAMMA_0}     # the gamma = 0 runs of the damping experiment
CAUSAL = "noop_causal_intervention.ipynb"
GAMMA_SWEEP = {"experiment": "dynamics_gamma", "source": "noop_dynamics.ipynb (Fig. 11B: cell 9)", "measure": PEAK}
BROADCAST = {"experiment": "broadcast"}
BROADCAST_SOURCE = "App. A.4 (broadcast_causal_intervention.ipynb)"


PAPER = Paper(
    name="fesser2026",
    title="Fesser et al. 2026, no-op and broadcast sinks (arXiv 2606.08105)",
    experiments=(
        Experiment(name="damping", overrides={"task": "damping"},
                   grid={"task.gamma": (0.0, 0.1), **DRAWS}, cpu=DAMPING_CPU, reach=DAMPING_REACH),
        Experiment(name="dynamics_gamma", overrides={"task": "damping_dynamics"},
                   grid={"task.gamma": (0.0, 0.01, 0.1, 1.0), **DRAWS}, cpu=DYNAMICS_CPU, reach=DYNAMICS_REACH),
        Experiment(name="dynamics_rare_damping", overrides={"task": "damping_dynamics", "task.p": 0.1},
                   grid=DRAWS, cpu=DYNAMICS_CPU, reach=DYNAMICS_REACH),
        Experiment(name="broadcast", overrides={"task": "broadcast"}, grid=DRAWS, cpu=BROADCAST_CPU,
                   reach=BROADCAST_REACH),
        Experiment(name="global_pathway", overrides={"task": "broadcast", "model.global_pathway": "learned"},
                   grid={"train.common_mode_penalty": (0.0, 1.0), **DRAWS}, cpu=BROADCAST_CPU, reach=BROADCAST_REACH),
        Experiment(name="damping_gated", overrides={"task": "damping", "task.gamma": 0.0, "attn": "gated"},
                   grid=DRAWS, cpu=DAMPING_CPU),
        Experiment(name="damping_register", overrides={"task": "damping", "task.gamma": 0.0, "model.n_registers": 1},
                   grid=DRAWS, cpu=DAMPING_CPU),
    ),
    claims=(
        Value(**DAMPING, name="damping_solved", kind="paper", statement="The one-head model learns the damping task.",
              source=CAUSAL, paper_value="MSE 0.0187 (the identity predictor's: 0.5, sinkexp's closed form)",
              measure=loss_ratio("all"),
              criterion=at_most(0.1), forms=True),
        Value(**DAMPING, name="damping_nop_sink", kind="paper",
              statement="Queries that must not be updated attend to the sink token.", source=CAUSAL,
              paper_value="0.993", measure=NOP_SINK, criterion=at_least(0.9), requires="damping_solved",
              route="noop_sink_token"),
        Value(**DAMPING, name="damping_active_no_sink", kind="paper",
              statement="Queries that must be damped do not attend to the sink.", source=CAUSAL,
              paper_value="0.012", measure=final("sink_attn", 0, "active"), criterion=at_most(0.1),
              requires="damping_solved", contrast="damping_nop_sink"),
        Value(**DAMPING, name="damping_silent_sink", kind="paper",
              statement="The sink's value is suppressed (NOP-like: <= 0.2).",
              source=CAUSAL, paper_value="0.008", measure=final("value_norm_ratio", 0),
              criterion=at_most(0.2, by="source"), requires="damping_nop_sink",
              note="The bound is the paper's NOP signature (a value norm below 0.2x the baseline; the summary's "
                   "ViT analysis, 'dual regimes')."),
        Value(**DAMPING, name="damping_qk_spike", kind="paper",
              statement="W_Q W_K^T grows a dominant singular value (untrained, sigma1/sigma2 is ~1.05 here).",
              source="Fig. 2B (noop_dynamics.ipynb cell 16, in the dynamics form and on W_Q^T W_K)",
              paper_value="dominant sigma1", measure=final("qk_sigma1/sigma2", 0), criterion=at_least(3.0),
              forms=True, requires="damping_nop_sink",
              note="Asked of the causal notebook's form, which computes no spectrum; the threshold 3 is sinkexp's."),
        Value(**GAMMA_SWEEP, where=GAMMA_0, name="dynamics_sink_at_gamma_0", kind="paper",
              statement="In the dynamics notebook's form, gamma = 0 forms a sink.",
              paper_value="0.514 on position 0 at 10k steps (cell 3's stored print, batch 1024)",
              criterion=at_least(0.3), forms=True, route="noop_position_0",
              note="Half the tokens are no-ops at p = 0.5: a full sink takes ~0.5 of all queries' attention; "
                   "uniform attention is 1/32; the threshold 0.3 is sinkexp's."),
        Value(**GAMMA_SWEEP, where={"task.gamma": 0.01}, name="dynamics_sink_at_gamma_0.01", kind="paper",
              statement="A near-zero gamma still forms the sink.", paper_value="sink", criterion=at_least(0.3),
              forms=True, reached="dynamics_sink_at_gamma_0", route="noop_position_0"),
        Value(**GAMMA_SWEEP, where={"task.gamma": 0.1}, name="dynamics_no_sink_at_gamma_0.1", kind="paper",
              statement="gamma = 0.1 forms no sink.", paper_value="no sink (uniform 1/32)", criterion=at_most(0.1),
              requires="dynamics_sink_at_gamma_0", contrast="dynamics_sink_at_gamma_0"),
        Value(**GAMMA_SWEEP, where={"task.gamma": 1.0}, name="dynamics_no_sink_at_gamma_1", kind="control",
              statement="gamma = 1 (nothing to damp) forms no sink.", paper_value="no sink (uniform)",
              criterion=at_most(0.1), requires="dynamics_sink_at_gamma_0", contrast="dynamics_sink_at_gamma_0"),
        Value(experiment="dynamics_rare_damping", name="dynamics_no_sink_with_rare_damping", kind="paper",
              statement="With damped tokens rare (p = 0.1) attention stays uniform.",
              source="noop_dynamics.ipynb (Fig. 11A); the notebooks' README: uniform through 20k steps",
              paper_value="uniform (1/32)", measure=PEAK, criterion=at_most(0.1),
              requires="dynamics_sink_at_gamma_0", contrast="dynamics_sink_at_gamma_0"),
        Value(experiment="damping", where={"task.gamma": 0.1}, name="causal_form_sinks_at_gamma_0.1",
              kind="extension", statement="In the causal notebook's form gamma = 0.1 forms the sink as gamma = 0 does.",
              source="sinkexp: the undamped tokens still need the no-op", paper_value="-", measure=NOP_SINK,
              criterion=at_least(0.9), forms=True, reached="damping_nop_sink", route="noop_sink_token"),
        Value(**DAMPING, name="damping_content_at_sink_breaks", kind="paper",
              statement="A donor's non-sink value put at the sink breaks the no-op.",
              source="App. A.3, Table 2", paper_value="MSE 0.5001 (26.7x)",
              measure=intervention("donor_value_at_sink", 0), criterion=at_least(10.0), requires="damping_nop_sink"),
        Value(**DAMPING, name="damping_redirect_breaks", kind="paper",
              statement="Taking the sink's attention away (rows renormalised) breaks it.",
              source="App. A.3, Table 2", paper_value="MSE 0.1439 (7.7x)",
              measure=intervention("redirect", 0), criterion=at_least(3.0), requires="damping_nop_sink"),
        Value(**DAMPING, name="damping_zero_sink_value_is_a_noop", kind="paper",
              statement="Zeroing the sink's value (attention fixed) changes nothing.",
              source="App. A.3, Table 2 (causal interventions)", paper_value="MSE 0.018669 vs 0.0187",
              measure=intervention("zero_sink_value", 0), criterion=at_most(1.1), requires="damping_nop_sink",
              contrast="damping_content_at_sink_breaks"),
        Value(**BROADCAST, name="broadcast_solved", kind="paper",
              statement="The two-layer model learns the broadcast task (MSE <= 0.2 of the identity predictor's).",
              source=BROADCAST_SOURCE, paper_value="MSE 0.048 (one seed, App. A.4's notebook) to 0.14 (5 seeds, "
                                                     "Sec. 5: toy/global_pathway README)",
              measure=loss_ratio("all"), criterion=at_most(0.2), forms=True,
              note="The threshold 0.2 is sinkexp's; the identity predictor's MSE is ~1."),
        Value(**BROADCAST, name="broadcast_routes_to_hub", kind="paper",
              statement="Layer 2's most-attended key is the hub j* (per sequence).",
              source=BROADCAST_SOURCE, paper_value="0.978", measure=final("sink_match_seq", 1),
              criterion=at_least(0.9), forms=True, route="hub"),
        Value(**BROADCAST, name="broadcast_attention_on_hub", kind="paper",
              statement="Layer 2 puts most of each query's attention on j*.",
              source=BROADCAST_SOURCE, paper_value="0.967", measure=final("sink_attn", 1),
              criterion=at_least(0.8), forms=True, reached="broadcast_routes_to_hub", route="hub"),
        Value(**BROADCAST, name="broadcast_loud_sink", kind="paper",
              statement="The hub's value is not suppressed (broadcast-like: ~1).",
              source=BROADCAST_SOURCE, paper_value="1.04", measure=final("value_norm_ratio", 1),
              criterion=between(0.5, 2.0), requires="broadcast_routes_to_hub",
              note="It cannot fail on these runs: untrained, the hub's value is as loud as any key's (~1.0), and "
                   "no claim on broadcast runs reads value norms. The NOP sink's value, by contrast, is suppressed "
                   "on damping (damping_silent_sink). The band [0.5, 2] is sinkexp's."),
        Value(**BROADCAST, name="broadcast_rank_one", kind="paper", statement="Layer 2's update is rank one.",
              source="Sec. 3, Fig. 3 (update rank; no stored number)", paper_value="rank one",
              measure=final("stable_rank", 1), criterion=at_most(1.05), requires="broadcast_routes_to_hub",
              note="Rank one is a stable rank of 1; the tolerance 1.05 is sinkexp's. Untrained the update is "
                   "nearly rank one too (1.12-1.14: near-uniform attention writes almost the same vector at every "
                   "query), so a bound of 1.5 could not fail."),
        Value(**BROADCAST, name="broadcast_zero_hub_value_breaks", kind="paper",
              statement="Zeroing the hub's value in layer 2 breaks the task.", source="App. A.4, Table 3",
              paper_value="MSE 3.073 vs 0.0481 (64x)", measure=intervention("zero_sink_value", 1),
              criterion=at_least(10.0), requires="broadcast_routes_to_hub"),
        Value(**BROADCAST, name="broadcast_zero_other_value_is_harmless", kind="paper",
              statement="Zeroing a random non-hub value in layer 2 does not.", source="App. A.4, Table 3",
              paper_value="MSE 0.0487 vs 0.0481", measure=intervention("zero_random_value", 1),
              criterion=at_most(1.2), requires="broadcast_routes_to_hub", contrast="broadcast_zero_hub_value_breaks"),
        Value(**BROADCAST, name="broadcast_donor_payload_arrives", kind="paper",
              statement="A donor's hub value in layer 2 delivers the donor's payload to every recipient.",
              source="App. A.4, Table 3", paper_value="cosine 0.944", measure=payload_transfer("cosine", 1),
              criterion=at_least(0.8), requires="broadcast_routes_to_hub"),
        Value(**BROADCAST, name="broadcast_change_is_common", kind="paper",
              statement="That change is the same at every token (rank one).", source="App. A.4, Table 3",
              paper_value="common energy 0.99995", measure=payload_transfer("common_energy", 1),
              criterion=at_least(0.99), requires="broadcast_routes_to_hub"),
        Value(**BROADCAST, name="broadcast_redirect_breaks", kind="paper",
              statement="Taking layer 2's attention off the hub breaks the task.", source="App. A.4, Table 3",
              paper_value="MSE 2.269 (47x)", measure=intervention("redirect", 1), criterion=at_least(5.0),
              requires="broadcast_routes_to_hub"),
        Value(**BROADCAST, name="broadcast_layer_1_sinks", kind="paper",
              statement="Attention alone, layer 1 also sinks (a key draws most attention).",
              source="Sec. 5 (toy/global_pathway README, the attention-only base)", paper_value="max inflow 0.888",
              measure=final("max_inflow", 0), criterion=at_least(0.5), forms=True,
              note="The threshold 0.5 is sinkexp's. The source's base sinks in layer 1 by 30k steps x batch 1024; "
                   "its own code at 1000 x 256 had not yet (0.044, seed 0), at 15000 x 256 had on seeds 0-2."),
        Value(name="global_pathway_keeps_the_hub", kind="paper",
              statement="With a global pathway beside attention, layer 2 still sinks on the hub.",
              source="Sec. 5, Fig. 7B (+ Global)", paper_value="max inflow 0.908 (base 0.906)",
              experiment="global_pathway", where=GLOBAL, measure=final("max_inflow", 1), criterion=at_least(0.8),
              forms=True, reached="broadcast_routes_to_hub", route="hub"),
        Paired(name="global_pathway_takes_layer_1", kind="paper", statement="... while layer 1's sink goes.",
               source="Sec. 5 (toy/global_pathway README)", paper_value="max inflow 0.103 vs base 0.888 (-0.785)",
               experiment="global_pathway", where=GLOBAL, measure=final("max_inflow", 0), criterion=at_most(-0.5),
               against={"model.global_pathway": "none"}, against_in="broadcast", requires="broadcast_layer_1_sinks",
               note="Paired with the attention-only run of the same draw: the drop is the finding."),
        Value(name="penalty_removes_the_hub_sink", kind="paper",
              statement="With the common-mode penalty the broadcast sink goes from layer 2.",
              source="Sec. 5, Fig. 7B (+ Global + Pen.)", paper_value="max inflow 0.057", experiment="global_pathway",
              where=PENALISED, measure=final("max_inflow", 1), criterion=at_most(0.2),
              requires="global_pathway_keeps_the_hub", contrast="global_pathway_keeps_the_hub"),
        Paired(name="penalty_keeps_the_mse", kind="paper",
               statement="... at about the same task MSE as attention alone (no further from it than the "
                         "attention-only runs are from one another).",
               source="Sec. 5, Fig. 7B", paper_value="MSE 0.1441 vs 0.1397 (1.03x; 30k steps x batch 1024)",
               experiment="global_pathway", where=PENALISED, measure=loss_ratio("all"), criterion=at_most(1.0),
               against={"model.global_pathway": "none"}, against_in="broadcast", compare="ratio over spread",
               requires=("broadcast_solved", "penalty_removes_the_hub_sink"), contrast="broadcast_solved",
               note="Paired run for run (seed, structure seed) with the attention-only model, the ratio over the "
                    "attention-only runs' own max / min: the paper's 1.03x is read at 30k steps x batch 1024, so no "
                    "magnitude of it is applied here (docs/reproduce.md, 'Thresholds'); at 1000 x 256 the source's "
                    "own code gives 1.14, 1.32, 1.18. Untrained both are alike, so it counts only beside a base "
                    "that learned the task."),
        Value(experiment="damping_gated", where=GAMMA_0, name="gated_damping_solved", kind="extension",
              statement="With a head-wise output gate the one-head model still learns damping.",
              source="README abstract: gating eliminates NOP-like sinks (in ViTs)", paper_value="-",
              measure=loss_ratio("all"),
              criterion=at_most(0.1), forms=True),
        Value(experiment="damping_gated", where=GAMMA_0, name="gate_shuts_on_nop_queries", kind="extension",
              statement="The gate performs the no-op: it shuts on queries that must not move.",
              source="README abstract: gating eliminates NOP-like sinks (in ViTs)", paper_value="-",
              measure=final("gate", 0, "nop"), criterion=at_most(0.2), requires="gated_damping_solved",
              note="The paper states the mechanism for ViTs; the toy check is sinkexp's."),
    ),
)
