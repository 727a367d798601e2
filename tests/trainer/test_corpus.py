"""The python_code source (trainer/corpus.py, token_files.py) and the trained BPE (bpe.py):
file-level split, determinism, budget, globs, content-keyed caches, BPE round trip."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from contract.config import DataConfig, RunSpec
from trainer.corpus import glob_regex, select
from trainer.data import build_data, data_artifact, data_summary
from trainer.tokenizer import ByteTokenizer, JsonTokenizer


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("GATESWEEP_CACHE", str(root))
    return root


def make_tree(root: Path, n: int = 12, lines: int = 40) -> dict[str, str]:
    """n small Python-like files in nested packages; returns relative path -> text."""
    files = {}
    for i in range(n):
        rel = f"pkg{i % 3}/sub{i % 2}/mod_{i}.py"
        text = "".join(f"def f_{i}_{j}(x):\n    return x * {j} + {i}  # ünïcode {i}\n"
                       for j in range(lines))
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
        files[rel] = text
    return files


def code_spec(root: Path, seq_len: int = 32, **data: object) -> RunSpec:
    return RunSpec(name="c", model={"preset": "tiny"},
                   train={"batch_size": 4, "seq_len": seq_len, "eval_batches": 1},
                   data={"source": "python_code", "roots": [str(root)], **data})


def _decode_bytes(arr: np.ndarray) -> str:
    return bytes(np.asarray(arr).astype(np.uint8)).decode("utf-8")


# ---- globs ----------------------------------------------------------------------------------

@pytest.mark.parametrize("pattern,path,hit", [
    ("**/*.py", "a.py", True), ("**/*.py", "a/b/c.py", True), ("*.py", "a/b.py", False),
    ("a/**", "a/b/c.txt", True), ("**/tests/**", "x/tests/y/z.py", True),
    ("**/tests/**", "tests.py", False), ("mod_?.py", "mod_1.py", True),
    ("mod_[0-2].py", "mod_3.py", False), ("mod_[!0-2].py", "mod_3.py", True),
    ("json/*.py", "json/decoder.py", True), ("json/*.py", "json/x/y.py", False),
])
def test_globs_span_directories_only_with_double_star(pattern: str, path: str, hit: bool) -> None:
    assert bool(glob_regex(pattern).match(path)) is hit


# ---- the file-level split -------------------------------------------------------------------

def test_validation_never_sees_a_training_file(tmp_path: Path) -> None:
    files = make_tree(tmp_path / "src")
    d = build_data(code_spec(tmp_path / "src", val_fraction=0.25))
    corpus, _ = select((str(tmp_path / "src"),), ("**/*.py",), (), None, 0.25)
    assert len(corpus.val) == 3 and len(corpus.train) == 9  # a quarter of 12 files, by file
    label = str((tmp_path / "src").resolve())
    train_text = "".join(files[f.name.removeprefix(label + "/")] for f in corpus.train)
    val_text = "".join(files[f.name.removeprefix(label + "/")] for f in corpus.val)
    # byte tokens are the files' bytes, training files then held-out files, each in hash order
    assert _decode_bytes(d.source.train) == train_text
    assert _decode_bytes(d.source.val) == val_text
    for f in corpus.val:  # no held-out file's text occurs in the training stream
        assert files[f.name.removeprefix(label + "/")] not in train_text
    for step in range(10):  # and every training window comes from the training text
        x, _ = d.train_batch(step)
        for row in x:
            assert bytes(row.numpy().astype(np.uint8)) in train_text.encode()


def test_corpus_is_deterministic_and_independent_of_creation_order(tmp_path: Path) -> None:
    files = make_tree(tmp_path / "src")
    a = build_data(code_spec(tmp_path / "src"))
    for rel in reversed(list(files)):  # the same files, written again in the reverse order
        (tmp_path / "src" / rel).unlink()
        (tmp_path / "src" / rel).write_text(files[rel], encoding="utf-8")
    b = build_data(code_spec(tmp_path / "src"))
    assert a.info["corpus_sha256"] == b.info["corpus_sha256"]
    assert np.array_equal(a.source.train, b.source.train)
    assert np.array_equal(a.val_batch(0)[0], b.val_batch(0)[0])
    (tmp_path / "src" / "pkg0/sub0/mod_0.py").write_text("x = 1\n" * 50, encoding="utf-8")
    c = build_data(code_spec(tmp_path / "src"))
    assert c.info["corpus_sha256"] != a.info["corpus_sha256"]  # content enters the hash


def test_include_exclude_and_byte_budget(tmp_path: Path) -> None:
    files = make_tree(tmp_path / "src")
    (tmp_path / "src" / "notes.txt").write_text("not python\n" * 100, encoding="utf-8")
    corpus, _ = select((str(tmp_path / "src"),), ("**/*.py",), ("pkg1/**",), None, 0.2)
    names = [f.name.rsplit("/src/", 1)[1] for f in corpus.train + corpus.val]
    assert sorted(names) == sorted(r for r in files if not r.startswith("pkg1/"))
    size = len(next(iter(files.values())).encode())  # ~all files have about this size
    budget = int(size * 4.5)
    small, _ = select((str(tmp_path / "src"),), ("**/*.py",), (), budget, 0.2)
    total = sum(f.size for f in small.train + small.val)
    assert total <= budget and len(small.train + small.val) >= 3
    full, _ = select((str(tmp_path / "src"),), ("**/*.py",), (), None, 0.2)
    order = [f.name for f in sorted(full.train + full.val,
                                    key=lambda f: hashlib.sha256(f.name.encode()).hexdigest())]
    chosen = {f.name for f in small.train + small.val}
    assert order[:2] == [n for n in order if n in chosen][:2]  # taken in the fixed hash order


def test_non_utf8_and_empty_files_are_skipped(tmp_path: Path) -> None:
    make_tree(tmp_path / "src", n=6)
    (tmp_path / "src" / "latin.py").write_bytes(b"# caf\xe9\nx = 1\n" * 50)
    for i in range(20):  # empty __init__.py files: never chosen (an empty held-out split)
        (tmp_path / "src" / f"empty{i}").mkdir()
        (tmp_path / "src" / f"empty{i}" / "__init__.py").write_text("", encoding="utf-8")
    d = build_data(code_spec(tmp_path / "src"))
    assert d.info["skipped_non_utf8"] == 1 and d.info["files"] == 6
    assert data_summary(d.info)["data/skipped_non_utf8"] == 1.0


def test_too_few_files_is_a_clear_error(tmp_path: Path) -> None:
    make_tree(tmp_path / "src", n=3)
    with pytest.raises(ValueError, match=r"data.include: 0 UTF-8 file\(s\) match \['\*\*/\*.rs'\]"):
        build_data(code_spec(tmp_path / "src", include=["**/*.rs"]))
    with pytest.raises(ValueError, match="data.roots: '/no/such/dir'"):
        build_data(code_spec(Path("/no/such/dir")))


def test_the_real_standard_library_subset_builds(tmp_path: Path) -> None:
    """A small include subset of this interpreter's stdlib (the shipped recipes use all of it)."""
    spec = RunSpec(name="s", model={"preset": "tiny"}, train={"batch_size": 2, "seq_len": 64},
                   data={"source": "python_code", "roots": ["stdlib"],
                         "include": ["json/*.py"], "val_fraction": 0.2})
    d = build_data(spec)
    info = d.info
    assert info["source"] == "python_code" and info["files"] >= 4 and info["val_files"] >= 1
    assert info["train_tokens"] + info["val_tokens"] == info["train_bytes"] + info["val_bytes"]
    assert "def " in _decode_bytes(d.source.train)
    art = data_artifact(info)
    assert len(art["corpus_sha256"]) == 64 and art["python"].count(".") == 2


