"""task=lm (sinkexp/tasks/lm.py): windows of a packed byte stream, a fixed held-out split, BOS
options, the bigram reference, and the corpus content in the config hash."""

import math

import pytest
import torch

from sinkexp.errors import ConfigError
from sinkexp.tasks.lm import BOS, HELD_OUT_EVERY, LMConfig, LMTask

DOCS = [f"doc {i}: " + "abcab" * (i % 3 + 1) for i in range(2 * HELD_OUT_EVERY)]  # 40 documents


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("\n\n".join(DOCS) + "\n")
    return str(path)


def text_of(row: torch.Tensor) -> bytes:
    return bytes(row[row != BOS].tolist())


@pytest.mark.parametrize("bos", [True, False])
def test_sequences_are_windows_of_the_training_documents_shifted_by_one(corpus, bos):
    task = LMTask(LMConfig(corpus=corpus, seq_len=12, bos=bos))
    batch = task.sample(64, torch.Generator().manual_seed(0), "cpu")
    assert batch.inputs.shape == batch.targets.shape == (64, 12)
    assert torch.equal(batch.inputs[:, 1:], batch.targets[:, :-1])  # next-token targets
    assert (batch.inputs[:, 0] == BOS).all() if bos else (batch.inputs != BOS).all()
    assert (batch.targets != BOS).all() and (batch.sink == 0).all() and batch.loss_mask.all()
    assert (batch.query_type[:, 0] == -1).all() and (batch.query_type[:, 1:] == 0).all()
    train = "\n\n".join(doc for i, doc in enumerate(DOCS) if i % HELD_OUT_EVERY != HELD_OUT_EVERY - 1).encode()
    for inputs, targets in zip(batch.inputs, batch.targets):
        window = text_of(torch.cat([inputs, targets[-1:]]))
        assert len(window) == 13 - bos and window in train


def test_the_held_out_split_is_every_twentieth_document_and_only_it_is_evaluated(corpus):
    task = LMTask(LMConfig(corpus=corpus, seq_len=6, bos=False))
    held_out = "\n\n".join(DOCS[HELD_OUT_EVERY - 1 :: HELD_OUT_EVERY]).encode()
    assert bytes(task.streams["held_out"].tolist()) == held_out  # documents 19 and 39
    batch = task.sample_held_out(200, torch.Generator().manual_seed(1), "cpu")
    assert all(text_of(torch.cat([i, t[-1:]])) in held_out for i, t in zip(batch.inputs, batch.targets))
    assert not any(
        doc.encode() in bytes(task.streams["train"].tolist()) for doc in DOCS[HELD_OUT_EVERY - 1 :: HELD_OUT_EVERY]
    )


def test_doc_bos_puts_a_bos_before_every_document_instead_of_the_blank_line(corpus):
    task = LMTask(LMConfig(corpus=corpus, seq_len=6, doc_bos=True))
    stream = task.streams["train"]
    starts = (stream == BOS).nonzero().flatten().tolist()
    assert len(starts) == len(DOCS) - 2 and starts[0] == 0
    assert bytes(stream[1 : starts[1]].tolist()) == DOCS[0].encode()  # no "\n\n" left between
    assert b"\n\n" not in bytes(stream[stream != BOS].tolist())


def test_the_reference_is_the_training_bigram_model_with_add_one_counts(tmp_path):
    path = tmp_path / "ab.txt"  # training stream: "ab" documents joined by "\n\n"
    path.write_text("\n\n".join(["ab"] * HELD_OUT_EVERY))
    task = LMTask(LMConfig(corpus=str(path), seq_len=3, bos=True))
    train = bytes(task.streams["train"].tolist())
    assert train == b"\n\n".join([b"ab"] * (HELD_OUT_EVERY - 1))
    pairs = {pair: sum(train[i : i + 2] == pair for i in range(len(train) - 1)) for pair in (b"ab", b"b\n", b"aa")}
    from_a = train[:-1].count(b"a")
    inputs = torch.tensor([[BOS, ord("a"), ord("a")]])
    targets = torch.tensor([[ord("a"), ord("b"), ord("a")]])
    from sinkexp.tasks.base import Batch

    batch = Batch(
        inputs,
        targets,
        torch.ones(1, 3, dtype=torch.bool),
        torch.zeros(1, 3, dtype=torch.long),
        torch.zeros(1, dtype=torch.long),
    )
    loss = task.baseline_loss(batch)[0]
    unigram_a = (train.count(b"a") + 1) / (len(train) + 257)
    assert math.isclose(loss[0].item(), -math.log(unigram_a), rel_tol=1e-5)  # after the leading BOS
    assert math.isclose(loss[1].item(), -math.log((pairs[b"ab"] + 1) / (from_a + 257)), rel_tol=1e-5)
    assert math.isclose(loss[2].item(), -math.log((pairs[b"aa"] + 1) / (from_a + 257)), rel_tol=1e-5)


@pytest.mark.parametrize("text,needle", [("one\n\ntwo\n", "2 documents"), (None, "cannot be read")])
def test_an_unusable_corpus_is_refused_with_one_line(tmp_path, text, needle):
    path = tmp_path / "small.txt"
    if text is not None:
        path.write_text(text)
    with pytest.raises(ConfigError, match=needle) as err:
        LMTask.validate(LMConfig(corpus=str(path)))
    assert "task.corpus=" in str(err.value) and "\n" not in str(err.value)


def test_a_window_longer_than_a_split_is_refused(corpus):
    with pytest.raises(ConfigError, match="task.seq_len=100 is longer than the held_out split"):
        LMTask.validate(LMConfig(corpus=corpus, seq_len=100))


def test_the_corpus_content_names_the_run(make_config, corpus):
    from pathlib import Path

    from sinkexp.config.identity import config_hash

    before = config_hash(make_config("task=lm", f"task.corpus={corpus}", "task.seq_len=8"))
    Path(corpus).write_text(Path(corpus).read_text().replace("abc", "abd"))
    assert config_hash(make_config("task=lm", f"task.corpus={corpus}", "task.seq_len=8")) != before
    assert config_hash(make_config("task=lm")) != before  # the built-in corpus


def test_the_built_in_corpus_is_the_king_james_version():
    import hashlib
    import lzma
    from importlib.resources import files

    raw = lzma.decompress(files("sinkexp").joinpath("data", "kjv.txt.xz").read_bytes())
    assert hashlib.sha256(raw).hexdigest() == "247dee2b63b7f3f48b5792010ea35365a444b74257d6d7b9251f087144ed3964"
    task = LMTask(LMConfig())
    assert len(raw) > 4_000_000 and raw.startswith(b"Genesis 1\nIn the beginning God created")
    assert len(task.streams["held_out"]) > 200_000
