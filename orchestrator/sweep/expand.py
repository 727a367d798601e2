"""SweepSpec -> [ExpandedRun]: variants x axes x seeds, filtered, validated, named.

Deterministic: variants in file order, then the axes' cartesian product in file order (the
last axis varies fastest), then seeds. Each row is base <- variant delta <- axis values
(a variant and an axis may not set the same key; spec.py rejects that), then the ``gate.*``
shorthand is resolved into ``model.gates``. Names are readable and unique:
``<variant>[-<axis label>...]-s<seed>``, e.g. ``sdpa_headwise-lr3e-3-s1`` (only axes with
more than one value appear).
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass, field
from typing import Any, cast

from pydantic import ValidationError

from contract.config import RunSpec
from contract.errors import SpecError, SpecIssue, pydantic_problems
from contract.yamlsrc import Source
from orchestrator.sweep import decide, gate_shorthand, keys
from orchestrator.sweep.spec import SweepSpec

MAX_RUNS = 5000
YPath = tuple[str | int, ...]


@dataclass(frozen=True)
class ExpandedRun:
    name: str
    variant: str
    seed: int
    axis_values: dict[str, Any]
    spec: RunSpec

    @functools.cached_property
    def fingerprint(self) -> str:
        return self.spec.fingerprint()


@dataclass
class _Row:
    """A RunSpec document under construction, with the YAML origin of each path."""

    doc: dict[str, Any]
    origins: dict[tuple[str | int, ...], YPath] = field(default_factory=dict)
    gate: dict[str, Any] = field(default_factory=dict)
    gate_origin: YPath | None = None


def expand(spec: SweepSpec, src: Source) -> list[ExpandedRun]:
    """All runs of the sweep; raises SpecError (file/line/key) on any invalid row."""
    base = _Row(doc={})
    issues: list[SpecIssue] = []
    for key, value in keys.flatten(spec.base).items():
        _apply(base, key, value, ("base", *keys.split(key)), src, issues)
    if spec.resources is not None:
        base.doc["resources"] = spec.resources.model_dump()
        base.origins[("resources",)] = ("resources",)
    axes = _axes(spec)
    # decide: every seed a row may get; the run room registers the ones it allocates
    seeds = spec.seeds or _seed_axis(spec) or (
        list(range(spec.decide.max_seeds)) if spec.decide is not None else [0])
    variants = list(spec.variants.items()) or [("base", {})]
    _check_size(spec, src, len(variants), axes, len(seeds))
    rules = _RuleUse(spec)
    per_run = _PerRun()
    runs = _rows(spec, src, base, variants, axes, seeds, rules, per_run)
    issues += per_run.issues()
    _check_rules_used(rules, src, issues)
    _check_unique(runs, src, issues)
    if spec.decide is not None and not issues:  # invalid rows are missing from ``runs``:
        issues += decide.row_issues(src, [r.variant for r in runs])  # not "no variant"
    if issues:
        raise SpecError(issues)
    return runs


def _check_size(spec: SweepSpec, src: Source, n_variants: int,
                axes: list[tuple[str, list[Any], YPath]], n_seeds: int) -> None:
    """Refuse more than MAX_RUNS rows, naming the factors and pointing at the largest."""
    seed_path: YPath = ("seeds",) if spec.seeds else \
        next((("axes", k) for k in ("seed", "seeds") if k in spec.axes), ())
    factors: list[tuple[int, str, YPath]] = [(n_variants, "variants", ("variants",))]
    factors += [(len(v), "lr_ladder.steps" if p == ("lr_ladder",) else f"axes.{k}", p)
                for k, v, p in axes]
    factors.append((n_seeds, "seeds", seed_path))
    total = math.prod(n for n, _, _ in factors)
    if total <= MAX_RUNS:
        return
    n, label, path = max(factors, key=lambda f: f[0])
    detail = " x ".join(f"{m} {lab}" for m, lab, _ in factors)
    raise SpecError([src.issue(path, f"the sweep expands to {total} runs ({detail}), more "
                                     f"than {MAX_RUNS}; reduce {label} ({n} values) or the "
                                     "other factors")])


class _PerRun:
    """Problems found while validating each run, de-duplicated: one per distinct problem
    (YAML place + message), counted over the runs that have it."""

    def __init__(self) -> None:
        self.seen: dict[SpecIssue, list[str]] = {}

    def add(self, issue: SpecIssue, run: str) -> None:
        self.seen.setdefault(issue, []).append(run)

    def issues(self) -> list[SpecIssue]:
        out = []
        for issue, names in self.seen.items():
            where = f"run {names[0]}" if len(names) == 1 else \
                f"in {len(names)} runs, e.g. {names[0]}"
            out.append(SpecIssue(issue.file, issue.line, issue.path,
                                 f"{issue.message} ({where})"))
        return out


def _axes(spec: SweepSpec) -> list[tuple[str, list[Any], YPath]]:
    out: list[tuple[str, list[Any], YPath]] = [
        (k, v, ("axes", k)) for k, v in spec.axes.items() if k not in ("seed", "seeds")]
    if spec.lr_ladder is not None:
        out.append(("train.lr", spec.lr_ladder.values(), ("lr_ladder",)))
    return out


def _seed_axis(spec: SweepSpec) -> list[int] | None:
    for k in ("seed", "seeds"):
        if k in spec.axes:
            return [int(s) for s in spec.axes[k]]
    return None


def _rows(spec: SweepSpec, src: Source, base: _Row, variants: list[tuple[str, dict[str, Any]]],
          axes: list[tuple[str, list[Any], YPath]], seeds: list[int], rules: _RuleUse,
          issues: _PerRun) -> list[ExpandedRun]:
    runs: list[ExpandedRun] = []
    for vname, delta in variants:
        for combo in itertools.product(*(range(len(v)) for _, v, _ in axes)):
            for seed in seeds:
                name = run_name(vname, axes, combo, seed)
                found: list[SpecIssue] = []
                row = _Row(_tree_copy(base.doc), dict(base.origins), dict(base.gate),
                           base.gate_origin)
                for key, value in keys.flatten(delta).items():
                    _apply(row, key, value, ("variants", vname, key), src, found)
                values = {}
                for (key, vals, ypath), i in zip(axes, combo):
                    ypath_i = (*ypath, i) if ypath[0] == "axes" else ypath
                    _apply(row, key, vals[i], ypath_i, src, found)
                    values[key] = vals[i]
                _resolve_gate(row, src, found)
                run = _finish(row, spec, src, vname, seed, name, values, rules, found)
                for issue in found:
                    issues.add(issue, name)
                if run is not None:
                    runs.append(run)
    return runs


def run_name(variant: str, axes: list[tuple[str, list[Any], YPath]], combo: tuple[int, ...],
             seed: int) -> str:
    labels = [axis_label(key, vals[i]) for (key, vals, _), i in zip(axes, combo)
              if len(vals) > 1]
    return "-".join([variant, *labels, f"s{seed}"])


def axis_label(key: str, value: Any) -> str:
    """'train.lr', 0.003 -> 'lr3e-3'; 'gate.position', 'G2' -> 'G2'; 'model.n_kv_head', 8 ->
    'n_kv_head8'; 'gate.input_dependent', False -> 'input_dependentFalse'."""
    last = str(keys.split(key)[-1])
    if (no_gate := gate_shorthand.label(key, value)) is not None:
        label = no_gate
    elif isinstance(value, str):
        label = value  # enum values read well alone: G2, headwise, rmsnorm
    elif isinstance(value, float) and math.isfinite(value):
        mant, exp = f"{value:.3e}".split("e")
        label = f"{last}{mant.rstrip('0').rstrip('.')}e{int(exp)}"
    else:
        label = f"{last}{value}"
    return "".join(c if c.isalnum() or c in "_.+-" else "_" for c in label)


def _apply(row: _Row, key: str, value: Any, ypath: YPath, src: Source,
           issues: list[SpecIssue]) -> None:
    if (gate_field := gate_shorthand.field_of(key)) is not None:
        row.gate[gate_field] = value
        row.gate_origin = row.gate_origin or ypath
        row.origins[("model", "gates", 0, gate_field)] = ypath
        return
    parts = keys.split(key)
    cur: Any = row.doc
    for i, part in enumerate(parts[:-1]):
        if isinstance(part, int):
            if not isinstance(cur, list) or part >= len(cur):
                n = len(cur) if isinstance(cur, list) else 0
                where = ".".join(map(str, parts[:i]))
                issues.append(src.issue(ypath, f"{where} has {n} element(s); index {part} "
                                               "does not exist"))
                return
            cur = cur[part]
        else:
            if not isinstance(cur.get(part), (dict, list)):
                cur[part] = {}
            cur = cur[part]
    leaf = parts[-1]
    old = cur[cast(int, leaf)] if isinstance(cur, list) else cur.get(leaf)
    cur[leaf] = _merge(old, value)
    row.origins[tuple(parts)] = ypath


def _merge(old: Any, new: Any) -> Any:
    """Dicts merge recursively; anything else replaces."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = dict(old)
        for k, v in new.items():
            out[k] = _merge(old.get(k), v)
        return out
    return _tree_copy(new)


