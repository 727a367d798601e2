"""The lm-eval adapter and the shipped tiny tasks (docs/architecture.md, "Evaluation").

A tiny GatedLM trained for a few AdamW steps is scored through lm-evaluation-harness on the
shipped local tasks, fully offline, and every score is checked against the same quantity
computed directly from the model's logits.
"""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
import yaml

from contract.config import BenchmarkSpec, RunSpec
from tests.eval_fixtures import train_briefly
from trainer.benchmarks import BenchmarkError, map_results, prepare_task_dir, run_benchmarks
from trainer.lm_eval_adapter import GatedLMAdapter, cut_at_stops, eval_tokenizer
from trainer.model import build_model
from trainer.tasks import TASKS_DIR
from trainer.tokenizer import ByteTokenizer


def _train_tiny(steps: int = 25) -> tuple[torch.nn.Module, RunSpec]:
    spec = RunSpec(name="lm-eval-test", model={"preset": "tiny"},
                   train={"seq_len": 64, "batch_size": 8, "steps": steps, "warmup": 2})
    return train_briefly(spec).eval(), spec


pytestmark = pytest.mark.usefixtures("isolated_hf_cache")


@pytest.fixture(scope="module")
def trained() -> tuple[torch.nn.Module, RunSpec]:
    return _train_tiny()


@pytest.fixture(scope="module")
def adapter(trained) -> GatedLMAdapter:
    return GatedLMAdapter(trained[0], ByteTokenizer(), max_length=256, batch_size=3)


def _req(*args: object) -> SimpleNamespace:
    return SimpleNamespace(args=args)


@torch.no_grad()
def hand_loglikelihood(model: torch.nn.Module, context: str, continuation: str
                       ) -> tuple[float, bool]:
    """log p(continuation | context) straight from the logits (byte tokens, no batching)."""
    ctx, cont = list(context.encode()), list(continuation.encode())
    ids = torch.tensor([ctx + cont])  # (1, T)
    logp = F.log_softmax(model(ids[:, :-1]).logits[0].float(), dim=-1)  # (T-1, V)
    rows = logp[len(ctx) - 1:]  # the positions that predict the continuation
    target = torch.tensor(cont)
    return float(rows[torch.arange(len(cont)), target].sum()), bool(
        (rows.argmax(-1) == target).all())


@torch.no_grad()
def hand_greedy(model: torch.nn.Module, context: str, stop: str, max_new: int) -> str:
    ids = list(context.encode())
    new: list[int] = []
    for _ in range(max_new):
        new.append(int(model(torch.tensor([ids + new])).logits[0, -1].argmax()))
        if stop in bytes(new).decode(errors="replace"):
            break
    return bytes(new).decode(errors="replace").split(stop)[0]


# ---------------------------------------------------------------------- adapter vs hand
def test_loglikelihood_agrees_with_hand_computation(trained, adapter) -> None:
    model = trained[0]
    pairs = [("Question: The opposite of hot is\nAnswer:", " cold"),
             ("Question: A dog says\nAnswer:", " woof"),
             ("abc", "defghij"),
             ("Answer: ", "x")]  # trailing space moves into the continuation
    got = adapter.loglikelihood([_req(c, x) for c, x in pairs])
    for (context, cont), (lp, greedy) in zip(pairs, got):
        stripped = context.rstrip()
        want_lp, want_greedy = hand_loglikelihood(model, stripped, context[len(stripped):] + cont)
        assert lp == pytest.approx(want_lp, abs=1e-4)
        assert lp < 0
        assert greedy == want_greedy


def test_loglikelihood_is_exact_under_padding_and_batching(trained) -> None:
    # batch_size 1 (no padding) and 4 (right-padded mixed lengths) must give the same numbers
    pairs = [_req("a" * n, " tail") for n in (1, 9, 30, 3, 17)]
    one = GatedLMAdapter(trained[0], ByteTokenizer(), batch_size=1).loglikelihood(pairs)
    many = GatedLMAdapter(trained[0], ByteTokenizer(), batch_size=4).loglikelihood(pairs)
    assert [lp for lp, _ in one] == pytest.approx([lp for lp, _ in many], abs=1e-4)


