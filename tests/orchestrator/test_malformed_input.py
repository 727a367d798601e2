"""A corpus of careless and hostile sweep files through `orchestrator validate` and `submit`,
each a real process of its own bounded in time (timeout) and memory (RLIMIT_AS): exit code 2,
one clear message naming FILE:LINE and the key, no traceback, and the DB's bytes untouched.
The processes fork from a server that has imported the CLI (tests/support/cliproc.py): a fresh
interpreter's ~1.1 CPU-s of imports per case were most of this module's 81 s.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

import results_db
from tests.support import cliproc

TIMEOUT_S = 20  # generous for a loaded 2-core machine; each case answers in well under 1 s
MEMORY_BYTES = 2 << 30  # address space: a /dev/zero read or an alias bomb would blow past it

HEAD = "name: x\nbase:\n  model: {preset: tiny}\n"
# (id, file text, line, key path shown, message fragment); line None = the file as a whole
CASES: list[tuple[str, str, int | None, str, str]] = [
    ("syntax", HEAD + "variants: {a: {}\n", 5, "", "invalid YAML"),
    ("tab_indent", HEAD + "variants:\n\ta: {}\n", 5, "variants", "invalid YAML"),
    ("tag_python_scalar", HEAD + "description: !!python/name:os.system x\n", 4,
     "description", "YAML tag 'tag:yaml.org,2002:python/name:os.system' is not allowed"),
    ("tag_on_list", HEAD + "seeds: !!python/tuple [0, 1]\n", 4, "seeds", "is not allowed"),
    ("tag_on_map", HEAD + "variants: !custom {a: {}}\n", 4, "variants", "'!custom' is not"),
    ("tag_binary", HEAD + "description: !!binary aGVsbG8=\n", 4, "description",
     "is not allowed"),
    ("alias_bomb", "a: &a [1,1,1,1,1,1,1,1,1,1]\n" + "".join(
        f"{c}: &{c} [{', '.join([f'*{p}'] * 10)}]\n" for p, c in zip("abcdefgh", "bcdefghi")),
     None, "", "more than 200000 nodes"),
    ("recursive_alias", "a: &a [*a]\n", 1, "a.0.0", "nesting deeper than 32"),
    ("depth_10k", "a: " + "[" * 10_000 + "]" * 10_000 + "\n", 1, "a.0.0",
     "nesting deeper than 32 levels"),
    ("depth_block", "".join("  " * i + f"k{i}:\n" for i in range(40)) + "  " * 40 + "v\n",
     33, "k0.k1.k2", "nesting deeper than 32 levels"),
    ("duplicate_key", HEAD + "variants:\n  a: {}\n  a: {}\n", 6, "variants.a",
     "duplicate key (first defined on line 5)"),
    ("control_char", HEAD + "description: \"a\x07b\"\n", 4, "", "control character U+0007"),
    ("lr_inf", HEAD + "  train: {lr: .inf}\n", 4, "base.train.lr", "finite number"),
    ("lr_nan", HEAD + "  train: {lr: .nan}\n", 4, "base.train.lr", "finite number"),
    ("axis_nan", HEAD + "axes: {train.lr: [1e-3, .nan]}\n", 4, "axes.train.lr.1",
     "finite number"),
    ("float_overflow", HEAD + "  train: {weight_decay: 1e999}\n", 4, "base.train.weight_decay",
     "finite number"),
    ("seed_1e23", HEAD + "seeds: [100000000000000000000000]\n", 4, "seeds.0",
     "is out of range; expected at most 9223372036854775807"),
    ("seed_bool", HEAD + "seeds: [yes]\n", 4, "seeds.0", "got a boolean"),
    ("axis_seed_huge", HEAD + "axes: {seed: [0, 100000000000000000000000]}\n", 4, "axes.seed.1",
     "is out of range; expected at most 9223372036854775807"),
    # one number rule for sweep and run fields (contract.config.plain_number): these said
    # "Input should be a valid integer" here and "got a boolean" for train.steps
    ("axis_seed_bool", HEAD + "axes: {seed: [0, on]}\n", 4, "axes.seed.1", "got a boolean"),
    ("retries_bool", HEAD + "retries: yes\n", 4, "retries", "got a boolean"),
    ("steps_yes", HEAD + "  train: {steps: yes}\n", 4, "base.train.steps",
     "got a boolean"),
    ("steps_huge", HEAD + "  train: {steps: 100000000000000000000000}\n", 4,
     "base.train.steps", "64-bit integer"),
    ("ladder_inf", HEAD + "lr_ladder: {min: 1e-4, max: .inf, steps: 3}\n", 4, "lr_ladder.max",
     "finite number"),
    ("ladder_absurd", HEAD + "lr_ladder: {min: 1e-300, max: 1e-3, steps: 3}\n", 4, "lr_ladder",
     "spans 297 decades"),
    ("ladder_huge_lr", HEAD + "lr_ladder: {min: 1e-3, max: 1e5, steps: 3}\n", 4,
     "lr_ladder.max", "less than or equal to 10"),
    ("ladder_dense", HEAD + "lr_ladder: {min: 1.0e-3, max: 1.001e-3, steps: 50}\n", 4,
     "lr_ladder", "distinct learning rates"),
    ("ladder_steps_bool", HEAD + "lr_ladder: {min: 1e-4, max: 1e-3, steps: on}\n", 4,
     "lr_ladder.steps", "got a boolean"),
    ("huge_grid", HEAD + "variants: {a: {}, b: {}}\naxes: {train.warmup: ["
     + ", ".join(map(str, range(50))) + "]}\nseeds: [" + ", ".join(map(str, range(60)))
     + "]\n", 6, "seeds", "6000 runs (2 variants x 50 axes.train.warmup x 60 seeds)"),
    ("unknown_top_key", HEAD + "retrys: 2\n", 4, "retrys", "unknown key"),
    ("unknown_base_key", HEAD + "  trian: {steps: 3}\n", 4, "base.trian",
     "unknown key 'trian'"),
    ("typo_in_base_field", HEAD + "  train: {stepz: 3}\nvariants: {a: {}, b: {}}\nseeds: [0, 1]\n",
     4, "base.train.stepz", "unknown key (not a field here) (in 4 runs"),
    ("int_5000_digits", HEAD + "  train: {steps: " + "9" * 5000 + "}\n", 4,
     "base.train.steps", "cannot read the value '9999"),
    ("wrong_type", HEAD + "  train: {batch_size: many}\n", 4, "base.train.batch_size",
     "valid integer"),
    ("bad_enum", HEAD + "variants: {a: {gate.position: G7}}\n", 4, "variants.a.gate.position",
     "'G1', 'G2', 'G3', 'G4' or 'G5'"),
    ("cross_field", HEAD + "  train: {steps: 5, warmup: 9}\nvariants: {a: {}, b: {}}\n", 4,
     "base.train.warmup", "must be below train.steps (5) (in 2 runs"),
    ("data_missing", HEAD + "  data: {source: text, path: /nonexistent/corpus.txt}\n"
     "seeds: [0, 1]\n", 4, "base.data",
     "data.path: no file matches '/nonexistent/corpus.txt' (data.source: text) (in 2 runs"),
    # trainer rules (contract/config.py) that the model or DeepSpeed used to find only at start
    ("odd_head_dim", HEAD + "variants: {a: {model.head_dim: 15}}\n", 4,
     "variants.a.model.head_dim", "RoPE rotates channel pairs, so head_dim must be even"),
    ("moe_zero3", HEAD + "variants: {a: {model.preset: tiny-moe, train.zero_stage: 3}}\n", 4,
     "variants.a.train.zero_stage", "DeepSpeed's MoE layer trains under ZeRO 0-2, not 3"),
    ("betas", HEAD + "  train: {betas: [1.5, 0.9]}\n", 4, "base.train.betas",
     "each beta must be in [0, 1)"),
    ("bpe_below_bytes", HEAD + "  data: {source: python_code, tokenizer: {train_bpe: 200}}\n",
     4, "base.data.tokenizer.train_bpe", "greater than or equal to 257 (a byte-level BPE"),
    ("not_a_mapping", "- 1\n- 2\n", 1, "", "expected a mapping at the top level"),
    ("empty", "", 1, "", "the file is empty"),
    ("bad_name", "name: ../../etc\nbase: {model: {preset: tiny}}\n", 1, "name",
     "should match pattern"),
    ("timestamp_as_string", HEAD + "description: 2024-01-01\n", 4, "description",
     "valid string"),
]


def orchestrator(*args: str) -> subprocess.CompletedProcess[str]:
    return cliproc.run(*args, timeout=TIMEOUT_S, env={**os.environ, "COLUMNS": "200"},
                       address_space=MEMORY_BYTES)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path, str]:
    """An existing, migrated, empty DB: every case must leave its bytes as they are."""
    path = tmp_path_factory.mktemp("db") / "results.db"
    results_db.open(f"sqlite:///{path}").close()
    return f"sqlite:///{path}", path, hashlib.sha256(path.read_bytes()).hexdigest()


def _check(proc: subprocess.CompletedProcess[str], file: str, line: int | None, key: str,
           msg: str) -> None:
    err = proc.stderr
    assert proc.returncode == 2, err[-3000:]
    assert err.startswith("error: invalid sweep") and "Traceback" not in err, err[-3000:]
    where = f"{file}:{line}:" if line is not None else f"{file}"
    assert where in err, err
    assert f": {key}" in err and msg in err, err


# Every case through `validate`; through `submit` a representative few by default and all of
# them in the slow run (each case is a process of its own, forked from the CLI's server).
QUICK_SUBMIT = {"tag_python_scalar", "depth_10k", "alias_bomb", "lr_inf", "seed_1e23",
                "huge_grid", "typo_in_base_field"}


@pytest.mark.parametrize("command,case,text,line,key,msg", [
    pytest.param(cmd, *c, id=f"{c[0]}-{cmd}", marks=pytest.mark.slow
                 if cmd == "submit" and c[0] not in QUICK_SUBMIT else ())
    for c in CASES for cmd in ("validate", "submit")])
def test_malformed_file_exits_2_naming_file_line_key(
        tmp_path: Path, db: tuple[str, Path, str], command: str, case: str, text: str,
        line: int | None, key: str, msg: str) -> None:
    url, path, digest = db
    f = tmp_path / f"{case}.yaml"
    f.write_text(text, encoding="utf-8")
    _check(orchestrator(command, str(f), "--db", url), str(f), line, key, msg)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest, "the DB changed"


def _special_files(tmp_path: Path) -> list[tuple[str, str]]:
    fifo = tmp_path / "sweep.fifo"
    os.mkfifo(fifo)  # opening it would block forever: it must never be opened
    big = tmp_path / "big.yaml"
    big.write_text("description: '" + "x" * (2 << 20) + "'\n")
    latin1 = tmp_path / "latin1.yaml"
    latin1.write_bytes(b"name: x\ndescription: caf\xe9\n")
    link = tmp_path / "zero.yaml"
    link.symlink_to("/dev/zero")
    return [(str(fifo), "this is a FIFO"), ("/dev/zero", "this is a device"),
            (str(link), "this is a device"), (str(tmp_path), "this is a directory"),
            (str(big), "file is larger than 1048576 bytes"),
            (str(latin1) + ":2", "byte 0xe9 is not UTF-8"),
            (str(tmp_path / "missing.yaml"), "no such file")]


def test_a_corpus_that_is_not_utf8_is_found_at_validate(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(b"plain text\n" * 100 + b"caf\xe9\n")
    sweep = tmp_path / "text.yaml"
    sweep.write_text(HEAD + f"  data: {{source: text, path: '{corpus}'}}\n")
    proc = orchestrator("validate", str(sweep), "--db", f"sqlite:///{tmp_path / 'no.db'}")
    assert proc.returncode == 2, proc.stderr
    assert f"{sweep}:4: base.data: data.path: '{corpus}' is not UTF-8 text" in proc.stderr
    assert not (tmp_path / "no.db").exists()


@pytest.mark.parametrize("command", ["validate", "submit"])
def test_non_regular_huge_and_undecodable_files(tmp_path: Path, db: tuple[str, Path, str],
                                                command: str) -> None:
    url, path, digest = db
    for where, msg in _special_files(tmp_path):
        file = where.rsplit(":", 1)[0] if where.endswith(":2") else where
        proc = orchestrator(command, file, "--db", url)
        assert proc.returncode == 2 and f"{where}: {msg}" in proc.stderr, proc.stderr[-2000:]
        assert "Traceback" not in proc.stderr
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
