"""What a measured run says of its weights where they came from a GGUF file: 4-bit (or whatever the
file's types are) and dequantized to float32 (docs/measure.md, "The quantization"). One wording, read
by measure's printed table and verdict lines (hf/gguf.py), `sinkexp intervene` and `sinkexp report`
(its console and the real-model figures' titles), from the run's config.yaml (`measured.gguf`).
Nothing here imports torch or transformers: report reads it.
"""

from __future__ import annotations

import re


def bits(kind: str) -> int:
    """A GGUF type's nominal bits per weight: Q4_K_M, IQ4_XS, MXFP4 -> 4; F16 -> 16 (the blocks'
    scales come on top: Q4_1 stores 5 bits a weight in all)."""
    found = re.search(r"(?:Q|FP)(\d)", kind) or re.fullmatch(r"B?F(\d+)", kind)
    return int(found.group(1)) if found else 32


FILE_TYPE = "measured.gguf.quantization.file_type"  # its key among a run's flat settings (rundir/reading.py)


def short(kind: str) -> str:
    """A file type in words, for a verdict line or a title: '4-bit Q4_1 weights, dequantized'."""
    return f"{bits(kind)}-bit {kind} weights, dequantized"


def said(quantization: dict, short_form: bool = False) -> str:
    """The weights in words, from {file_type, tensor_types} (short_form: `short`)."""
    kind = quantization["file_type"]
    if short_form:
        return short(kind)
    counts = ", ".join(f"{n} {name}" for name, n in quantization["tensor_types"].items())
    return f"{bits(kind)}-bit GGUF weights ({kind}; tensors: {counts}), dequantized to float32"


def of_run(config) -> dict | None:
    """A run's config.yaml (a mapping): the quantization of the GGUF its model came from, else None
    (a trained run, or a measured folder or hub checkpoint of unquantized weights)."""
    measured = config.get("measured") if hasattr(config, "get") else None
    record = (measured or {}).get("gguf") or {}
    return record.get("quantization")
