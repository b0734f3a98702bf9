"""The transformer, its attention normalisers and its named capture points.

AXES maps each config key that chooses a model part to its registry (a literal dict); config
validation checks names against these dicts directly.
"""

from sinkexp.model.attention import GATES, NORMALISERS, SLOTS
from sinkexp.model.capture import capture, intervene, tap_names
from sinkexp.model.parts import MLPS, NORMS, PLACEMENTS, POSITION_TARGETS, POSITIONS, PROJECTIONS
from sinkexp.model.pathway import GLOBAL_PATHWAYS
from sinkexp.model.transformer import Transformer

AXES = {
    "attn.normaliser": NORMALISERS,
    "attn.slot": SLOTS,
    "attn.gate": GATES,
    "model.norm": PLACEMENTS,
    "model.norm_type": NORMS,
    "model.mlp": MLPS,
    "model.pos": POSITIONS,
    "model.pos_into": POSITION_TARGETS,
    "model.embed": PROJECTIONS,
    "model.readout": PROJECTIONS,
    "model.attn_out": PROJECTIONS,
    "model.global_pathway": GLOBAL_PATHWAYS,
}

__all__ = ["AXES", "NORMALISERS", "Transformer", "capture", "intervene", "tap_names"]