# ---- caches ---------------------------------------------------------------------------------

def test_token_cache_hit_and_miss(tmp_path: Path, _cache: Path) -> None:
    make_tree(tmp_path / "src")
    build_data(code_spec(tmp_path / "src"))
    cached = sorted((_cache / "tokens").glob("*.bin"))
    assert len(cached) == 2  # the training split and the held-out split
    mtimes = [p.stat().st_mtime_ns for p in cached]
    build_data(code_spec(tmp_path / "src"))
    assert [p.stat().st_mtime_ns for p in sorted((_cache / "tokens").glob("*.bin"))] == mtimes
    corpus, _ = select((str(tmp_path / "src"),), ("**/*.py",), (), None, 0.05)
    corpus.val[0].path.write_text("y = 2\n" * 60, encoding="utf-8")  # change a held-out file
    build_data(code_spec(tmp_path / "src"))
    assert len(list((_cache / "tokens").glob("*.bin"))) == 3  # only the val split is new


def test_bpe_is_trained_once_on_the_training_files(tmp_path: Path, _cache: Path) -> None:
    make_tree(tmp_path / "src")
    spec = code_spec(tmp_path / "src", tokenizer={"train_bpe": 300})
    a = build_data(spec)
    assert a.info["bpe_trained_now"] is True and spec.model.vocab_size == 300
    path = Path(a.info["bpe_path"])
    assert path.parent == _cache / "tokenizers"
    mtime = path.stat().st_mtime_ns
    b = build_data(spec)
    assert b.info["bpe_trained_now"] is False and path.stat().st_mtime_ns == mtime  # cache hit
    assert np.array_equal(a.source.train, b.source.train)
    corpus, _ = select((str(tmp_path / "src"),), ("**/*.py",), (), None, 0.05)
    corpus.val[0].path.write_text("z = 3\n" * 60, encoding="utf-8")
    c = build_data(spec)  # a held-out file changed: the BPE (training files only) is reused
    assert c.info["bpe_trained_now"] is False and c.info["bpe_path"] == str(path)
    corpus.train[0].path.write_text("w = 4\n" * 60, encoding="utf-8")
    assert build_data(spec).info["bpe_trained_now"] is True  # a training file changed


