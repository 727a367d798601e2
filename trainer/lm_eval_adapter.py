"""A trained GatedLM as an lm-evaluation-harness ``LM``.

lm-eval hands us text; we tokenise with the run's own tokenizer (bytes by default), run the
model, and answer its three request kinds:

- ``loglikelihood((context, continuation))`` -> ``(sum log p(continuation | context), is_greedy)``
- ``loglikelihood_rolling((text,))`` -> sum log p(text), scored in disjoint windows of
  ``max_length`` tokens, each conditioned on the tokens before it (lm-eval's rolling windows)
- ``generate_until((context, gen_kwargs))`` -> greedy text, cut at the first ``until`` string

Batches are right-padded, which is exact for dense models (attention is causal). An MoE
model's expert capacity is shared by every token of a batch, so padding and neighbouring
requests could change its routing: MoE models are scored one request at a time.

The model has no fixed context length (RoPE is computed on the fly), so ``max_length`` is a
choice: longer inputs keep their last ``max_length`` tokens. A context that is empty, as in
rolling PPL, is conditioned on ``prefix_token_id`` (the tokenizer's BOS/EOS when it has one,
else the byte of "\\n", a document boundary in byte-level text).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol, cast

import torch
import torch.nn.functional as F
from lm_eval.api.model import LM
from lm_eval.utils import get_rolling_token_windows, make_disjoint_window
from torch import nn

from trainer.longctx import model_logits

log = logging.getLogger(__name__)


class TextTokenizer(Protocol):
    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: list[int]) -> str: ...


class _WithDecode:
    """A tokenizer plus the ``decode`` that generation needs (trainer.tokenizer has none)."""

    def __init__(self, tok: Any, decode: Callable[[list[int]], str]) -> None:
        self._inner, self._decode = tok, decode

    def encode(self, text: str) -> list[int]:
        return cast("list[int]", self._inner.encode(text))

    def decode(self, ids: list[int]) -> str:
        return self._decode(ids)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _decode_bytes(ids: list[int]) -> str:
    # ids >= 256 can come from a model whose vocab is larger than the byte tokenizer's
    return bytes(i for i in ids if 0 <= i < 256).decode("utf-8", errors="replace")


def eval_tokenizer(tok: Any) -> TextTokenizer:
    """``tok`` with a ``decode``: its own, bytes for the byte tokenizer, or the
    ``tokenizers.Tokenizer`` inside trainer.tokenizer.JsonTokenizer."""
    if hasattr(tok, "decode"):
        return cast(TextTokenizer, tok)
    if getattr(tok, "identity", None) == "bytes":
        return _WithDecode(tok, _decode_bytes)
    inner = getattr(tok, "_tok", None)
    if inner is not None and hasattr(inner, "decode"):
        return _WithDecode(tok, inner.decode)
    raise TypeError(f"lm_eval_adapter: tokenizer {type(tok).__name__} has no decode(); "
                    "generation needs one")


def _is_moe(model: nn.Module) -> bool:
    cfg = getattr(model, "cfg", None)
    return getattr(cfg, "moe", None) is not None


def default_prefix_token(tokenizer: TextTokenizer) -> int:
    for attr in ("bos_id", "eos_id", "bos_token_id", "eos_token_id"):
        value = getattr(tokenizer, attr, None)
        if isinstance(value, int):
            return value
    ids = tokenizer.encode("\n")
    if len(ids) != 1:
        raise ValueError("lm_eval_adapter: the tokenizer has no BOS/EOS id and '\\n' is not one "
                         "token; pass prefix_token_id explicitly")
    return ids[0]


class GatedLMAdapter(LM):
    """lm-eval ``LM`` over an in-memory model. The model is put in eval mode; no grad."""

    def __init__(self, model: nn.Module, tokenizer: TextTokenizer, *, device: str | torch.device
                 = "cpu", max_length: int = 1024, batch_size: int = 8, max_gen_toks: int = 64,
                 prefix_token_id: int | None = None) -> None:
        super().__init__()
        if max_length < 2:
            raise ValueError(f"lm_eval_adapter.max_length: {max_length} must be at least 2")
        model.eval()  # not ``model = model.eval()``: a DeepSpeed engine's eval() returns None
        self.model = model
        self.tokenizer = eval_tokenizer(tokenizer)
        self._device = torch.device(device)
        self.max_length = max_length
        self.batch_size = 1 if _is_moe(model) else batch_size
        if self.batch_size != batch_size:
            log.info("lm_eval_adapter: MoE model, scoring one request at a time (expert "
                     "capacity is shared across a batch, so padding would change routing)")
        self.max_gen_toks = max_gen_toks
        self.prefix_token_id = (default_prefix_token(self.tokenizer) if prefix_token_id is None
                                else prefix_token_id)
        self.eos_id = getattr(self.tokenizer, "eos_id", None)

    # ------------------------------------------------------------------ scoring (token level)
    @torch.inference_mode()
    def score_tokens(self, pairs: Sequence[tuple[list[int], list[int]]]
                     ) -> list[tuple[float, bool]]:
        """(context ids, continuation ids) pairs -> (sum log p(continuation), is_greedy).

        Each sequence is context + continuation minus its last token, truncated on the left to
        ``max_length``; right-padded batches are exact because attention is causal.
        """
        results: list[tuple[float, bool]] = [(0.0, True)] * len(pairs)
        # longest first: batches of similar length waste less padding
        order = sorted(range(len(pairs)), key=lambda i: -(len(pairs[i][0]) + len(pairs[i][1])))
        for start in range(0, len(order), self.batch_size):
            chunk = order[start:start + self.batch_size]
            for i, res in zip(chunk, self._score_batch([pairs[i] for i in chunk])):
                results[i] = res
        return results

    def _score_batch(self, pairs: list[tuple[list[int], list[int]]]) -> list[tuple[float, bool]]:
        inputs, conts = [], []
        for ctx, cont in pairs:
            if not cont:
                raise ValueError("lm_eval_adapter: an empty continuation cannot be scored")
            if len(cont) > self.max_length:
                raise ValueError(f"lm_eval_adapter: continuation of {len(cont)} tokens exceeds "
                                 f"max_length={self.max_length}")
            ctx = ctx or [self.prefix_token_id]
            inputs.append((ctx + cont)[:-1][-self.max_length:])
            conts.append(cont)
        width = max(len(x) for x in inputs)
        idx = torch.zeros(len(inputs), width, dtype=torch.long)  # (B, T), right-padded
        for row, x in enumerate(inputs):
            idx[row, :len(x)] = torch.tensor(x, dtype=torch.long)
        logp = F.log_softmax(model_logits(self.model, idx.to(self._device)), dim=-1).cpu()
        out = []
        for row, (x, cont) in enumerate(zip(inputs, conts)):
            # the continuation's tokens are predicted by the last len(cont) real positions
            lp = logp[row, len(x) - len(cont):len(x)]  # (len(cont), V)
            target = torch.tensor(cont, dtype=torch.long)
            total = lp.gather(-1, target[:, None]).sum().item()
            greedy = bool((lp.argmax(-1) == target).all())
            out.append((total, greedy))
        return out

    # ------------------------------------------------------------------ lm-eval requests
    def loglikelihood(self, requests: list[Any], disable_tqdm: bool = False
                      ) -> list[tuple[float, bool]]:
        pairs = []
        for req in requests:
            context, continuation = req.args
            pairs.append(self._encode_pair(context, continuation))
        return self.score_tokens(pairs)

    def _encode_pair(self, context: str, continuation: str) -> tuple[list[int], list[int]]:
        # A trailing space of the context belongs to the continuation (lm-eval's convention:
        # word-boundary spaces are scored with the word they precede).
        n_spaces = len(context) - len(context.rstrip())
        if n_spaces:
            context, continuation = context[:-n_spaces], context[-n_spaces:] + continuation
        return self.tokenizer.encode(context), self.tokenizer.encode(continuation)

    def loglikelihood_rolling(self, requests: list[Any], disable_tqdm: bool = False
                              ) -> list[float]:
        out = []
        for req in requests:
            (text,) = req.args
            windows = [make_disjoint_window(w) for w in get_rolling_token_windows(
                token_list=self.tokenizer.encode(text), prefix_token=self.prefix_token_id,
                max_seq_len=self.max_length, context_len=1)]
            # windows' contexts already start with the prefix token; score them as given
            out.append(sum(lp for lp, _ in self.score_tokens(windows)))
        return out

    def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[str]:
        out = []
        for req in requests:
            context, gen_kwargs = req.args
            kwargs = dict(gen_kwargs or {})
            until = kwargs.get("until") or []
            until = [until] if isinstance(until, str) else list(until)
            max_new = int(kwargs.get("max_gen_toks", self.max_gen_toks))
            out.append(self.greedy_generate(context, until, max_new))
        return out

    @torch.inference_mode()
    def greedy_generate(self, context: str, until: Sequence[str], max_new_tokens: int) -> str:
        """Greedy decoding without a KV cache (tiny models, short answers); cut at ``until``."""
        ids = self.tokenizer.encode(context) or [self.prefix_token_id]
        new: list[int] = []
        for _ in range(max_new_tokens):
            window = (ids + new)[-self.max_length:]
            idx = torch.tensor([window], dtype=torch.long, device=self._device)  # (1, T)
            nxt = int(model_logits(self.model, idx)[0, -1].argmax())
            if nxt == self.eos_id:
                break
            new.append(nxt)
            text = self.tokenizer.decode(new)
            if any(stop in text for stop in until):
                break
        return cut_at_stops(self.tokenizer.decode(new), until)


def cut_at_stops(text: str, until: Sequence[str]) -> str:
    """``text`` up to the earliest occurrence of any stop string (lm-eval leaves this to us)."""
    cut = len(text)
    for stop in until:
        if stop and (pos := text.find(stop)) != -1:
            cut = min(cut, pos)
    return text[:cut]