def _tree_copy(v: Any) -> Any:
    """Copy of a parsed YAML value (dicts, lists, immutable scalars): ~5x faster than
    copy.deepcopy, which a 5,000-run grid calls once per run."""
    if isinstance(v, dict):
        return {k: _tree_copy(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_tree_copy(x) for x in v]
    return v


def _resolve_gate(row: _Row, src: Source, issues: list[SpecIssue]) -> None:
    """gate.* keys -> model.gates (orchestrator/sweep/gate_shorthand.py)."""
    if not row.gate:
        return
    problem = gate_shorthand.resolve(row.doc.setdefault("model", {}), row.gate)
    if problem is not None:
        issues.append(src.issue(row.gate_origin or (), problem))
        return
    row.origins.setdefault(("model", "gates"), row.gate_origin or ())


def _finish(row: _Row, spec: SweepSpec, src: Source, vname: str, seed: int, name: str,
            values: dict[str, Any], rules: _RuleUse, issues: list[SpecIssue]
            ) -> ExpandedRun | None:
    doc = {**row.doc, "name": name, "sweep": spec.name, "seed": seed}
    try:
        run_spec = RunSpec.model_validate(doc)
        view = run_spec.model_dump(mode="json")
    except ValidationError as exc:
        view = doc
        if rules.keep(vname, seed, view):
            below = _by_prefix(row.origins)  # once per run: 30k keys were 30k x 30k compares
            for problem in pydantic_problems(exc):
                ypath = _origin(row, problem.key, below)
                key = ".".join(map(str, problem.key))
                shown = ".".join(map(str, ypath)).endswith(key)  # the YAML key says it
                issues.append(src.issue(ypath, problem.text if shown
                                        else f"{problem.text} (key {key})"))
        return None
    if not rules.keep(vname, seed, view):
        return None
    return ExpandedRun(name, vname, seed, values, run_spec)


def _by_prefix(origins: dict[tuple[str | int, ...], YPath]
               ) -> dict[tuple[str | int, ...], list[YPath]]:
    """Every prefix of every set path -> the YAML paths below it, in the order they were set."""
    out: dict[tuple[str | int, ...], list[YPath]] = {}
    for p, y in origins.items():
        for i in range(len(p) + 1):
            out.setdefault(p[:i], []).append(y)
    return out


def _origin(row: _Row, loc: tuple[str | int, ...],
            index: dict[tuple[str | int, ...], list[YPath]]) -> YPath:
    """The YAML path that set ``loc``: a variant/axis key below it, else its nearest setter
    (``index``: _by_prefix of the row's origins)."""
    below = index.get(tuple(loc), [])
    if below:
        return ([y for y in below if y[0] != "base"] or below)[0]
    for cut in range(len(loc), 0, -1):
        if (y := row.origins.get(tuple(loc[:cut]))) is not None:
            return y
    return ("base",)


class _RuleUse:
    """include/exclude matching, remembering which rules matched something."""

    def __init__(self, spec: SweepSpec) -> None:
        self.include = spec.include
        self.exclude = spec.exclude
        self.inc_hits = [0] * len(spec.include)
        self.exc_hits = [0] * len(spec.exclude)

    def keep(self, variant: str, seed: int, view: dict[str, Any]) -> bool:
        inc = [matches(r, variant, seed, view) for r in self.include]
        exc = [matches(r, variant, seed, view) for r in self.exclude]
        for i, hit in enumerate(inc):
            self.inc_hits[i] += hit
        for i, hit in enumerate(exc):
            self.exc_hits[i] += hit
        return (not self.include or any(inc)) and not any(exc)


def matches(rule: dict[str, Any], variant: str, seed: int, view: dict[str, Any]) -> bool:
    """All keys of the rule match; a list value means any of its values."""
    for key, want in keys.flatten(rule).items():
        got = variant if key == "variant" else seed if key == "seed" else lookup(view, key)
        options = want if isinstance(want, list) else [want]
        if not any(_equal(got, w) for w in options):
            return False
    return True


def lookup(view: dict[str, Any], key: str) -> Any:
    """Value of a dotted key in a RunSpec dump; gate.* reads the single gate (or 'none')."""
    if gate_shorthand.is_shorthand(key):
        return gate_shorthand.read(view, key)
    parts = keys.split(key)
    cur: Any = view
    for p in parts:
        if isinstance(cur, dict):
            cur = cur.get(p)
        elif isinstance(cur, list) and isinstance(p, int) and p < len(cur):
            cur = cur[p]
        else:
            return None
    return cur


def _equal(got: Any, want: Any) -> bool:
    if gate_shorthand.means_no_gate(got, want):
        return True
    if isinstance(got, (int, float)) and isinstance(want, (int, float)) \
            and not isinstance(got, bool) and not isinstance(want, bool):
        return math.isclose(float(got), float(want), rel_tol=1e-9)
    return bool(got == want)


def _check_rules_used(use: _RuleUse, src: Source, issues: list[SpecIssue]) -> None:
    for section, hits in (("include", use.inc_hits), ("exclude", use.exc_hits)):
        for i, n in enumerate(hits):
            if n == 0:
                issues.append(src.issue((section, i), "this rule matches no run (a typo in a "
                                                      "key or value?)"))


def _check_unique(runs: list[ExpandedRun], src: Source, issues: list[SpecIssue]) -> None:
    by_fp: dict[str, str] = {}
    names: set[str] = set()
    for r in runs:
        if r.name in names:
            issues.append(src.issue(("variants",), f"two runs are named {r.name!r}"))
        names.add(r.name)
        if (other := by_fp.get(r.fingerprint)) is not None:
            issues.append(src.issue(("variants",), f"runs {other!r} and {r.name!r} have the "
                                                   "same configuration; exclude one of them"))
        by_fp.setdefault(r.fingerprint, r.name)
