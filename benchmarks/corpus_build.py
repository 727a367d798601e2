"""The python_code corpus: how long a cold build takes, and what the BPE buys.

Builds one corpus twice into a fresh cache (cold, then warm) with the byte tokenizer and with a
trained BPE, and prints one table: files and MB chosen, listing + reading + hashing time, BPE
training time, encoding MB/s, tokens, bytes per token (compression), and the warm (cache hit)
time. torch is not needed. The GPU recipes (sweeps/gpu/) size their corpora and budgets from it.

    python benchmarks/corpus_build.py                                  # 8 MB of the stdlib
    python benchmarks/corpus_build.py --roots stdlib site-packages --max-mb 80 --bpe 8192
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np


def _timed(fn, *args):  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t0, out


def _build(cfg: object, vocab: int) -> tuple[float, dict]:
    from trainer.token_files import load_tokens

    seconds, tokens = _timed(load_tokens, cfg, vocab)
    return seconds, tokens.info


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--roots", nargs="+", default=["stdlib"])
    ap.add_argument("--max-mb", type=float, default=8.0)
    ap.add_argument("--bpe", type=int, default=8192)
    args = ap.parse_args()
    cache = tempfile.mkdtemp(prefix="gatesweep-corpus-bench-")
    os.environ["GATESWEEP_CACHE"] = cache  # a fresh cache: the first build is cold
    try:
        _run(args, cache)
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def _run(args: argparse.Namespace, cache: str) -> None:
    from contract.config import BpeSpec, DataConfig
    from trainer.bpe import train_bpe
    from trainer.corpus import select
    from trainer.tokenizer import ByteTokenizer, JsonTokenizer

    print(f"{datetime.now(UTC):%Y-%m-%d} {platform.node()} {platform.machine()}, "
          f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}, roots {args.roots}, "
          f"budget {args.max_mb} MB\n")
    roots, budget = tuple(args.roots), int(args.max_mb * 1e6)
    select_s, (corpus, texts) = _timed(select, roots, ("**/*.py",), (), budget, 0.05)
    all_texts = [texts[f.name] for f in corpus.train + corpus.val]
    mb = sum(len(t.encode()) for t in all_texts) / 1e6
    spec = BpeSpec(train_bpe=args.bpe)
    train_s, path = _timed(train_bpe, (texts[f.name] for f in corpus.train), spec,
                           Path(cache) / "bench-bpe.json")
    rows = []
    for label, tok, dtype in (("bytes", ByteTokenizer(), "uint8"),
                              (f"BPE {args.bpe}", JsonTokenizer(str(path)), "uint16")):
        enc_s, ids = _timed(tok.encode_array, all_texts, np.dtype(dtype))
        rows.append((label, enc_s, len(ids)))
    cfg = DataConfig(source="python_code", roots=roots, max_bytes=budget,
                     tokenizer={"train_bpe": args.bpe})
    cold_s, _ = _build(cfg, args.bpe)
    warm_s, _ = _build(cfg, args.bpe)
    print(f"{len(all_texts)} files, {mb:.1f} MB; list + read + hash {select_s:.2f} s; "
          f"BPE {args.bpe} training {train_s:.1f} s ({mb / train_s:.2f} MB/s)\n")
    print("| tokenizer | encode s | encode MB/s | tokens | bytes/token |")
    print("|---|---|---|---|---|")
    for label, enc_s, n in rows:
        print(f"| {label} | {enc_s:.2f} | {mb / max(enc_s, 1e-9):.1f} | {n:,} | "
              f"{mb * 1e6 / n:.2f} |")
    print(f"\nwhole python_code build with BPE (load_tokens): cold {cold_s:.1f} s "
          f"(train + encode + cache), warm {warm_s:.2f} s (cache hits: hash + memmap)")


if __name__ == "__main__":
    main()
