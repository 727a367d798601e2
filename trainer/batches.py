"""Batches: every batch is a pure function of (seed, split, batch index) (torch).

That makes resuming exact with nothing to save but the step (the "data position"), and makes
sharding trivial: the global sample index of step ``s``, micro-batch ``m`` on rank ``r`` of
``w`` is ``(s * grad_accum + m) * w + r``, so ranks draw disjoint, reproducible batches.

``synthetic`` data is generated here (``SyntheticSource``); file-backed sources come as token
arrays from trainer/token_files.py. Validation batches are fixed, evenly spaced windows of the
held-out array (the same for every seed, so runs compare). Import these names from
``trainer.data`` (the package's torch-free front door re-exports them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from contract.config import BpeSpec, DataConfig, RunSpec
from contract.splits import split_problem
from trainer.keyed import keyed_generator
from trainer.token_files import Tokens, load_tokens

Batch = tuple[torch.Tensor, torch.Tensor]  # inputs (B, T) long, targets (B, T) long
_DATA_SEED = 0x6A7E5  # fixes the synthetic *task*; the run seed only orders the samples


class SyntheticSource:
    """A learnable token stream with a known entropy rate.

    Each sequence follows a sparse Markov chain: every token has ``branching`` = 4 fixed
    successors taken with probabilities ``SUCCESSOR_P`` (the same for every state), so the
    chain's entropy rate is exactly ``H = -sum p ln p`` = 1.132 nats/token (PPL 3.10)
    whatever the stationary distribution. With probability ``copy_prob`` = 0.5 the second half
    of a sequence repeats its first half (an induction pattern): a model that learns to copy
    predicts those tokens for free. The best achievable loss is therefore about
    ``H * (1 - copy_prob / 2)`` = 0.85 nats (PPL ~2.3), versus the unigram entropy of
    ~ln(vocab) (5.55 nats for 256 tokens): a bigram model reaches ~H within a few hundred
    CPU steps, copying takes longer.
    """

    SUCCESSOR_P = (0.55, 0.25, 0.12, 0.08)

    def __init__(self, vocab_size: int, copy_prob: float = 0.5) -> None:
        k = len(self.SUCCESSOR_P)
        if vocab_size < 2 * k:
            raise ValueError(f"model.vocab_size: {vocab_size} is too small for the synthetic "
                             f"data source (its chain needs at least {2 * k} tokens)")
        g = keyed_generator(_DATA_SEED, "chain", vocab_size)
        self.vocab_size = vocab_size
        self.successors = _distinct_successors(vocab_size, k, g)  # (V, k)
        self.p = torch.tensor(self.SUCCESSOR_P)
        self.copy_prob = copy_prob

    def sample(self, g: torch.Generator, batch: int, length: int) -> torch.Tensor:
        """(batch, length) long tokens."""
        seq = torch.empty(batch, length, dtype=torch.long)
        seq[:, 0] = torch.randint(self.vocab_size, (batch,), generator=g)
        choice = torch.multinomial(self.p, batch * length, replacement=True,
                                   generator=g).view(batch, length)
        for t in range(1, length):  # sequential by nature; vectorised over the batch
            seq[:, t] = self.successors[seq[:, t - 1], choice[:, t]]
        copy = torch.rand(batch, generator=g) < self.copy_prob
        half = length // 2
        seq[copy, length - half:] = seq[copy, :half]
        return seq


# Up to this vocabulary the chain is drawn with one randperm per token (O(V^2) time), the
# stream every recorded result used; above it (the paper presets' 151,936 tokens) that would
# take minutes, so k distinct successors are drawn directly in O(V k).
_EXACT_CHAIN_MAX_VOCAB = 16_384


def _distinct_successors(vocab: int, k: int, g: torch.Generator) -> torch.Tensor:
    """(vocab, k) long: k distinct successor tokens per token."""
    if vocab <= _EXACT_CHAIN_MAX_VOCAB:
        # clone: a slice would keep each whole permutation alive (O(V^2) memory)
        return torch.stack([torch.randperm(vocab, generator=g)[:k].clone() for _ in range(vocab)])
    succ = torch.randint(vocab, (vocab, k), generator=g)
    while True:  # redraw the rows that repeat a successor (~k^2 / 2V of them)
        ordered = succ.sort(dim=1).values
        dup = (ordered[:, 1:] == ordered[:, :-1]).any(dim=1)
        if not dup.any():
            return succ
        succ[dup] = torch.randint(vocab, (int(dup.sum()), k), generator=g)


class ArraySource:
    """Windows of a training and a held-out token array (trainer/token_files.py)."""

    def __init__(self, tokens: Tokens, length: int, where: str) -> None:
        self.train, self.val = tokens.train, tokens.val
        self.n_train, self.info = len(tokens.train), tokens.info
        problem = split_problem(where, self.n_train, len(self.val), length - 1)
        if problem:
            raise ValueError(problem)
        self.n_val_windows = len(self.val) // length

    @staticmethod
    def _window(tokens: np.ndarray, start: int, length: int) -> torch.Tensor:
        return torch.from_numpy(tokens[start:start + length].astype(np.int64))

    def sample_train(self, g: torch.Generator, batch: int, length: int) -> torch.Tensor:
        starts = torch.randint(self.n_train - length + 1, (batch,), generator=g)
        return torch.stack([self._window(self.train, int(s), length) for s in starts])  # (B, L)

    def val_batch(self, index: int, batch: int, length: int) -> torch.Tensor:
        ids = [(index * batch + i) % self.n_val_windows for i in range(batch)]
        return torch.stack([self._window(self.val, w * length, length) for w in ids])  # (B, L)


@dataclass
class DataStream:
    """Batches for one rank of one run."""

    source: SyntheticSource | ArraySource
    seed: int
    batch_size: int
    seq_len: int
    grad_accum: int = 1
    rank: int = 0
    world_size: int = 1

    def _split(self, seq: torch.Tensor) -> Batch:
        return seq[:, :-1].contiguous(), seq[:, 1:].contiguous()  # (B, T), (B, T)

    def train_batch(self, step: int, micro: int = 0) -> Batch:
        index = (step * self.grad_accum + micro) * self.world_size + self.rank
        g = keyed_generator(self.seed, "train", index)
        length = self.seq_len + 1
        if isinstance(self.source, SyntheticSource):
            return self._split(self.source.sample(g, self.batch_size, length))
        return self._split(self.source.sample_train(g, self.batch_size, length))

    def val_batch(self, index: int) -> Batch:
        """Held-out batch ``index``: independent of the seed and the rank."""
        length = self.seq_len + 1
        if isinstance(self.source, SyntheticSource):
            g = keyed_generator(_DATA_SEED, "val", index)
            return self._split(self.source.sample(g, self.batch_size, length))
        return self._split(self.source.val_batch(index, self.batch_size, length))

    def val_batches(self, n: int) -> list[Batch]:
        return [self.val_batch(i) for i in range(n)]

    @property
    def info(self) -> dict[str, object]:
        """What the run records about its data (trainer.data.data_summary / data_artifact)."""
        if isinstance(self.source, SyntheticSource):
            return {"source": "synthetic"}
        return dict(self.source.info)


def _where(cfg: DataConfig, key: str) -> str:
    """How errors name a data config: its path, dataset name or source under ``key``."""
    if cfg.path:
        return f"{key}.path {cfg.path!r}"
    return f"{key}.name {cfg.name!r}" if cfg.name else f"{key}.source {cfg.source!r}"


def build_source(cfg: DataConfig, vocab_size: int, seq_len: int,
                 key: str = "data") -> SyntheticSource | ArraySource:
    """Validate ``cfg`` against the model and open (tokenising once if needed) its data."""
    if cfg.source == "synthetic":
        return SyntheticSource(vocab_size)
    return ArraySource(load_tokens(cfg, vocab_size), seq_len + 1, _where(cfg, key))


def ppl_set_config(spec: RunSpec, cfg: DataConfig, run_info: Mapping[str, Any]) -> DataConfig:
    """An eval.ppl_sets entry as it is read: with the run's tokenizer. RunSpec already gave
    every set the run's tokenizer name or path; a run that trains its BPE has its file only
    once its own data is open (``run_info``: that stream's info, which names ``bpe_path``)."""
    if isinstance(spec.data.tokenizer, BpeSpec):
        return cfg.model_copy(update={"tokenizer": str(run_info["bpe_path"])})
    return cfg


def build_data(spec: RunSpec, rank: int = 0, world_size: int = 1,
               cfg: DataConfig | None = None, key: str = "data") -> DataStream:
    """The stream of ``spec`` (or of another data config, e.g. an eval.ppl_sets entry, named
    ``key`` in errors). Refuses a held-out split too small for the run's evaluation."""
    t, cfg = spec.train, cfg or spec.data
    source = build_source(cfg, spec.model.vocab_size, t.seq_len, key)
    if isinstance(source, ArraySource):
        problem = split_problem(_where(cfg, key), source.n_train, len(source.val), t.seq_len,
                                batch_size=t.batch_size, eval_batches=t.eval_batches,
                                val_key=f"{key}.val_fraction")
        if problem:
            raise ValueError(problem)
    return DataStream(source, spec.seed, t.batch_size, t.seq_len, t.grad_accum, rank, world_size)