def test_moe_models_are_scored_one_request_at_a_time() -> None:
    spec = RunSpec(name="moe", model={"preset": "tiny-moe"})
    torch.manual_seed(0)
    moe = build_model(spec.model).eval()
    lm = GatedLMAdapter(moe, ByteTokenizer(), batch_size=8)
    assert lm.batch_size == 1  # expert capacity is shared across a batch
    pairs = [_req("a" * n, " tail") for n in (1, 9, 30)]
    want = [hand_loglikelihood(moe, "a" * n, " tail")[0] for n in (1, 9, 30)]
    assert [lp for lp, _ in lm.loglikelihood(pairs)] == pytest.approx(want, abs=1e-4)


@torch.no_grad()
def test_is_greedy_true_exactly_for_the_models_own_argmax(trained, adapter) -> None:
    model, ctx = trained[0], list(b"The quick brown")
    cont: list[int] = []
    for _ in range(3):
        cont.append(int(model(torch.tensor([ctx + cont])).logits[0, -1].argmax()))
    other = [cont[0], cont[1], (cont[2] + 1) % 256]
    (_, greedy), (_, not_greedy) = adapter.score_tokens([(ctx, cont), (ctx, other)])
    assert greedy and not not_greedy


def test_rolling_loglikelihood_matches_hand_sum(trained) -> None:
    model, text = trained[0], "Rotary embeddings rotate queries and keys."
    # one window: the whole text conditioned on the prefix token ("\n" for bytes)
    lm = GatedLMAdapter(model, ByteTokenizer(), max_length=256)
    (got,) = lm.loglikelihood_rolling([_req(text)])
    want, _ = hand_loglikelihood(model, "\n", text)
    assert got == pytest.approx(want, abs=1e-3)
    # several windows of 8 tokens: every token is still scored exactly once
    short = GatedLMAdapter(model, ByteTokenizer(), max_length=8)
    (windowed,) = short.loglikelihood_rolling([_req(text)])
    assert math.isfinite(windowed) and windowed != pytest.approx(got, abs=1e-6)


def test_generate_until_is_greedy_and_cut_at_stop(trained, adapter) -> None:
    model = trained[0]
    context = "Copy: gate\nOutput:"
    got = adapter.generate_until([_req(context, {"until": ["e"], "max_gen_toks": 10})])[0]
    assert "e" not in got
    assert got == hand_greedy(model, context, stop="e", max_new=10)
    free = adapter.generate_until([_req(context, {"until": [], "max_gen_toks": 6})])[0]
    assert len(free.encode(errors="replace")) >= 1


def test_cut_at_stops_takes_the_earliest() -> None:
    assert cut_at_stops("abc\n\nQ: x", ["Q:", "\n\n"]) == "abc"
    assert cut_at_stops("abc", ["zz", ""]) == "abc"


def test_byte_tokenizer_gets_a_decode() -> None:
    tok = eval_tokenizer(ByteTokenizer())
    assert tok.decode(tok.encode("gate é")) == "gate é"
    assert tok.decode([104, 105, 300]) == "hi"  # ids past the byte range are dropped
    assert tok.vocab_size == 256  # the wrapper forwards the tokenizer's attributes


# ---------------------------------------------------------------------- tasks end to end
def _mc_docs() -> list[dict]:
    import json

    return [json.loads(line) for line in (TASKS_DIR / "tiny_mc.jsonl").read_text().splitlines()]


def test_tiny_tasks_end_to_end_agree_with_hand_scores(trained) -> None:
    model = trained[0]
    specs = [BenchmarkSpec(task="gatesweep_tiny_mc", limit=8),
             BenchmarkSpec(task="gatesweep_tiny_gen", limit=4),
             BenchmarkSpec(task="gatesweep_tiny_ppl", limit=3)]
    mc, gen, ppl = run_benchmarks(model, ByteTokenizer(), specs, max_length=256)

    # multiple choice: acc = share of docs whose label has the highest log-likelihood
    docs = _mc_docs()[:8]
    hits = []
    for doc in docs:
        # lm-eval joins context and choice with its target_delimiter " "
        scores = [hand_loglikelihood(model, f"Question: {doc['question']}\nAnswer:", " " + c)[0]
                  for c in doc["choices"]]
        hits.append(max(range(4), key=scores.__getitem__) == doc["label"])
    assert mc.metric == "acc" and mc.n_samples == 8
    assert mc.value == pytest.approx(sum(hits) / len(hits))
    assert mc.summaries()["bench/gatesweep_tiny_mc"] == mc.value
    assert 0.0 <= mc.summaries()["bench/gatesweep_tiny_mc/acc_norm"] <= 1.0

    # generation: exact match of the greedy copy, whitespace-trimmed
    import json
    gdocs = [json.loads(x) for x in (TASKS_DIR / "tiny_gen.jsonl").read_text().splitlines()][:4]
    ok = [hand_greedy(model, f"Copy: {d['word']}\nOutput:", "\n", 12).strip() == d["answer"]
          for d in gdocs]
    assert gen.metric == "exact_match,strip" and gen.n_samples == 4
    assert gen.value == pytest.approx(sum(ok) / len(ok))

    # rolling PPL: bits per byte = -sum log p / (bytes * ln 2) over the documents
    texts = [json.loads(x)["text"] for x in
             (TASKS_DIR / "tiny_ppl.jsonl").read_text().splitlines()][:3]
    total = sum(hand_loglikelihood(model, "\n", t)[0] for t in texts)
    n_bytes = sum(len(t.encode()) for t in texts)
    bpb = ppl.summaries()["bench/gatesweep_tiny_ppl/bits_per_byte"]
    assert bpb == pytest.approx(-total / n_bytes / math.log(2), rel=1e-4)
    assert ppl.metric == "word_perplexity"


