"""lm-evaluation-harness benchmarks for a trained model.

``run_benchmarks(model, tokenizer, spec.eval.benchmarks)`` runs each ``BenchmarkSpec`` through
``lm_eval.simple_evaluate`` with our ``GatedLMAdapter`` and returns one ``BenchResult`` per task.

Summary names (documented in docs/architecture.md, "Metric names"):
- ``bench/<task>``: the task's primary metric, the first entry of its ``metric_list`` (acc for
  multiple choice, exact_match for generation, word_perplexity for rolling PPL), under the
  task's first filter;
- ``bench/<task>/<metric>`` for every metric the task reports (``/<filter>`` appended when
  the filter is not the first one, e.g. gsm8k's ``flexible-extract``).
Which metric ``bench/<task>`` holds is recorded in ``BenchResult.metric`` and in the
``benchmark`` artifact, alongside shots, limit and sample counts.

Tasks are looked up first among the shipped tiny tasks (trainer/tasks) and the spec's
``include_path`` (local YAML + JSON/JSONL; relative ``data_files`` are resolved against the
YAML's directory), then among lm-eval's built-in tasks. A built-in task whose dataset is not
on disk fails offline; ``BenchmarkError`` then names the task and the dataset it needs.
"""

from __future__ import annotations

import functools
import logging
import math
import re
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from torch import nn

from contract.config import BenchmarkSpec
from contract.metrics import bench as bench_name
from trainer.tasks import TASKS_DIR

log = logging.getLogger(__name__)

_OFFLINE_MARKERS = ("OfflineModeIsEnabled", "ConnectionError", "LocalEntryNotFoundError",
                    "DatasetNotFoundError", "offline mode", "Couldn't reach")


class BenchmarkError(RuntimeError):
    """A benchmark could not run; the message names the task and what it needs."""


@dataclass(frozen=True)
class BenchResult:
    task: str
    metric: str  # the metric behind ``bench/<task>``, e.g. "acc" or "exact_match,strip"
    value: float
    metrics: dict[str, float]  # every reported metric, keyed by its summary name
    num_fewshot: int
    limit: int | None
    n_samples: int
    extra: dict[str, Any] = field(default_factory=dict)

    def summaries(self) -> dict[str, float]:
        return {bench_name(self.task): self.value, **self.metrics}

    def artifact(self) -> dict[str, Any]:
        return {"task": self.task, "metric": self.metric, "value": self.value,
                "metrics": self.metrics, "num_fewshot": self.num_fewshot, "limit": self.limit,
                "n_samples": self.n_samples, **self.extra}


# ---------------------------------------------------------------------- local task files
class _Tagged:
    """A YAML node with a custom tag (``!function utils.f``), kept verbatim on rewrite."""

    def __init__(self, tag: str, value: Any) -> None:
        self.tag, self.value = tag, value


class _Loader(yaml.SafeLoader):
    pass


class _Dumper(yaml.SafeDumper):
    pass


_Loader.add_multi_constructor("!", lambda loader, suffix, node: _Tagged(
    "!" + suffix, loader.construct_scalar(node)))
_Dumper.add_representer(_Tagged, lambda dumper, t: dumper.represent_scalar(t.tag, t.value))


def _absolute_data_files(value: Any, base: Path) -> Any:
    """``data_files`` (str | list | {split: str | list}) with relative paths made absolute."""
    if isinstance(value, str):
        return value if Path(value).is_absolute() else str((base / value).resolve())
    if isinstance(value, list):
        return [_absolute_data_files(v, base) for v in value]
    if isinstance(value, dict):
        return {k: _absolute_data_files(v, base) for k, v in value.items()}
    return value


LM_EVAL_PREFIX = "lm_eval:"  # include: lm_eval:hellaswag/hellaswag.yaml -> the installed copy


def _lm_eval_tasks_dir() -> Path:
    import lm_eval.tasks

    return Path(lm_eval.tasks.__file__).resolve().parent


def _absolute_include(value: Any) -> Any:
    if isinstance(value, list):
        return [_absolute_include(v) for v in value]
    if isinstance(value, str) and value.startswith(LM_EVAL_PREFIX):
        target = _lm_eval_tasks_dir() / value[len(LM_EVAL_PREFIX):]
        if not target.is_file():
            raise BenchmarkError(f"include: {value!r}: no such built-in lm-eval task file "
                                 f"({target})")
        return str(target)
    return value


