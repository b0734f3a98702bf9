"""sinkexp: reproduce and extend the synthetic experiments of the attention-sink literature."""
__version__ = "0.1.0"
