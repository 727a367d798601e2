"""trainer/data.py + trainer/tokenizer.py: determinism, sharding, round trips, clear errors."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from contract.config import RunSpec
from trainer.data import SyntheticSource, build_data


def spec(data: dict | None = None, vocab: int = 256, **train: object) -> RunSpec:
    tr = {"batch_size": 4, "seq_len": 16, "eval_batches": 1, **train}  # small test corpora
    return RunSpec(name="d", model={"preset": "tiny", "vocab_size": vocab}, train=tr,
                   data=data or {})


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("GATESWEEP_CACHE", str(root))
    return root


# ---- synthetic ---------------------------------------------------------------------------------

def test_synthetic_is_deterministic_and_shifted() -> None:
    a, b = build_data(spec()), build_data(spec())
    x, y = a.train_batch(3)
    assert x.shape == (4, 16) and x.dtype == torch.long
    assert torch.equal(x, b.train_batch(3)[0]) and torch.equal(y, b.train_batch(3)[1])
    assert torch.equal(x[:, 1:], y[:, :-1])  # targets are the next tokens
    assert not torch.equal(x, a.train_batch(4)[0])


def test_seed_changes_training_order_but_not_validation() -> None:
    a, b = build_data(spec()), build_data(spec().model_copy(update={"seed": 1}))
    assert not torch.equal(a.train_batch(0)[0], b.train_batch(0)[0])
    assert torch.equal(a.val_batch(0)[0], b.val_batch(0)[0])
    assert not torch.equal(a.val_batch(0)[0], a.val_batch(1)[0])


def test_ranks_draw_disjoint_slices_of_one_global_sequence() -> None:
    s = spec(grad_accum=2)
    single = build_data(s)
    r0, r1 = build_data(s, rank=0, world_size=2), build_data(s, rank=1, world_size=2)
    # global index = (step * grad_accum + micro) * world + rank
    assert torch.equal(r0.train_batch(0, 0)[0], single.train_batch(0, 0)[0])  # index 0
    assert torch.equal(r1.train_batch(0, 0)[0], single.train_batch(0, 1)[0])  # index 1
    assert torch.equal(r1.train_batch(1, 1)[0], single.train_batch(3, 1)[0])  # index 7
    assert not torch.equal(r0.train_batch(2, 0)[0], r1.train_batch(2, 0)[0])


def test_synthetic_structure_is_a_sparse_chain_plus_copies() -> None:
    src = SyntheticSource(256)
    seq = src.sample(torch.Generator().manual_seed(0), 400, 65)  # (400, 65)
    half = 65 // 2
    copied = (seq[:, -half:] == seq[:, :half]).all(dim=1)
    assert 0.4 < copied.float().mean() < 0.6
    plain = seq[~copied]
    succ = src.successors
    # every transition of a non-copied sequence is one of the 4 successors of its token
    ok = (succ[plain[:, :-1]] == plain[:, 1:, None]).any(dim=-1)
    assert bool(ok.all())
    entropy_rate = -sum(p * math.log(p) for p in SyntheticSource.SUCCESSOR_P)
    assert entropy_rate == pytest.approx(1.1319, abs=1e-3)
    assert entropy_rate < 0.25 * math.log(256)


def test_synthetic_task_is_fixed_across_seeds_and_depends_on_vocab() -> None:
    assert torch.equal(SyntheticSource(256).successors, SyntheticSource(256).successors)
    assert SyntheticSource(512).successors.max() > 255


def test_synthetic_needs_a_few_tokens() -> None:
    with pytest.raises(ValueError, match="model.vocab_size: 4 is too small"):
        build_data(spec(vocab=4))


# ---- text ---------------------------------------------------------------------------------------

def _all_tokens(d) -> np.ndarray:  # type: ignore[no-untyped-def]
    """Training then held-out tokens of a file-backed stream (the tail split joins them)."""
    return np.concatenate([np.asarray(d.source.train), np.asarray(d.source.val)])


def write_text(path: Path, n: int = 4000) -> bytes:
    text = "".join(f"línea {i}: the quick brown fox — jumps\n" for i in range(n // 30))
    path.write_text(text, encoding="utf-8")
    return text.encode("utf-8")


def test_text_bytes_round_trip_and_cache(tmp_path: Path, _cache: Path) -> None:
    raw = write_text(tmp_path / "a.txt")
    d = build_data(spec({"source": "text", "path": str(tmp_path / "a.txt")}))
    tokens = _all_tokens(d)
    assert bytes(tokens.astype(np.uint8)) == raw  # the byte tokenizer is the identity
    cached = list((_cache / "tokens").glob("*.bin"))
    assert len(cached) == 1 and not list((_cache / "tokens").glob(".tmp-*"))
    mtime = cached[0].stat().st_mtime_ns
    build_data(spec({"source": "text", "path": str(tmp_path / "a.txt")}))
    assert cached[0].stat().st_mtime_ns == mtime  # reused, not rewritten
    (tmp_path / "a.txt").write_text("changed " * 600, encoding="utf-8")
    build_data(spec({"source": "text", "path": str(tmp_path / "a.txt")}))
    assert len(list((_cache / "tokens").glob("*.bin"))) == 2  # keyed by content


def test_text_windows_come_from_the_right_split(tmp_path: Path) -> None:
    raw = write_text(tmp_path / "a.txt")
    d = build_data(spec({"source": "text", "path": str(tmp_path / "a.txt"),
                         "val_fraction": 0.2}))
    n_train = d.source.n_train
    assert n_train == len(raw) - int(len(raw) * 0.2)
    val_x = d.val_batch(0)[0]
    assert bytes(val_x[0].numpy().astype(np.uint8)) == raw[n_train:n_train + 16]
    for step in range(20):  # every train window lies inside the training split
        x, y = d.train_batch(step)
        for row_x, row_y in zip(x, y):
            seq = bytes(row_x.numpy().astype(np.uint8)) + bytes([int(row_y[-1])])
            assert raw[:n_train].find(seq) >= 0


def test_text_glob_concatenates_sorted_files(tmp_path: Path) -> None:
    a, b = write_text(tmp_path / "p1.txt"), write_text(tmp_path / "p2.txt", 2000)
    d = build_data(spec({"source": "text", "path": str(tmp_path / "p*.txt")}))
    assert bytes(_all_tokens(d).astype(np.uint8)) == a + b


def test_text_with_a_local_tokenizer_json(tmp_path: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    write_text(tmp_path / "a.txt")
    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel()
    alphabet = pre_tokenizers.ByteLevel.alphabet()  # 256 symbols: the vocab exceeds 256
    tok.train([str(tmp_path / "a.txt")], trainers.BpeTrainer(
        vocab_size=320, special_tokens=["[UNK]"], initial_alphabet=alphabet))
    tok.save(str(tmp_path / "tokenizer.json"))
    n_vocab = tok.get_vocab_size()
    assert n_vocab > 256
    data = {"source": "text", "path": str(tmp_path / "a.txt"),
            "tokenizer": str(tmp_path / "tokenizer.json")}
    d = build_data(spec(data, vocab=n_vocab))
    tokens = _all_tokens(d)
    assert tokens.max() < n_vocab and len(tokens) < len((tmp_path / "a.txt").read_bytes())
    with pytest.raises(ValueError, match=r"model.vocab_size: 256 .* tokenizer's"):
        build_data(spec(data, vocab=256))


def test_missing_text_file_names_data_path(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"data.path: no file matches .*nope\.txt"):
        build_data(spec({"source": "text", "path": str(tmp_path / "nope.txt")}))


def test_missing_tokenizer_names_the_field(tmp_path: Path) -> None:
    write_text(tmp_path / "a.txt")
    with pytest.raises(FileNotFoundError, match="data.tokenizer"):
        build_data(spec({"source": "text", "path": str(tmp_path / "a.txt"),
                         "tokenizer": str(tmp_path / "missing.json")}))


def test_byte_tokenizer_needs_256_embeddings(tmp_path: Path) -> None:
    write_text(tmp_path / "a.txt")
    with pytest.raises(ValueError, match=r"model.vocab_size: 100 .* 256"):
        build_data(spec({"source": "text", "path": str(tmp_path / "a.txt")}, vocab=100))


def test_non_utf8_text_is_rejected(tmp_path: Path) -> None:
    (tmp_path / "bad.txt").write_bytes(b"ok\xff\xfe" * 2000)
    with pytest.raises(ValueError, match="not UTF-8"):
        build_data(spec({"source": "text", "path": str(tmp_path / "bad.txt")}))


def test_too_small_corpus_is_rejected(tmp_path: Path) -> None:
    (tmp_path / "tiny.txt").write_text("hello", encoding="utf-8")
    with pytest.raises(ValueError, match="too few"):
        build_data(spec({"source": "text", "path": str(tmp_path / "tiny.txt")}))


# ---- tokens (.bin) -------------------------------------------------------------------------------

def test_tokens_bin_round_trip(tmp_path: Path) -> None:
    arr = (np.arange(5000) * 7 % 1000).astype(np.uint16)
    arr.tofile(tmp_path / "t.bin")
    d = build_data(spec({"source": "tokens", "path": str(tmp_path / "t.bin")}, vocab=1000))
    assert np.array_equal(_all_tokens(d), arr)
    x, y = d.train_batch(0)
    start = int(np.where(arr == int(x[0, 0]))[0][0])  # values repeat every 1000 tokens
    assert np.array_equal(x[0].numpy(), arr[start:start + 16])
    assert np.array_equal(y[0].numpy(), arr[start + 1:start + 17])


def test_tokens_uint32(tmp_path: Path) -> None:
    arr = np.arange(3000, dtype=np.uint32) + 70000
    arr.tofile(tmp_path / "t.bin")
    d = build_data(spec({"source": "tokens", "path": str(tmp_path / "t.bin"),
                         "token_dtype": "uint32"}, vocab=80000))
    assert int(d.val_batch(0)[0].max()) >= 70000


def test_tokens_beyond_vocab_are_rejected(tmp_path: Path) -> None:
    (np.arange(3000) % 600).astype(np.uint16).tofile(tmp_path / "t.bin")
    with pytest.raises(ValueError, match=r"model.vocab_size: 256 does not cover token id 599"):
        build_data(spec({"source": "tokens", "path": str(tmp_path / "t.bin")}))


def test_tokens_file_of_the_wrong_size(tmp_path: Path) -> None:
    (tmp_path / "t.bin").write_bytes(b"\x01" * 3001)
    with pytest.raises(ValueError, match="data.token_dtype"):
        build_data(spec({"source": "tokens", "path": str(tmp_path / "t.bin")}))


def test_missing_tokens_file_names_data_path(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="data.path"):
        build_data(spec({"source": "tokens", "path": str(tmp_path / "none.bin")}))


# ---- hf ---------------------------------------------------------------------------------------

def test_hf_dataset_unavailable_offline_names_data_name(monkeypatch: pytest.MonkeyPatch,
                                                         tmp_path: Path) -> None:
    pytest.importorskip("datasets")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    with pytest.raises(ValueError, match=r"data.name: could not load dataset 'no-such/dataset'"):
        build_data(spec({"source": "hf", "name": "no-such/dataset"}))


def test_synthetic_chain_scales_to_the_paper_vocabulary() -> None:
    """Qwen's 151,936-token vocabulary: k distinct successors per token, built in O(V k)."""
    from trainer.data import SyntheticSource

    src = SyntheticSource(151_936)  # the O(V^2) construction took minutes (and ~100 GB)
    ordered = src.successors.sort(dim=1).values  # (V, k)
    assert src.successors.shape == (151_936, 4)
    assert bool((ordered[:, 1:] != ordered[:, :-1]).all())
    assert int(src.successors.max()) < 151_936


