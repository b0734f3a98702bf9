"""sinkexp on Hugging Face checkpoints (the optional `hf` extra: `pip install -e .[hf]`).

    families.py  where each supported model type keeps its layers, its attention and W_Q, W_K, W_O
    capture.py   a forward pass of a transformers causal LM with sinkexp's capture points, layer by layer
    sources.py   MODEL (a folder or a hub id at a revision) to a checked local folder; a text to N x T token ids
    measure.py   the measurement: sinkexp's own evaluator (evaluate/evaluator.py) on those taps, in chunks
    command.py   `sinkexp measure`: its settings, the sweep plan, run directories, the printed table
    export.py    `sinkexp export RUN_DIR`: a finished model=llama run as a LlamaForCausalLM folder

Nothing outside this package imports transformers; cli.py imports it only for `measure` and `export`,
after `require_transformers` (docs/measure.md).
"""

import importlib

from sinkexp.errors import ConfigError


def require_transformers() -> None:
    """ConfigError naming the extra to install when transformers cannot be imported."""
    try:
        importlib.import_module("transformers")
    except ImportError:
        raise ConfigError(
            "transformers is not installed; `sinkexp measure` and `sinkexp export` need the hf "
            "extra: pip install -e .[hf]"
        ) from None
