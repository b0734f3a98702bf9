"""Bigram-Backcopy (Guo et al. 2024, "Active-Dormant Attention Heads", arXiv 2410.13835).

A bigram chain with a back-copy rule. Tokens 0..n-1, one of which is BOS (`bos`). The k most
frequent tokens (by the marginal) are triggers. A sequence is BOS, then x_1 from the marginal
with the triggers removed, then for t >= 1: if x_t is a trigger, x_{t+1} = x_{t-1} (back-copy),
else x_{t+1} ~ P(. | x_t). Next-token cross-entropy at every position.

A tiny example with triggers {7} and BOS = 9:

    position      0 (BOS)  1     2            3             4
    inputs        9        3     7            3             5
    targets       3        7     3 (copy)     5             ...
    query_type    -1       non   trigger      non           ...

Query types: `trigger` (the input is a trigger: the next token is a copy, oracle loss 0) and
`non_trigger` (a bigram draw, oracle loss = the entropy of P(. | x_t)). The reference predictor
is that oracle, so `loss - baseline_loss` is the excess loss.

The table: by default synthetic and seeded by `task.structure_seed`: a Zipf marginal
pi_j ~ 1/(j+1) over the V = `task.vocab` ordinary tokens, rows P(. | i) = softmax(log pi +
2 g_i) with g_i ~ N(0, I) (sparse, language-like rows), BOS = id V whose row is the marginal; the
marginal reported and used for trigger choice is the stationary distribution of the chain.
`task.bigram_table=PATH` loads a JSON table instead, with `cond` (n x n, rows summing to 1),
`marginal` (n) and `bos` (an id), e.g. the paper's Tiny-Shakespeare character table.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Optional

from sinkexp.errors import ConfigError, choices_error
from sinkexp.tasks.base import Batch, Dims, read_data_file
from sinkexp.tasks.lazy import torch

TRIGGER, NON_TRIGGER = 0, 1
ROW_NOISE = 2.0  # spread of the synthetic rows' logits around log pi


@dataclass
class BackcopyConfig:
    name: str = "backcopy"
    seq_len: int = 64  # L input positions, BOS included
    vocab: int = 64  # V ordinary tokens of the synthetic table (BOS is extra)
    n_triggers: int = 3  # k
    structure_seed: int = 0  # draws the synthetic table
    bigram_table: Optional[str] = None  # a JSON table (cond, marginal, bos) instead
    # inverse_cdf: one uniform per token, looked up in each row's cumulative distribution (fast);
    # multinomial: torch.multinomial per step, the first release's stream (its runs keep their names)
    sampler: str = "inverse_cdf"


SAMPLERS = ("inverse_cdf", "multinomial")


@functools.lru_cache(maxsize=8)  # checking, naming and building a run all need it; never changed in place
def synthetic_table(vocab: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, int]:
    """(cond (n, n), marginal (n,), bos) with n = vocab + 1; see the module docstring."""
    generator = torch.Generator().manual_seed(seed)
    zipf = 1.0 / torch.arange(1, vocab + 1, dtype=torch.float64)
    logits = zipf.log() + ROW_NOISE * torch.randn(vocab, vocab, generator=generator, dtype=torch.float64)
    rows = logits.softmax(dim=-1)
    stationary = torch.full((vocab,), 1.0 / vocab, dtype=torch.float64)
    for _ in range(1000):
        stationary = stationary @ rows
    n, bos = vocab + 1, vocab
    cond = torch.zeros(n, n, dtype=torch.float64)
    cond[:vocab, :vocab] = rows
    cond[bos, :vocab] = stationary
    marginal = torch.cat([stationary, torch.zeros(1, dtype=torch.float64)])
    return cond, marginal, bos


def load_table(path: str) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Read and check a JSON bigram table; any problem is a ConfigError naming task.bigram_table.

    Checked: every entry finite and non-negative, cond square with rows summing to 1, the marginal
    one entry per token summing to 1, bos an integer token id (`true` is not one).
    """

    def bad(why: str) -> ConfigError:
        return ConfigError(f"task.bigram_table={path}: {why}")

    try:
        raw = json.loads(read_data_file("task.bigram_table", path))
    except ValueError as err:
        raise bad(f"cannot be read as JSON ({err.__class__.__name__})") from None
    if not isinstance(raw, dict):
        raise bad("must be a JSON object with cond, marginal, bos")
    missing = [key for key in ("cond", "marginal", "bos") if key not in raw]
    if missing:
        raise bad(f"missing keys {missing}; a table needs cond, marginal, bos")
    try:
        cond = torch.tensor(raw["cond"], dtype=torch.float64)
        marginal = torch.tensor(raw["marginal"], dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError):
        raise bad("cond and marginal must be numeric arrays") from None
    n = cond.shape[0] if cond.dim() == 2 else -1
    if cond.dim() != 2 or cond.shape[1] != n:
        raise bad(f"cond must be a square matrix, got shape {tuple(cond.shape)}")
    if marginal.shape != (n,):
        raise bad(f"marginal must have {n} entries (one per token), got shape {tuple(marginal.shape)}")
    for name, values in (("cond", cond), ("marginal", marginal)):
        if not torch.isfinite(values).all():
            raise bad(f"{name} holds a value that is not finite (NaN or inf)")
        if (values < 0).any():
            raise bad(f"{name}: probabilities must be non-negative")
    if not torch.allclose(cond.sum(-1), torch.ones(n, dtype=torch.float64), atol=1e-6):
        raise bad("every row of cond must sum to 1")
    if abs(marginal.sum().item() - 1.0) > 1e-6:
        raise bad(f"marginal must sum to 1, sums to {marginal.sum().item():.6g}")
    if type(raw["bos"]) is not int or not 0 <= raw["bos"] < n:
        raise bad(f"bos must be an integer token id in [0, {n}), got {raw['bos']!r}")
    return cond, marginal, raw["bos"]