def test_small_vocabulary_chain_is_the_recorded_stream() -> None:
    """Below the threshold the chain is the one every recorded result used (randperm per token)."""
    import torch

    from trainer.data import _DATA_SEED, SyntheticSource
    from trainer.keyed import keyed_generator

    g = keyed_generator(_DATA_SEED, "chain", 256)
    expected = torch.stack([torch.randperm(256, generator=g)[:4] for _ in range(256)])
    assert torch.equal(SyntheticSource(256).successors, expected)


# ---- check(): what validate can tell without training ------------------------------------------

def _check(data: dict, seq_len: int = 16, **kw: object) -> list[str]:
    from contract.config import DataConfig, TrainConfig
    from trainer.data import check

    train = TrainConfig(seq_len=seq_len, batch_size=4, eval_batches=1)  # small test corpora
    return check(DataConfig(**data), train, **kw)


def test_check_passes_usable_data(tmp_path: Path) -> None:
    write_text(tmp_path / "a.txt")
    np.arange(4000, dtype=np.uint16).tofile(tmp_path / "t.bin")
    assert _check({}) == []
    assert _check({"source": "text", "path": str(tmp_path / "*.txt")}) == []
    (tmp_path / "sub" / "deeper").mkdir(parents=True)
    write_text(tmp_path / "sub" / "deeper" / "b.txt")
    assert _check({"source": "text", "path": str(tmp_path / "sub" / "**")}) == []  # dirs skipped
    assert len(_check({"source": "text", "path": str(tmp_path / "**")})) == 1  # t.bin: binary
    assert _check({"source": "tokens", "path": str(tmp_path / "t.bin")}) == []
    assert _check({"source": "python_code", "include": ["json/*.py"]}) == []
    # every text problem this file can show is also one that build_data raises later
    build_data(spec({"source": "text", "path": str(tmp_path / "*.txt")}))


