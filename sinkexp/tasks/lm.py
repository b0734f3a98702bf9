"""Next-byte prediction on natural text: the language-model setting of Sun et al. 2026, Barbero et
al. 2025 and Gu et al. 2025, at laptop sizes (docs/tasks.md, "task=lm").

The corpus is a text file read as bytes (no tokenizer): `task.corpus=kjv` is the built-in one, the
King James Version as 1189 chapters (sinkexp/data/kjv.txt.xz, built by scripts/build_kjv_corpus.py);
`task.corpus=PATH` reads any text file (.xz and .gz are decompressed). Documents are separated by a
blank line ("\\n\\n"). Every 20th document (index 19, 39, ...) is held out; training windows come
from the rest, the evaluation batch from the held-out documents only.

The token ids are the 256 byte values and BOS = 256 (vocabulary 257 whatever the options, so that
models with and without BOS have the same size). Documents are packed into one stream, joined by
their blank line, or, with `task.doc_bos`, each preceded by BOS instead (as LLaMA-style packing
marks document starts). A sequence is a window of that stream at a uniform random offset:

    task.bos=true    BOS, then seq_len - 1 bytes      position 0 is BOS (Barbero's and Gu's default)
    task.bos=false   seq_len bytes                    position 0 is whatever byte the window starts on

Either way position 0 is the sink position the metrics read (`Batch.sink` = 0): without BOS it
is the first token, where Barbero et al. and Guo et al. find the sink moves. Every position
predicts the next byte and counts in the loss; position 0 is not a query (it can only attend to
itself). The reference predictor is the bigram model of the training stream (add-one counts;
after the leading BOS of `task.bos`, the unigram), so `loss - baseline` says how far the model
is beyond bigram statistics.
"""

from __future__ import annotations

import functools
import gzip
import lzma
from dataclasses import dataclass

from sinkexp.errors import ConfigError
from sinkexp.tasks.base import Batch, Dims, data_path, read_data_file
from sinkexp.tasks.lazy import torch

BOS = 256
VOCAB = 257
HELD_OUT_EVERY = 20  # documents 19, 39, ... are held out
SEPARATOR = b"\n\n"


@dataclass
class LMConfig:
    name: str = "lm"
    corpus: str = "kjv"  # the built-in corpus (kjv: tasks/base.py BUILT_IN) or the path of a text file
    seq_len: int = 128  # positions per sequence, BOS included when task.bos
    bos: bool = True  # a BOS token at position 0 of every sequence
    doc_bos: bool = False  # a BOS token before every document in the packed stream (else the blank line)


def decompressed(key: str, value: str, raw: bytes) -> bytes:
    """A text file's bytes `raw`, decompressed when its name (config `key`=`value`) ends in .xz or .gz;
    ConfigError naming the key when they cannot be."""
    path = data_path(value)
    try:
        if path.endswith(".xz"):
            return lzma.decompress(raw)
        if path.endswith(".gz"):
            return gzip.decompress(raw)
    except (lzma.LZMAError, OSError, EOFError) as err:
        raise ConfigError(f"{key}={value}: cannot be decompressed ({err.__class__.__name__})") from None
    return raw


def documents(corpus: str, raw: bytes) -> list[bytes]:
    """The corpus's documents from its file's bytes `raw`: split at blank lines, without their
    surrounding newlines, empty ones dropped. ConfigError naming task.corpus if the bytes cannot be
    decompressed or hold fewer than HELD_OUT_EVERY documents."""
    raw = decompressed("task.corpus", corpus, raw)
    docs = [doc.strip(b"\n") for doc in raw.replace(b"\r\n", b"\n").split(SEPARATOR) if doc.strip()]
    if len(docs) < HELD_OUT_EVERY:
        raise ConfigError(
            f"task.corpus={corpus}: {len(docs)} documents (blank-line separated); the held-out split "
            f"takes every {HELD_OUT_EVERY}th, so at least {HELD_OUT_EVERY} are needed"
        )
    return docs


def split_streams(corpus: str, doc_bos: bool) -> dict[str, torch.Tensor]:
    """{"train", "held_out"}: each split's documents packed into one stream of token ids (int16),
    joined by their blank line, or each after a BOS with doc_bos. Built once per file version."""
    return _split_streams(corpus, doc_bos, read_data_file("task.corpus", corpus))


@functools.lru_cache(maxsize=4)  # keyed by the file's bytes (read_data_file returns one object per version)
def _split_streams(corpus: str, doc_bos: bool, raw: bytes) -> dict[str, torch.Tensor]:
    docs = documents(corpus, raw)
    held_out = [i % HELD_OUT_EVERY == HELD_OUT_EVERY - 1 for i in range(len(docs))]
    return {
        "train": pack([doc for doc, out in zip(docs, held_out) if not out], doc_bos),
        "held_out": pack([doc for doc, out in zip(docs, held_out) if out], doc_bos),
    }