def test_bpe_training_is_deterministic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_tree(tmp_path / "src")
    spec = code_spec(tmp_path / "src", tokenizer={"train_bpe": 320})
    first = Path(build_data(spec).info["bpe_path"]).read_bytes()
    monkeypatch.setenv("GATESWEEP_CACHE", str(tmp_path / "other-cache"))
    assert Path(build_data(spec).info["bpe_path"]).read_bytes() == first


def test_bpe_round_trips_unseen_text_and_compresses(tmp_path: Path) -> None:
    files = make_tree(tmp_path / "src")
    d = build_data(code_spec(tmp_path / "src", tokenizer={"train_bpe": 350}))
    tok = JsonTokenizer(d.info["bpe_path"])
    assert tok.vocab_size == 350  # exactly what was asked (or an error: see below)
    raw = tok._tok  # the tokenizers.Tokenizer: decode is what generation would use
    for text in [*files.values(), "naïve → 日本語 \t\x00 emoji 🎉\n", "class Z:\n    pass\n"]:
        ids = tok.encode(text)
        assert raw.decode(ids) == text  # byte-level: every byte is representable
    text = next(iter(files.values()))
    assert len(tok.encode(text)) < len(text.encode()) / 2  # merges learnt on this code
    assert int(np.asarray(d.source.train).max()) < tok.vocab_size