class BackcopyTask:
    Config = BackcopyConfig
    query_types = ("trigger", "non_trigger")
    causal = True
    input_dim = None
    has_bos = True  # registers go after position 0 when True
    packable = ("structure_seed",)  # settings that change the data only: a pack may vary them (train/replicas.py)
    reference = "oracle (exact optimum from the table)"
    data_files = ("bigram_table",)  # config keys naming files whose content is part of the config hash

    def __init__(self, cfg: BackcopyConfig):
        self.cfg = cfg
        if cfg.bigram_table:
            cond, marginal, self.bos = load_table(cfg.bigram_table)
        else:
            cond, marginal, self.bos = synthetic_table(cfg.vocab, cfg.structure_seed)
        n = cond.shape[0]
        self.seq_len, self.vocab_size, self.output_dim = cfg.seq_len, n, n
        ordinary = marginal.clone()
        ordinary[self.bos] = -1.0
        self.triggers = ordinary.argsort(descending=True)[: cfg.n_triggers]
        self.is_trigger = torch.zeros(n, dtype=torch.bool)
        self.is_trigger[self.triggers] = True
        first = marginal.clone()
        first[self.is_trigger] = 0.0
        first[self.bos] = 0.0
        self.cond, self.first = cond.float(), (first / first.sum()).float()
        # Inverse-CDF draws: row r's cumulative distribution, divided by its total so that it ends at
        # exactly 1, plus r, all rows in one sorted float64 array. A draw from row r is then one search
        # for u + r (u uniform in [0, 1)); searchsorted(right=True) returns the first entry above
        # u + r, so a zero-probability token (an entry equal to the one before) is never drawn, and
        # `token_of` maps the entry back to its token. Rows 0..n-1 are P(. | i), row n is x_1's law.
        rows = torch.cat([cond, first[None] / first.sum()])  # (n + 1, n), float64
        cumulative = rows.cumsum(-1)
        self.cdf = (cumulative / cumulative[:, -1:] + torch.arange(n + 1, dtype=torch.float64)[:, None]).flatten()
        self.token_of = torch.arange(n).repeat(n + 1)  # entry -> token
        plogp = torch.where(cond > 0, cond * cond.log(), torch.zeros_like(cond))
        self.entropy = (-plogp.sum(-1)).float()  # (n,) H(P(. | i))
        self.first_entropy = -(self.first[self.first > 0] * self.first[self.first > 0].log()).sum()

    @staticmethod
    def dims(cfg: BackcopyConfig) -> Dims:
        n = load_table(cfg.bigram_table)[0].shape[0] if cfg.bigram_table else cfg.vocab + 1
        return Dims(cfg.seq_len, input_dim=None, vocab_size=n, output_dim=n, structure=n * n)

    @staticmethod
    def validate(cfg: BackcopyConfig) -> None:
        if cfg.sampler not in SAMPLERS:
            raise choices_error("task.sampler", cfg.sampler, SAMPLERS)
        if cfg.seq_len < 3:
            raise ConfigError(f"task.seq_len={cfg.seq_len} is not valid; it must be >= 3")
        if cfg.bigram_table:
            _, marginal, bos = load_table(cfg.bigram_table)
            n = marginal.shape[0]
        else:
            if cfg.vocab < 2:
                raise ConfigError(f"task.vocab={cfg.vocab} is not valid; it must be >= 2")
            n = cfg.vocab + 1
        if not 1 <= cfg.n_triggers <= n - 2:
            raise ConfigError(f"task.n_triggers={cfg.n_triggers} is not valid; it must lie in [1, {n - 2}]")
        if cfg.bigram_table:
            ordinary = marginal.clone()
            ordinary[bos] = 0.0
            if ordinary.sort(descending=True).values[cfg.n_triggers :].sum() <= 0:
                raise ConfigError(
                    f"task.bigram_table={cfg.bigram_table}: the marginal has no mass outside BOS and "
                    f"the {cfg.n_triggers} triggers, so the first token cannot be drawn"
                )

    def _to(self, device: torch.device) -> None:
        """Move the table to `device` once (not per batch)."""
        if self.cond.device != device:
            self.cond, self.first, self.cdf = self.cond.to(device), self.first.to(device), self.cdf.to(device)
            self.token_of = self.token_of.to(device)
            self.is_trigger, self.entropy = self.is_trigger.to(device), self.entropy.to(device)

    def sample(self, batch_size: int, generator: torch.Generator, device) -> Batch:
        B, L = batch_size, self.seq_len
        self._to(torch.empty(0, device=device).device)  # resolved, e.g. cuda -> cuda:0
        tokens = torch.empty(B, L + 1, dtype=torch.long, device=device)  # inputs and the last target
        tokens[:, 0] = self.bos
        if self.cfg.sampler == "multinomial":
            self._chain_multinomial(tokens, generator)
        else:
            self._chain_inverse_cdf(tokens, generator)
        inputs = tokens[:, :L]
        query_type = torch.where(self.is_trigger[inputs], TRIGGER, NON_TRIGGER)
        query_type[:, 0] = -1
        return Batch(
            inputs=inputs,
            targets=tokens[:, 1:],
            loss_mask=torch.ones(B, L, dtype=torch.bool, device=device),
            query_type=query_type,
            sink=torch.zeros(B, dtype=torch.long, device=device),
        )

    def _chain_inverse_cdf(self, tokens: torch.Tensor, generator: torch.Generator) -> None:
        """Fill tokens[:, 1:] (B, L) in place: all uniforms in one call, then per step one search,
        one lookup and the copy rule (a Markov chain cannot skip steps). Time-major inside, so each
        step writes one contiguous row."""
        B, L = tokens.shape[0], tokens.shape[1] - 1
        uniform = torch.rand(L, B, generator=generator, device=tokens.device, dtype=torch.float64)  # (L, B)
        chain = torch.empty(L + 1, B, dtype=torch.long, device=tokens.device)  # (time, batch)
        chain[0] = self.bos
        chain[1] = self.token_of[torch.searchsorted(self.cdf, uniform[0] + self.vocab_size, right=True)]
        for t in range(1, L):
            current = chain[t]
            drawn = self.token_of[torch.searchsorted(self.cdf, uniform[t] + current, right=True)]  # (B,)
            torch.where(self.is_trigger[current], chain[t - 1], drawn, out=chain[t + 1])
        tokens.copy_(chain.t())

    def _chain_multinomial(self, tokens: torch.Tensor, generator: torch.Generator) -> None:
        """The first release's draws, torch.multinomial(rows, 1) per step (kept so its runs stay
        reproducible), as torch computes one sample: argmax of p / q with q ~ Exp(1) per entry (ATen
        Distributions.cpp, multinomial's one-sample path), the same numbers from the same generator,
        without its two checks of the rows, which wait for the device (the table is checked once)."""
        B, L = tokens.shape[0], tokens.shape[1] - 1
        tokens[:, 1] = one_sample(self.first.expand(B, -1), generator)
        for t in range(1, L):
            current = tokens[:, t]
            drawn = one_sample(self.cond[current], generator)
            tokens[:, t + 1] = torch.where(self.is_trigger[current], tokens[:, t - 1], drawn)

    def loss(self, pred: torch.Tensor, batch: Batch) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(pred.transpose(1, 2), batch.targets, reduction="none")  # (B, L)

    def baseline_loss(self, batch: Batch) -> torch.Tensor:
        """The oracle: 0 after a trigger, H(P(. | x_t)) otherwise, H(first) at BOS."""
        oracle = torch.where(self.is_trigger[batch.inputs], 0.0, self.entropy[batch.inputs])
        oracle[:, 0] = self.first_entropy
        return oracle


def one_sample(probs: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """torch.multinomial(probs, 1, generator=generator).squeeze(1) for rows of probabilities (B, n):
    the same draw, with no host synchronisation (tests/tasks/test_samplers.py checks it against torch)."""
    q = torch.empty(probs.shape, dtype=probs.dtype, device=probs.device).exponential_(1, generator=generator)
    return (probs / q).argmax(dim=-1)