def pack(docs: list[bytes], doc_bos: bool) -> torch.Tensor:
    if doc_bos:
        parts = [torch.tensor([BOS], dtype=torch.int16)] * (2 * len(docs))
        parts[1::2] = [torch.frombuffer(bytearray(doc), dtype=torch.uint8).to(torch.int16) for doc in docs]
        return torch.cat(parts)
    return torch.frombuffer(bytearray(SEPARATOR.join(docs)), dtype=torch.uint8).to(torch.int16)


class LMTask:
    Config = LMConfig
    query_types = ("text",)
    causal = True
    input_dim = None
    has_bos = True  # position 0 is the sink position (BOS, or the first byte with task.bos=false)
    packable = ()  # settings that change the data only: a pack may vary them (train/replicas.py)
    reference = "bigram model of the training split"
    data_files = ("corpus",)  # its content is part of the config hash

    def __init__(self, cfg: LMConfig):
        self.cfg = cfg
        self.seq_len, self.vocab_size, self.output_dim = cfg.seq_len, VOCAB, VOCAB
        self.streams = split_streams(cfg.corpus, cfg.doc_bos)
        self.log_bigram, self.log_unigram = bigram_model(self.streams["train"])

    @property
    def window(self) -> int:
        """Stream tokens per sequence: the inputs and the last target, less the leading BOS."""
        return self.cfg.seq_len + 1 - self.cfg.bos

    @staticmethod
    def dims(cfg: LMConfig) -> Dims:
        return Dims(cfg.seq_len, input_dim=None, vocab_size=VOCAB, output_dim=VOCAB, structure=VOCAB * VOCAB)

    @staticmethod
    def validate(cfg: LMConfig) -> None:
        if cfg.seq_len < 2:
            raise ConfigError(f"task.seq_len={cfg.seq_len} is not valid; it must be >= 2")
        for split, stream in split_streams(cfg.corpus, cfg.doc_bos).items():  # readable, enough documents
            if len(stream) <= cfg.seq_len:
                raise ConfigError(
                    f"task.seq_len={cfg.seq_len} is longer than the {split} split of task.corpus="
                    f"{cfg.corpus} ({len(stream)} tokens); choose a shorter task.seq_len"
                )

    def _to(self, device: torch.device) -> None:
        if self.log_bigram.device != device:
            # a copy: the cache stays
            self.streams = {split: stream.to(device) for split, stream in self.streams.items()}
            self.log_bigram, self.log_unigram = self.log_bigram.to(device), self.log_unigram.to(device)

    def sample(self, batch_size: int, generator: torch.Generator, device, split: str = "train") -> Batch:
        self._to(torch.empty(0, device=device).device)
        stream = self.streams[split]
        starts = torch.randint(len(stream) - self.window + 1, (batch_size,), generator=generator, device=stream.device)
        tokens = stream[starts[:, None] + torch.arange(self.window, device=stream.device)].long()  # (B, window)
        if self.cfg.bos:
            tokens = torch.nn.functional.pad(tokens, (1, 0), value=BOS)
        B, L = batch_size, self.seq_len
        query_type = torch.zeros(B, L, dtype=torch.long, device=tokens.device)
        query_type[:, 0] = -1
        return Batch(
            inputs=tokens[:, :L],
            targets=tokens[:, 1:],
            loss_mask=torch.ones(B, L, dtype=torch.bool, device=tokens.device),
            query_type=query_type,
            sink=torch.zeros(B, dtype=torch.long, device=tokens.device),
        )

    def sample_held_out(self, batch_size: int, generator: torch.Generator, device) -> Batch:
        """The evaluation batch: windows of the held-out documents."""
        return self.sample(batch_size, generator, device, split="held_out")

    def loss(self, pred: torch.Tensor, batch: Batch) -> torch.Tensor:
        # (B, L) nats per byte
        return torch.nn.functional.cross_entropy(pred.transpose(1, 2), batch.targets, reduction="none")

    def baseline_loss(self, batch: Batch) -> torch.Tensor:
        """-log P(next | current) under the training split's bigram model; the unigram after the
        leading BOS of task.bos (it is not in the stream, so its row means nothing there)."""
        loss = -self.log_bigram[batch.inputs, batch.targets]
        if self.cfg.bos:
            loss[:, 0] = -self.log_unigram[batch.targets[:, 0]]
        return loss


def bigram_model(stream: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """log P(next | current) (VOCAB x VOCAB) and log P(token) from the stream's counts, add-one smoothed."""
    ids = stream.long()
    pairs = torch.bincount(ids[:-1] * VOCAB + ids[1:], minlength=VOCAB * VOCAB).reshape(VOCAB, VOCAB).double() + 1
    unigram = torch.bincount(ids, minlength=VOCAB).double() + 1
    return (pairs / pairs.sum(-1, keepdim=True)).log().float(), (unigram / unigram.sum()).log().float()
