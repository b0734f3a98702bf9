"""sinkexp: reproduce and extend the synthetic experiments of the attention-sink literature.

`sinkexp.load_run(DIR)` loads a run directory back (config, task, model, held-out batch, tables);
see sinkexp/analysis/load.py. It is imported on first use, so that `sinkexp --version` stays instant.
"""

__version__ = "0.1.0"
__all__ = ["LoadedRun", "load_run"]


def __getattr__(name: str):
    if name in __all__:
        from sinkexp.analysis import load  # lazy: imports torch; `sinkexp --version` stays instant

        return getattr(load, name)
    raise AttributeError(f"module 'sinkexp' has no attribute {name!r}")