def test_fewshot_prompts_run(trained) -> None:
    (res,) = run_benchmarks(trained[0], ByteTokenizer(),
                            [BenchmarkSpec(task="gatesweep_tiny_mc", num_fewshot=2, limit=3)],
                            max_length=64)  # 2-shot prompts are longer: left-truncated
    assert res.num_fewshot == 2 and res.n_samples == 3 and 0.0 <= res.value <= 1.0
    assert res.artifact()["num_fewshot"] == 2


# ---------------------------------------------------------------------- task files
def test_prepare_task_dir_makes_data_paths_absolute(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "data.jsonl").write_text('{"q": "x"}\n')
    (src / "t.yaml").write_text(
        "task: t\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: data.jsonl\n"
        "process_docs: !function utils.process\nabs_kept: 1\n")
    (src / "u.yaml").write_text("task: u\ndataset_kwargs:\n  data_files: /abs/file.jsonl\n")
    out = prepare_task_dir(src, tmp_path / "out")
    text = (out / "t.yaml").read_text()
    assert "!function" in text and "utils.process" in text  # custom tags survive
    doc = yaml.safe_load(text.replace("!function ", ""))
    assert doc["dataset_kwargs"]["data_files"]["test"] == str((src / "data.jsonl").resolve())
    assert yaml.safe_load((out / "u.yaml").read_text())["dataset_kwargs"]["data_files"] \
        == "/abs/file.jsonl"
    with pytest.raises(BenchmarkError, match="include_path"):
        prepare_task_dir(tmp_path / "missing", tmp_path / "out2")


def test_shipped_tasks_are_valid_and_local() -> None:
    from trainer.tasks import TINY_TASKS

    docs = {p.name: yaml.safe_load(p.read_text()) for p in TASKS_DIR.glob("*.yaml")}
    assert {d["task"] for d in docs.values()} == set(TINY_TASKS)
    for doc in docs.values():
        assert doc["dataset_path"] == "json"
        assert (TASKS_DIR / doc["dataset_kwargs"]["data_files"]).is_file()
    assert docs["gatesweep_tiny_hellaswag.yaml"]["include"] == "lm_eval:hellaswag/hellaswag.yaml"


def test_lm_eval_includes_resolve_to_the_installed_tasks(tmp_path: Path) -> None:
    import lm_eval.tasks

    out = prepare_task_dir(TASKS_DIR, tmp_path / "out")
    doc = yaml.safe_load((out / "gatesweep_tiny_hellaswag.yaml").read_text())
    want = Path(lm_eval.tasks.__file__).parent / "hellaswag" / "hellaswag.yaml"
    assert Path(doc["include"]) == want.resolve() and want.is_file()
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "t.yaml").write_text("include: lm_eval:nope/nope.yaml\ntask: t\n")
    with pytest.raises(BenchmarkError, match="lm_eval:nope/nope.yaml"):
        prepare_task_dir(bad, tmp_path / "bad_out")


