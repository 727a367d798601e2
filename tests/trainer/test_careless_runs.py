"""Careless run files through ``python -m trainer``'s reader (trainer/runfile.py): every one is
refused before torch or DeepSpeed start, with one sentence naming the file, the key and what
was expected. Data problems that need the real token counts are refused again, with the same
sentence (one owner: contract/splits.py), when the trainer opens the data.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from trainer.data import build_data
from trainer.runfile import load_spec

ROOT = Path(__file__).resolve().parents[2]
HEAD = "name: careless\nmodel: {preset: tiny}\n"
TRAIN = "train: {steps: 4, batch_size: 2, seq_len: 16, warmup: 1, eval_batches: 1}\n"

# (id, run file text, expected message after "FILE: ")
CONFIG: list[tuple[str, str, str]] = [
    ("odd_head_dim", "name: c\nmodel: {preset: tiny, head_dim: 15}\n",
     "model.head_dim: RoPE rotates channel pairs, so head_dim must be even; got 15"),
    ("head_dim_not_derivable",
     "name: c\nmodel: {vocab_size: 256, n_layer: 1, d_model: 65, n_head: 4, d_ff: 32}\n",
     "model.head_dim: not given, and model.d_model (65) is not divisible by model.n_head (4)"),
    ("gqa_not_dividing", "name: c\nmodel: {preset: tiny, n_kv_head: 3, gates: [{position: G2}]}\n",
     "model.n_kv_head: 3 must divide model.n_head (4) for grouped-query attention"),
    ("moe_top_k",
     "name: c\nmodel: {preset: tiny-moe, moe: {n_experts: 2, top_k: 3, d_expert: 8}}\n",
     "moe.top_k: 3 exceeds moe.n_experts (2)"),
    ("moe_zero3", "name: c\nmodel: {preset: tiny-moe}\ntrain: {zero_stage: 3}\n",
     "train.zero_stage: DeepSpeed's MoE layer trains under ZeRO 0-2, not 3"),
    ("lr_zero", HEAD + "train: {lr: 0}\n", "train.lr: Input should be greater than 0"),
    ("warmup_past_steps", HEAD + "train: {steps: 10, warmup: 20}\n",
     "train.warmup: 20 must be below train.steps (10)"),
    ("batch_zero", HEAD + "train: {batch_size: 0}\n", "train.batch_size: Input should be greater"),
    ("grad_accum_zero", HEAD + "train: {grad_accum: 0}\n", "train.grad_accum: Input should be"),
    ("log_every_zero", HEAD + "train: {log_every: 0}\n", "train.log_every: Input should be"),
    ("betas", HEAD + "train: {betas: [0.9, 1.0]}\n",
     "train.betas: [0.9, 1.0]: each beta must be in [0, 1); beta 1 is 1.0"),
    ("longctx_factor_zero", HEAD + "eval: {longctx: {factors: [0, 2]}}\n",
     "eval.longctx.factors.0: Input should be greater than or equal to 1"),
    ("bpe_below_bytes", HEAD + "data: {source: python_code, tokenizer: {train_bpe: 200}}\n",
     "data.tokenizer.train_bpe: Input should be greater than or equal to 257 (a byte-level BPE "
     "has the 256 byte tokens plus at least one merge)"),
    ("bpe_vs_vocab", "name: c\nmodel: {preset: tiny, vocab_size: 256}\n"
     "data: {source: python_code, tokenizer: {train_bpe: 512}}\n",
     "model.vocab_size: 256 differs from data.tokenizer.train_bpe (512)"),
    ("duplicate_key", HEAD + "train: {eval_every: 0, eval_every: 100}\n",
     ":3: train.eval_every: duplicate key (first defined on line 3)"),
    # the sweep files' reader (contract/yamlsrc.py) refuses every tag; SafeLoader took !!binary
    ("binary_tag", HEAD + "data: {source: text, path: !!binary aGVsbG8=}\n",
     ":3: data.path: YAML tag 'tag:yaml.org,2002:binary' is not allowed"),
    ("param_match_cannot_fit", "name: c\nmodel: {preset: tiny, d_ff: 8, param_match: true, "
     "gates: [{position: G1}]}\n", "model.param_match: the gates add 8192 parameters, more "
     "than the FFN (d_ff=8) can give back"),
    ("located_key", HEAD + "train:\n  steps: 10\n  warmup: 20\n",
     ":5: train.warmup: 20 must be below train.steps (10)"),
]


@pytest.mark.parametrize("text,expected", [c[1:] for c in CONFIG], ids=[c[0] for c in CONFIG])
def test_a_careless_config_is_one_sentence_naming_file_and_key(tmp_path: Path, text: str,
                                                               expected: str) -> None:
    f = tmp_path / "run.yaml"
    f.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError) as err:
        load_spec(f)
    message = str(err.value)
    assert message.startswith(str(f)) and expected in message, message
    assert "\n" not in message and "Value error," not in message, message


def _files(d: Path) -> None:
    (d / "empty.txt").write_text("")
    (d / "short.txt").write_text("one short document\n" * 20)  # 380 bytes: 19 held out
    (d / "mid.txt").write_text("the cat sat on the mat. " * 100)  # 2400 bytes: 120 held out
    (d / "binary.txt").write_bytes(bytes(range(256)) * 8)
    (d / "code").mkdir()
    for name in ("a.py", "b.py"):
        (d / "code" / name).write_text("def f(x):\n    return x + 1\n" * 40)


# (id, data + train YAML lines with {d} for the directory, expected message; None: only the
# trainer finds it, from the real token counts)
DATA: list[tuple[str, str, str]] = [
    ("empty_file", "data: {source: text, path: '{d}/empty.txt'}\n" + TRAIN,
     "data.path '{d}/empty.txt': 0 training tokens are too few for train.seq_len 16"),
    ("seq_len_longer_than_the_document",
     "data: {source: text, path: '{d}/short.txt'}\n" + TRAIN.replace("16", "512"),
     "data.path '{d}/short.txt': 361 training tokens are too few for train.seq_len 512: "
     "need at least 513"),
    ("val_split_shorter_than_a_window",
     "data: {source: text, path: '{d}/short.txt'}\n" + TRAIN.replace("16", "32"),
     "data.path '{d}/short.txt': the held-out split has 19 tokens, fewer than one window of "
     "train.seq_len + 1 = 33 tokens; raise data.val_fraction, add data, or lower "
     "train.seq_len"),
    ("eval_batches_beyond_the_val_split",
     "data: {source: text, path: '{d}/mid.txt'}\n" + TRAIN.replace("eval_batches: 1",
                                                                   "eval_batches: 8"),
     "data.path '{d}/mid.txt': the held-out split has 120 tokens, 7 windows of train.seq_len "
     "+ 1 = 17 tokens, but train.eval_batches 8 x train.batch_size 2 asks for 16 distinct "
     "windows; lower train.eval_batches to at most 3 or raise data.val_fraction"),
    ("ppl_set_too_small", "data: {source: text, path: '{d}/mid.txt'}\n" + TRAIN
     + "eval: {ppl_sets: {other: {source: text, path: '{d}/short.txt'}}}\n",
     "eval.ppl_sets.other.path '{d}/short.txt': the held-out split has 19 tokens, 1 "
     "window(s) of train.seq_len + 1 = 17 tokens, fewer than one evaluation batch "
     "(train.batch_size 2); raise eval.ppl_sets.other.val_fraction"),
    ("binary_file", "data: {source: text, path: '{d}/binary.txt'}\n" + TRAIN,
     "data.path: '{d}/binary.txt' is not UTF-8 text"),
    ("empty_glob", "data: {source: text, path: '{d}/none/*.txt'}\n" + TRAIN,
     "data.path: no file matches '{d}/none/*.txt' (data.source: text)"),
    ("code_include_matches_nothing",
     "data: {source: python_code, roots: ['{d}/code'], include: ['**/*.rs']}\n" + TRAIN,
     "data.include: '**/*.rs' matches no file under ['{d}/code'] (after data.exclude)"),
    ("code_exclude_removes_everything",
     "data: {source: python_code, roots: ['{d}/code'], exclude: ['*.py']}\n" + TRAIN,
     "data.include: '**/*.py' matches no file under ['{d}/code'] (after data.exclude)"),
]


def test_run_files_and_sweep_files_read_numbers_alike(tmp_path: Path) -> None:
    """``steps: 1e3`` is 1000 in a sweep file; a run file used to refuse it (a string)."""
    from orchestrator.sweep.spec import loads_spec

    f = tmp_path / "run.yaml"
    f.write_text(HEAD + "train: {steps: 1e3, lr: 3e-3}\n", encoding="utf-8")
    spec = load_spec(f, data=False)
    sweep, _ = loads_spec("name: s\nbase: {train: {steps: 1e3}}\n")
    assert (spec.train.steps, spec.train.lr) == (1000, 0.003)
    assert sweep.base["train"]["steps"] == spec.train.steps


@pytest.mark.parametrize("text,expected", [c[1:] for c in DATA], ids=[c[0] for c in DATA])
def test_careless_data_is_refused_when_the_file_is_read(tmp_path: Path, text: str,
                                                        expected: str) -> None:
    _files(tmp_path)
    f = tmp_path / "run.yaml"
    f.write_text(HEAD + text.replace("{d}", str(tmp_path)), encoding="utf-8")
    expected = expected.replace("{d}", str(tmp_path))
    with pytest.raises(ValueError) as err:
        load_spec(f)
    assert str(err.value).startswith(f"{f}: ") and expected in str(err.value), str(err.value)


@pytest.mark.parametrize("case", ["empty_file", "seq_len_longer_than_the_document",
                                  "val_split_shorter_than_a_window",
                                  "eval_batches_beyond_the_val_split"])
def test_the_trainer_applies_the_same_split_rule_to_the_real_counts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    monkeypatch.setenv("GATESWEEP_CACHE", str(tmp_path / "cache"))
    _files(tmp_path)
    text, expected = next(c[1:] for c in DATA if c[0] == case)
    f = tmp_path / "run.yaml"
    f.write_text(HEAD + text.replace("{d}", str(tmp_path)), encoding="utf-8")
    spec = load_spec(f, data=False)
    with pytest.raises(ValueError, match="^" + re.escape(expected.replace("{d}", str(tmp_path)))):
        build_data(spec)


def test_python_m_trainer_exits_2_before_any_start_and_writes_nothing(tmp_path: Path) -> None:
    _files(tmp_path)
    env = {k: v for k, v in os.environ.items()
           if k not in {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"}}
    env["GATESWEEP_CACHE"] = str(tmp_path / "cache")
    cases = [(HEAD + "train: {betas: [1.5, 0.9]}\n", tmp_path / "ck1", "train.betas:"),
             (HEAD + "data: {source: text, path: '" + str(tmp_path / "mid.txt") + "'}\n"
              + TRAIN.replace("eval_batches: 1", "eval_batches: 8"), tmp_path / "ck2",
              "lower train.eval_batches to at most 3"),
             (HEAD + TRAIN, tmp_path / "mid.txt", "checkpoint_dir: "
              f"'{tmp_path / 'mid.txt'}' is a file, not a directory")]
    for text, ckpt, expected in cases:
        (tmp_path / "run.yaml").write_text(text, encoding="utf-8")
        proc = subprocess.run([sys.executable, "-m", "trainer", str(tmp_path / "run.yaml"),
                               "--checkpoint-dir", str(ckpt)], capture_output=True, text=True,
                              cwd=ROOT, env=env, timeout=300)
        assert proc.returncode == 2, proc.stderr[-2000:]
        assert re.match(rf"error: {re.escape(str(tmp_path / 'run.yaml'))}(:\d+)?: ",
                        proc.stderr), proc.stderr[-2000:]
        assert expected in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-2000:]
        assert ckpt.is_file() or not ckpt.exists()