def test_batched_encode_equals_one_text_at_a_time(tmp_path: Path) -> None:
    """The cache writer encodes groups of texts with encode_batch (parallel); same ids."""
    files = make_tree(tmp_path / "src")
    d = build_data(code_spec(tmp_path / "src", tokenizer={"train_bpe": 300}))
    tok = JsonTokenizer(d.info["bpe_path"])
    texts = list(files.values())
    one = np.concatenate([np.asarray(tok.encode(t), dtype=np.uint16) for t in texts])
    assert np.array_equal(tok.encode_array(texts, np.dtype(np.uint16)), one)
    assert np.array_equal(ByteTokenizer().encode_array(texts, np.dtype(np.uint16)),
                          np.frombuffer("".join(texts).encode(), dtype=np.uint8))


def test_a_bpe_larger_than_the_corpus_supports_is_refused(tmp_path: Path, _cache: Path) -> None:
    """The BPE trainer stops when no pair is frequent enough: a model with train_bpe rows
    would then silently train on a smaller vocabulary than the run records."""
    make_tree(tmp_path / "src")  # supports 351 tokens at min_frequency 2
    with pytest.raises(ValueError, match=r"^data.tokenizer.train_bpe: 5000 tokens asked, but "
                                         r"the training files \(11 files, \d+ bytes.*give "
                                         r"only 351 with min_frequency 2; lower train_bpe to "
                                         r"at most 351"):
        build_data(code_spec(tmp_path / "src", tokenizer={"train_bpe": 5000}))
    with pytest.raises(ValueError, match="give only 351"):  # a cached short BPE is refused too
        build_data(code_spec(tmp_path / "src", tokenizer={"train_bpe": 5000}))


def test_a_ppl_set_is_read_with_the_runs_trained_bpe(tmp_path: Path) -> None:
    from trainer.data import ppl_set_config

    make_tree(tmp_path / "src")
    (tmp_path / "other.txt").write_text("def g(x):\n    return x + 1\n" * 400, encoding="utf-8")
    spec = RunSpec(name="c", model={"preset": "tiny"},
                   train={"batch_size": 4, "seq_len": 32, "eval_batches": 1},
                   data={"source": "python_code", "roots": [str(tmp_path / "src")],
                         "tokenizer": {"train_bpe": 300}},
                   eval={"ppl_sets": {"other": {"source": "text",
                                                "path": str(tmp_path / "other.txt")}}})
    run = build_data(spec)
    cfg = ppl_set_config(spec, spec.eval.ppl_sets["other"], run.info)
    assert cfg.tokenizer == run.info["bpe_path"]
    stream = build_data(spec, cfg=cfg, key="eval.ppl_sets.other")
    text = (tmp_path / "other.txt").read_text(encoding="utf-8")
    # BPE ids, not bytes: fewer tokens than bytes, and ids above the byte range occur
    assert len(stream.source.train) + len(stream.source.val) < len(text.encode()) // 2
    assert int(stream.source.train.max()) >= 256


# ---- configuration --------------------------------------------------------------------------

def test_vocab_size_follows_the_bpe_or_must_match() -> None:
    data = {"source": "python_code", "tokenizer": {"train_bpe": 8192}}
    assert RunSpec(name="r", model={"preset": "small"}, data=data).model.vocab_size == 8192
    with pytest.raises(ValidationError, match=r"model.vocab_size: 256 differs from "
                                              r"data.tokenizer.train_bpe \(8192\)"):
        RunSpec(name="r", model={"preset": "small", "vocab_size": 256}, data=data)
    spec = RunSpec(name="r", model={"preset": "small"}, data=data)
    again = RunSpec.model_validate(spec.model_dump(mode="json"))  # a stored config reloads
    assert again == spec and again.fingerprint() == spec.fingerprint()


def test_code_keys_and_bpe_belong_to_python_code() -> None:
    with pytest.raises(ValidationError, match="data.include: only used by data.source"):
        DataConfig(source="text", path="x.txt", include=["*.py"])
    with pytest.raises(ValidationError, match="data.tokenizer.train_bpe: a BPE is trained"):
        DataConfig(source="text", path="x.txt", tokenizer={"train_bpe": 512})
    text = DataConfig(source="text", path="x.txt")
    assert DataConfig.model_validate(text.model_dump(mode="json")) == text  # defaults reload
    with pytest.raises(ValidationError, match="eval.ppl_sets.code.tokenizer"):
        RunSpec(name="r", model={"preset": "tiny"},
                eval={"ppl_sets": {"code": {"source": "python_code",
                                            "tokenizer": {"train_bpe": 300}}}})


