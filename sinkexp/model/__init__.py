"""The transformer, its attention normalisers and its named capture points."""
from sinkexp.model.attention import NORMALISERS
from sinkexp.model.capture import capture, tap_names
from sinkexp.model.transformer import Transformer

__all__ = ["NORMALISERS", "Transformer", "capture", "tap_names"]