def test_check_finds_missing_non_regular_and_undecodable_files(tmp_path: Path) -> None:
    import os

    os.mkfifo(tmp_path / "fifo.txt")  # reading it would block forever
    (tmp_path / "bad.txt").write_bytes(b"ok\xff\xfe" * 10)
    assert _check({"source": "text", "path": str(tmp_path / "none*.txt")}) == [
        f"data.path: no file matches {str(tmp_path / 'none*.txt')!r} (data.source: text)"]
    assert _check({"source": "text", "path": str(tmp_path / "fifo.txt")}) == [
        f"data.path: {str(tmp_path / 'fifo.txt')!r} is not a regular file"]
    assert _check({"source": "text", "path": "/dev/zero"}) == [
        "data.path: '/dev/zero' is not a regular file"]
    assert _check({"source": "text", "path": str(tmp_path / "bad.txt")}) == [
        f"data.path: {str(tmp_path / 'bad.txt')!r} is not UTF-8 text (invalid start byte "
        f"at byte 2)"]


def test_check_sample_tolerates_a_character_cut_at_the_sample_end(tmp_path: Path) -> None:
    from trainer.datacheck import SAMPLE_BYTES

    (tmp_path / "a.txt").write_bytes(b"a" * (SAMPLE_BYTES - 1) + "é".encode() * 10)
    assert _check({"source": "text", "path": str(tmp_path / "a.txt")}) == []


