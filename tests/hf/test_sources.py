"""What `sinkexp measure` cuts from a text (hf/sources.py): consecutive windows from the text's
start, or from its token `skip` on, the BOS prefix before each."""

import pytest
import torch
from hf_models import tiny

from sinkexp.errors import ConfigError
from sinkexp.hf import sources

pytest.importorskip("transformers")


def test_skip_starts_the_windows_that_many_tokens_into_the_text(tmp_path):
    folder = tiny("llama", tmp_path / "llama")  # byte tokenizer, BOS (256) in front of every text
    tokenizer, config = sources.load_tokenizer(folder, "m"), None
    whole = sources.sequences(tokenizer, config, "kjv", n=6, seq_len=9, bos="auto")
    later = sources.sequences(tokenizer, config, "kjv", n=3, seq_len=9, bos="auto", skip=3 * 8)
    assert (later[:, 0] == 256).all()  # the prefix stays first
    assert torch.equal(later, whole[3:])  # three windows of 8 bytes skipped
    text = sources.read_text("kjv").encode()
    assert bytes(later[:, 1:].flatten().tolist()) == text[24:48]
    with pytest.raises(ConfigError, match="after skip=.*choose a smaller n, seq_len or skip"):
        sources.sequences(tokenizer, config, "kjv", n=2, seq_len=9, bos="auto", skip=len(text))


def test_the_built_in_texts_are_the_bytes_their_build_script_names():
    """The samples beside the KJV (scripts/build_texts.py): CPython 3.11.7's argparse.py to the byte,
    with the PSF licence its distribution requires, and sinkexp's own docs and code."""
    import hashlib
    from importlib.resources import files

    from sinkexp.tasks.base import BUILT_IN

    argparse = sources.read_text("argparse").encode()
    assert hashlib.sha256(argparse).hexdigest().startswith("dc1eba8adfdf6159")
    licence = files("sinkexp").joinpath("data", "argparse.LICENSE.txt").read_text()
    assert "PYTHON SOFTWARE FOUNDATION LICENSE VERSION 2" in licence
    assert sources.read_text("sinkexp-docs").startswith("# sinkexp")
    assert "class Transformer" in sources.read_text("sinkexp-code")
    assert all(len(sources.read_text(name)) > 90_000 for name in BUILT_IN)  # 3 windows of 100 x 64 tokens