def _rewrite_yaml(path: Path, base: Path) -> None:
    """Make ``data_files`` (relative to ``base``) and ``lm_eval:`` includes absolute."""
    text = path.read_text()
    if "data_files" not in text and LM_EVAL_PREFIX not in text:
        return
    doc = yaml.load(text, Loader=_Loader)  # noqa: S506 (SafeLoader + verbatim tags)
    if not isinstance(doc, dict):
        return
    kwargs = doc.get("dataset_kwargs")
    if isinstance(kwargs, dict) and "data_files" in kwargs:
        kwargs["data_files"] = _absolute_data_files(kwargs["data_files"], base)
    if "include" in doc:
        doc["include"] = _absolute_include(doc["include"])
    path.write_text(yaml.dump(doc, Dumper=_Dumper, sort_keys=False))


def prepare_task_dir(src: Path, dest: Path) -> Path:
    """Copy task directory ``src`` to ``dest`` with absolute ``data_files`` and includes.

    lm-eval hands ``dataset_kwargs.data_files`` to ``datasets.load_dataset``, which resolves
    it against the working directory, and resolves ``include:`` against the YAML's own
    directory; shipped tasks keep data paths relative to their YAML and may include a
    built-in config as ``lm_eval:<dir>/<file>.yaml`` (its prompt logic, our local data).
    """
    src = Path(src).expanduser().resolve()
    if not src.is_dir():
        raise BenchmarkError(f"eval.benchmarks[].include_path: {src} is not a directory of "
                             "lm-eval task YAML files")
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for path in sorted(Path(dest).rglob("*.yaml")):
        _rewrite_yaml(path, src / path.parent.relative_to(dest))
    return Path(dest)


# ---------------------------------------------------------------------- result mapping
def _metric_order(task_config: dict[str, Any] | None) -> list[str]:
    return [m["metric"] for m in (task_config or {}).get("metric_list") or []
            if isinstance(m.get("metric"), str)]


def map_results(task: str, results: dict[str, Any], bench: BenchmarkSpec) -> BenchResult:
    """One task's entry of ``simple_evaluate``'s output -> a ``BenchResult``."""
    # a group (mmlu) is reported under "results" and, in some lm-eval versions, "groups"
    row = results["results"].get(task) or results.get("groups", {}).get(task)
    if row is None:
        raise BenchmarkError(f"bench task {task!r}: lm-eval returned no results for it "
                             f"(got {sorted(results['results'])})")
    values = {k: float(v) for k, v in row.items()
              if "," in k and "_stderr" not in k and isinstance(v, (int, float))}
    if not values:
        raise BenchmarkError(f"bench task {task!r}: no numeric metric in lm-eval's results")
    filters = list(dict.fromkeys(k.split(",", 1)[1] for k in values))
    order = _metric_order(results.get("configs", {}).get(task))
    keys = sorted(values, key=lambda k: (filters.index(k.split(",", 1)[1]),
                                         _rank(k.split(",", 1)[0], order)))
    primary = keys[0]
    metrics = {}
    for key in keys:
        name, filt = key.split(",", 1)
        metrics[bench_name(task, name, None if filt == filters[0] else filt)] = values[key]
    n = results.get("n-samples", {}).get(task, {}).get("effective", 0)
    return BenchResult(task=task, metric=primary.removesuffix(",none"), value=values[primary],
                       metrics=metrics, num_fewshot=bench.num_fewshot, limit=bench.limit,
                       n_samples=int(n))


def _rank(name: str, order: list[str]) -> int:
    return order.index(name) if name in order else len(order)


# ---------------------------------------------------------------------- running
def _task_manager(dirs: list[Path], task: str) -> Any:
    from lm_eval.tasks import TaskManager

    local = TaskManager(include_path=[str(d) for d in dirs], include_defaults=False)
    if task in local.all_tasks:
        return local
    full = _full_task_manager(tuple(str(d) for d in dirs))
    if task not in full.all_tasks:
        raise BenchmarkError(f"eval.benchmarks[].task: unknown lm-eval task {task!r} (not in "
                             f"{', '.join(map(str, dirs))} nor among lm-eval's built-in tasks)")
    return full


@functools.lru_cache(maxsize=4)
def _full_task_manager(dirs: tuple[str, ...]) -> Any:
    """lm-eval's built-in index plus ``dirs``: ~14 s to build, so once per process."""
    from lm_eval.tasks import TaskManager

    return TaskManager(include_path=list(dirs), include_defaults=True)