def test_check_tokens_files(tmp_path: Path) -> None:
    (tmp_path / "odd.bin").write_bytes(b"\x01" * 3001)
    np.arange(40, dtype=np.uint16).tofile(tmp_path / "few.bin")
    assert _check({"source": "tokens", "path": str(tmp_path / "odd.bin")})[0].endswith(
        "is 3001 bytes, not a whole number of uint16 tokens (data.token_dtype)")
    assert _check({"source": "tokens", "path": str(tmp_path / "few.bin")}) == [
        f"data.path {str(tmp_path / 'few.bin')!r}: the held-out split has 2 tokens, fewer than "
        f"one window of train.seq_len + 1 = 17 tokens; raise data.val_fraction, add data, or "
        f"lower train.seq_len"]


def test_check_tokenizer_files(tmp_path: Path) -> None:
    write_text(tmp_path / "a.txt")
    (tmp_path / "broken.json").write_text("{not json", encoding="utf-8")
    text = {"source": "text", "path": str(tmp_path / "a.txt")}
    missing = _check({**text, "tokenizer": str(tmp_path / "none.json")})
    assert missing == [f"data.tokenizer: {str(tmp_path / 'none.json')!r} cannot be read "
                       f"(No such file or directory)"]
    broken = _check({**text, "tokenizer": str(tmp_path / "broken.json")})
    assert len(broken) == 1 and broken[0].startswith("data.tokenizer: ") and \
        "is not a valid tokenizer.json" in broken[0]
    assert _check(text, vocab_size=100) == [
        "model.vocab_size: 100 is smaller than the byte tokenizer's 256 tokens "
        "(data.tokenizer: bytes)"]


def test_check_python_code_roots_and_patterns(tmp_path: Path) -> None:
    assert _check({"source": "python_code", "include": ["json/*.py", "no_such_pkg/**/*.py"],
                   "exclude": ["**/tests/**"]}) == [
        "data.include: 'no_such_pkg/**/*.py' matches no file under ['stdlib'] "
        "(after data.exclude)"]
    (tmp_path / "one").mkdir()
    (tmp_path / "one" / "a.py").write_text("x = 1\n", encoding="utf-8")
    assert _check({"source": "python_code", "roots": [str(tmp_path / "one")]}) == [
        "data.include: only 1 file matches ['**/*.py']; the held-out split by file needs at "
        "least 2"]
    assert _check({"source": "python_code", "roots": [str(tmp_path / "nope")]},
                  key="eval.ppl_sets.code") == [
        f"eval.ppl_sets.code.roots: {str(tmp_path / 'nope')!r} is neither one of "
        f"['stdlib', 'site-packages'] nor an existing directory"]


def test_check_does_not_import_torch() -> None:
    import subprocess
    import sys

    code = ("import sys; from contract.config import DataConfig, TrainConfig; "
            "from trainer.data import check; "
            "print(check(DataConfig(source='python_code', include=['json/*.py'], "
            "tokenizer={'train_bpe': 512}), TrainConfig()), 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True, cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.strip() == "[] False"