def test_ppl_sets_take_the_runs_tokenizer(tmp_path: Path) -> None:
    tok = str(tmp_path / "tok.json")
    base = {"name": "r", "model": {"preset": "tiny"},
            "data": {"source": "text", "path": "a.txt", "tokenizer": tok}}
    spec = RunSpec(**base, eval={"ppl_sets": {"b": {"source": "text", "path": "b.txt"}}})
    assert spec.eval.ppl_sets["b"].tokenizer == tok  # inherited, and said in the stored spec
    again = RunSpec.model_validate(spec.model_dump(mode="json"))
    assert again == spec and again.fingerprint() == spec.fingerprint()
    for theirs in ("bytes", str(tmp_path / "other.json")):
        with pytest.raises(ValidationError, match=r"eval.ppl_sets.b.tokenizer: .* differs from "
                                                  r"data.tokenizer .*drop eval.ppl_sets.b"):
            RunSpec(**base, eval={"ppl_sets": {"b": {"source": "text", "path": "b.txt",
                                                     "tokenizer": theirs}}})
    bpe = {"name": "r", "model": {"preset": "tiny"},
           "data": {"source": "python_code", "tokenizer": {"train_bpe": 300}}}
    with pytest.raises(ValidationError, match="the run trains its own BPE"):
        RunSpec(**bpe, eval={"ppl_sets": {"b": {"source": "text", "path": "b.txt",
                                                "tokenizer": tok}}})
    plain = RunSpec(**bpe, eval={"ppl_sets": {"b": {"source": "text", "path": "b.txt"}}})
    assert plain.eval.ppl_sets["b"].tokenizer == "bytes"  # the trained file, once it exists


# ---- end to end -------------------------------------------------------------------------------

@pytest.mark.slow
def test_trainer_learns_from_stdlib_code_with_a_trained_bpe(tmp_path: Path) -> None:
    """trainer.train on python_code + BPE (CPU, DeepSpeed): the model beats uniform guessing."""
    from contract.reporter import MemoryReporter
    from trainer.train import train

    spec = RunSpec(name="c", model={"preset": "tiny"},
                   train={"steps": 6, "batch_size": 4, "seq_len": 64, "warmup": 1,
                          "eval_every": 3, "eval_batches": 2, "log_every": 2,
                          "checkpoint_every": 0},
                   data={"source": "python_code", "include": ["json/*.py", "email/*.py"],
                         "tokenizer": {"train_bpe": 512}})
    result = train(spec, MemoryReporter(), tmp_path / "ckpt")
    assert result.status == "succeeded" and spec.model.vocab_size == 512
    assert result.summary["val/ppl"] < 0.9 * 512  # uniform over the vocabulary is 512


def test_bpe_trains_on_a_bounded_sample_of_the_training_files(tmp_path: Path) -> None:
    from trainer.bpe import sample

    assert list(sample(["ab", "cd", "ef"], 4)) == ["ab", "cd"]
    assert list(sample(["long text", "x"], 2)) == ["long text"]  # never empty
    files = make_tree(tmp_path / "src")
    small = build_data(code_spec(tmp_path / "src",
                                 tokenizer={"train_bpe": 280, "sample_bytes": 3000}))
    full = build_data(code_spec(tmp_path / "src", tokenizer={"train_bpe": 280}))
    assert small.info["bpe_path"] != full.info["bpe_path"]  # the sample enters the cache key
    tok = JsonTokenizer(small.info["bpe_path"])
    text = next(iter(files.values()))
    assert tok._tok.decode(tok.encode(text)) == text