def test_builtin_hellaswag_prompts_on_local_data_match_hand_scores(trained) -> None:
    import json
    import re

    model = trained[0]
    (res,) = run_benchmarks(model, ByteTokenizer(),
                            [BenchmarkSpec(task="gatesweep_tiny_hellaswag")], max_length=256)

    def pre(text: str) -> str:  # lm-eval's hellaswag preprocess, restated
        text = text.strip().replace(" [title]", ". ")
        return re.sub("\\[.*?\\]", "", text).replace("  ", " ")

    hits = []
    for line in (TASKS_DIR / "tiny_hellaswag.jsonl").read_text().splitlines():
        d = json.loads(line)
        query = pre(d["activity_label"] + ": " + d["ctx_a"] + " " + d["ctx_b"].capitalize())
        scores = [hand_loglikelihood(model, query, " " + pre(e))[0] for e in d["endings"]]
        hits.append(max(range(4), key=scores.__getitem__) == int(d["label"]))
    assert res.n_samples == 6 and res.metric == "acc"
    assert res.value == pytest.approx(sum(hits) / 6)


def test_local_task_with_missing_data_names_the_task(trained, tmp_path: Path) -> None:
    (tmp_path / "gone.yaml").write_text(
        "task: gone_task\ndataset_path: json\ndataset_kwargs:\n  data_files: nothere.jsonl\n"
        "output_type: multiple_choice\ntest_split: train\ndoc_to_text: '{{q}}'\n"
        "doc_to_choice: ['a', 'b']\ndoc_to_target: 0\n")
    spec = BenchmarkSpec(task="gone_task", include_path=str(tmp_path))
    with pytest.raises(BenchmarkError, match="gone_task"):
        run_benchmarks(trained[0], ByteTokenizer(), [spec])


def test_a_malformed_task_fails_alone_with_its_name(trained, tmp_path: Path) -> None:
    from trainer.benchmarks import iter_benchmarks

    (tmp_path / "data.jsonl").write_text('{"q": "x"}\n')
    (tmp_path / "broken.yaml").write_text(
        "task: broken_task\ndataset_path: json\ndataset_kwargs:\n  data_files: data.jsonl\n"
        "output_type: multiple_choice\ntest_split: train\ndoc_to_text: '{{q}}'\n"
        "doc_to_choice: '{{no_such_field}}'\ndoc_to_target: 0\n")
    specs = [BenchmarkSpec(task="broken_task", include_path=str(tmp_path)),
             BenchmarkSpec(task="gatesweep_tiny_mc", limit=2)]
    (b1, r1), (b2, r2) = iter_benchmarks(trained[0], ByteTokenizer(), specs)
    assert isinstance(r1, BenchmarkError) and "broken_task" in str(r1)
    assert not isinstance(r2, BenchmarkError) and r2.n_samples == 2


# ---------------------------------------------------------------------- result mapping
def test_map_results_names_every_metric_and_picks_the_first_listed() -> None:
    results = {
        "results": {"gsm8k": {"alias": "gsm8k", "exact_match,strict-match": 0.25,
                              "exact_match_stderr,strict-match": "N/A",
                              "exact_match,flexible-extract": 0.5}},
        "configs": {"gsm8k": {"metric_list": [{"metric": "exact_match"}]}},
        "n-samples": {"gsm8k": {"original": 1319, "effective": 4}},
    }
    res = map_results("gsm8k", results, BenchmarkSpec(task="gsm8k", num_fewshot=5, limit=4))
    assert res.metric == "exact_match,strict-match" and res.value == 0.25
    assert res.summaries() == {"bench/gsm8k": 0.25, "bench/gsm8k/exact_match": 0.25,
                               "bench/gsm8k/exact_match/flexible-extract": 0.5}
    assert res.n_samples == 4 and res.artifact()["limit"] == 4

    mc = {"results": {"t": {"acc,none": 0.5, "acc_norm,none": 0.75}},
          "configs": {"t": {"metric_list": [{"metric": "acc_norm"}, {"metric": "acc"}]}}}
    res = map_results("t", mc, BenchmarkSpec(task="t"))
    assert (res.metric, res.value) == ("acc_norm", 0.75)
    with pytest.raises(BenchmarkError, match="no results"):
        map_results("other", mc, BenchmarkSpec(task="other"))


@pytest.mark.slow
def test_builtin_task_offline_names_its_dataset(trained) -> None:
    # builds lm-eval's full task index (~15 s); hellaswag's data is not on this machine
    with pytest.raises(BenchmarkError, match=r"hellaswag.*Rowan/hellaswag"):
        run_benchmarks(trained[0], ByteTokenizer(), [BenchmarkSpec(task="hellaswag", limit=1)])
    with pytest.raises(BenchmarkError, match="unknown lm-eval task 'no_such_task_xyz'"):
        run_benchmarks(trained[0], ByteTokenizer(), [BenchmarkSpec(task="no_such_task_xyz")])