def _is_offline_error(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        text = f"{type(seen).__name__}: {seen}"
        if any(m in text for m in _OFFLINE_MARKERS):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _dataset_of(tm: Any, task: str, exc: BaseException) -> str:
    """The dataset a task reads, from its YAML (includes resolved), else from the error."""
    try:
        from lm_eval.tasks._yaml_loader import load_yaml

        entry = tm.task_index.get(task)
        cfg = load_yaml(entry.yaml_path, resolve_func=False) if entry and entry.yaml_path \
            else (entry.cfg or {})
        if cfg.get("dataset_path"):
            name = cfg.get("dataset_name")
            return repr(cfg["dataset_path"] + (f"/{name}" if name else ""))
    except Exception:  # noqa: BLE001 (best effort: fall back to the error's text)
        pass
    found = re.search(r"'([^']+/[^']+)'", str(exc)) or re.search(
        r"'([^']+/[^']+)'", str(exc.__cause__ or exc.__context__ or ""))
    return repr(found.group(1)) if found else "(see the cause below)"


def run_benchmark(lm: Any, bench: BenchmarkSpec, task_dirs: list[Path]) -> BenchResult:
    """One ``BenchmarkSpec`` through ``simple_evaluate``; raises ``BenchmarkError``."""
    import lm_eval

    tm = _task_manager(task_dirs, bench.task)
    try:
        results = lm_eval.simple_evaluate(
            model=lm, tasks=[bench.task], task_manager=tm, num_fewshot=bench.num_fewshot,
            limit=bench.limit, bootstrap_iters=0, log_samples=False, random_seed=0,
            numpy_random_seed=0, torch_random_seed=0, fewshot_random_seed=0)
    except FileNotFoundError as exc:  # a local task's data_files
        raise BenchmarkError(f"bench task {bench.task!r}: its data file is missing: {exc}") from exc
    except Exception as exc:
        if _is_offline_error(exc):
            raise BenchmarkError(
                f"bench task {bench.task!r} needs the dataset {_dataset_of(tm, bench.task, exc)} "
                "which is not available offline; download it where there is network (or point "
                "a local task YAML at a JSONL copy via eval.benchmarks[].include_path)") from exc
        raise
    result = map_results(bench.task, results, bench)
    if not all(math.isfinite(v) for v in result.metrics.values()):
        log.warning("bench task %s returned a non-finite metric: %s", bench.task, result.metrics)
    return result


def iter_benchmarks(model: nn.Module, tokenizer: Any, benchmarks: Sequence[BenchmarkSpec], *,
                    device: str = "cpu", max_length: int = 1024, batch_size: int = 8
                    ) -> Iterator[tuple[BenchmarkSpec, BenchResult | BenchmarkError]]:
    """Each benchmark's result, or the ``BenchmarkError`` that stopped it, in order.

    Any exception inside lm-eval (a malformed local task, say) becomes that task's
    ``BenchmarkError``, so one bad task does not lose the others' scores.
    """
    try:
        from trainer.lm_eval_adapter import GatedLMAdapter
    except ImportError as exc:  # lm-eval is the optional extra "eval"
        raise BenchmarkError("eval.benchmarks needs lm-evaluation-harness: "
                             "pip install 'gatesweep[eval]'") from exc
    lm = GatedLMAdapter(model, tokenizer, device=device, max_length=max_length,
                        batch_size=batch_size)
    with tempfile.TemporaryDirectory(prefix="gatesweep-bench-") as tmp:
        shipped = prepare_task_dir(TASKS_DIR, Path(tmp) / "shipped")
        prepared: dict[str, Path] = {}
        for bench in benchmarks:
            try:
                dirs = [shipped]
                if bench.include_path:
                    if bench.include_path not in prepared:
                        dest = Path(tmp) / f"include_{len(prepared)}"
                        prepared[bench.include_path] = prepare_task_dir(
                            Path(bench.include_path), dest)
                    dirs.append(prepared[bench.include_path])
                result: BenchResult | BenchmarkError = run_benchmark(lm, bench, dirs)
            except BenchmarkError as exc:
                result = exc
            except Exception as exc:  # noqa: BLE001 (a bad task YAML must not sink the run)
                log.exception("bench task %s failed", bench.task)
                result = BenchmarkError(f"bench task {bench.task!r} failed in lm-eval: "
                                        f"{type(exc).__name__}: {exc}")
                result.__cause__ = exc
            yield bench, result


def run_benchmarks(model: nn.Module, tokenizer: Any, benchmarks: Sequence[BenchmarkSpec],
                   **kwargs: Any) -> list[BenchResult]:
    """Every benchmark in order; the first ``BenchmarkError`` raises."""
    out = []
    for _, res in iter_benchmarks(model, tokenizer, benchmarks, **kwargs):
        if isinstance(res, BenchmarkError):
            raise res
        out.append(res)
    return out
