"""The sweep file: YAML -> validated ``SweepSpec`` (expanded by orchestrator/sweep/expand.py).

```yaml
name: gates-toy                       # [A-Za-z0-9_.-]; also the storage folder name
description: ...
base: {model: {preset: tiny}, train: {steps: 100}}   # a partial RunSpec
variants:                             # named rows, each a delta on base (dotted keys)
  baseline: {}
  sdpa_headwise: {gate.position: G1, gate.granularity: headwise}
  kv_heads_x2: {model.n_kv_head: 4}
axes: {train.lr: [1e-3, 3e-3]}        # a grid crossed with the variants
lr_ladder: {min: 1e-3, max: 1e-2, steps: 4}   # geometric shorthand for axes train.lr
seeds: [0, 1]
include: [{variant: baseline}]        # keep rows matching any rule (all keys of a rule match)
exclude: [{variant: sdpa_headwise, train.lr: 1e-3}]   # then drop rows matching any rule
resources: {cpus: 1}                  # per trial (merged over base.resources)
retries: 0                            # Tune FailureConfig(max_failures=...)
max_concurrent: 2                     # default: what the cluster's CPUs/GPUs allow
cached_by: config                     # what "already ran" means (CACHED_BY)
decide: {margin: 0.01, max_seeds: 20}  # seeds until rows decide (orchestrator/sweep/decide.py)
```
Errors name FILE:LINE and the key path and say what was expected; nothing is written or
scheduled for an invalid file.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import Field, ValidationError, field_validator, model_validator

from contract.config import Resources, Seed, StrictModel
from contract.errors import SpecError, SpecIssue, UserError, pydantic_problems
from contract.yamlsrc import Source, load_file, load_text
from orchestrator.sweep import gate_shorthand, keys
from orchestrator.sweep.decide import DecideSpec

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
MAX_AXIS_VALUES = 1000
MAX_LR = 10.0  # beyond this no optimiser setting trains: a typo (1e2 for 1e-2), not a ladder
MAX_LR_DECADES = 6  # lr_ladder.max / lr_ladder.min at most 1e6
_BASE_KEYS = ("model", "train", "data", "eval", "resources")
# What makes a finished run a cache hit for `submit`: the same config (its fingerprint; the
# default), or the same config trained by the current code version too
# (contract.provenance.CodeVersion.key), so a trainer fix retrains the runs the old code made.
# Fingerprints are the same either way.
CachedBy = Literal["config", "config_and_code"]
CACHED_BY: tuple[str, ...] = get_args(CachedBy)


class LrLadder(StrictModel):
    """``steps`` learning rates spaced geometrically from ``min`` to ``max`` (inclusive)."""
    min: float = Field(gt=0, le=MAX_LR)
    max: float = Field(gt=0, le=MAX_LR)
    steps: int = Field(ge=2, le=MAX_AXIS_VALUES)

    @model_validator(mode="after")
    def _order(self) -> LrLadder:
        if self.min >= self.max:
            raise ValueError(f"lr_ladder.min ({self.min}) must be below lr_ladder.max "
                             f"({self.max})")
        if self.max / self.min > 10 ** MAX_LR_DECADES:
            raise ValueError(f"lr_ladder spans {math.log10(self.max / self.min):.0f} decades "
                             f"({self.min:g} to {self.max:g}); expected at most "
                             f"{MAX_LR_DECADES}")
        distinct = len(set(self.values()))
        if distinct < self.steps:
            raise ValueError(f"lr_ladder.steps: {self.steps} steps from {self.min:g} to "
                             f"{self.max:g} give only {distinct} distinct learning rates at 4 "
                             "significant digits; use fewer steps or a wider range")
        return self

    def values(self) -> list[float]:
        ratio = math.log(self.max / self.min) / (self.steps - 1)
        # Rounded to 4 significant digits so names and fingerprints are stable and readable.
        return [float(f"{self.min * math.exp(ratio * i):.4g}") for i in range(self.steps)]


class SweepSpec(StrictModel):
    """The sweep file; its numbers obey the same rule as the RunSpec's (contract.config)."""
    name: str = Field(pattern=NAME_PATTERN, max_length=100)
    description: str = ""
    base: dict[str, Any] = Field(default_factory=dict)
    variants: dict[str, dict[str, Any]] = Field(default_factory=dict)
    axes: dict[str, Annotated[list[Any], Field(min_length=1, max_length=MAX_AXIS_VALUES)]] = \
        Field(default_factory=dict)
    lr_ladder: LrLadder | None = None
    seeds: list[Seed] | None = Field(default=None, max_length=MAX_AXIS_VALUES)
    include: list[dict[str, Any]] = Field(default_factory=list)
    exclude: list[dict[str, Any]] = Field(default_factory=list)
    resources: Resources | None = None
    retries: int = Field(default=0, ge=0, le=100)
    max_concurrent: int | None = Field(default=None, ge=1, le=100_000)
    cached_by: CachedBy = "config"
    decide: DecideSpec | None = None  # add seeds until rows decide (orchestrator/sweep/decide.py)

    @field_validator("variants")
    @classmethod
    def _variant_names(cls, v: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        for name in v:
            if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.]*", name):  # "$" allows a final \n
                raise ValueError(f"variant name {name!r} must match [A-Za-z0-9][A-Za-z0-9_.]* "
                                 "('-' separates the parts of run names)")
        return v

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, v: list[int] | None) -> list[int] | None:
        if v is not None and (not v or len(set(v)) != len(v)):
            raise ValueError("seeds must be a non-empty list of distinct integers")
        return v


def parse_source(src: Source) -> SweepSpec:
    """Validate the top-level structure; key-path errors carry the YAML line."""
    if not isinstance(src.data, dict):
        raise SpecError([src.issue((), "expected a mapping at the top level "
                                       "(name, base, variants, axes, ...)")])
    try:
        spec = SweepSpec.model_validate(src.data)
    except ValidationError as exc:
        raise SpecError(pydantic_issues(src, exc, ())) from None
    _check_keys(src, spec)
    return spec


def pydantic_issues(src: Source, exc: ValidationError,
                    prefix: tuple[str | int, ...]) -> list[SpecIssue]:
    """Pydantic errors (contract.errors.pydantic_problems) as FILE:LINE KEY issues."""
    return [src.issue((*prefix, *p.path), p.text) for p in pydantic_problems(exc)]


def _check_keys(src: Source, spec: SweepSpec) -> None:
    """Every dotted key in variants/axes/rules must address a RunSpec field."""
    issues: list[SpecIssue] = [
        src.issue(("base", k), f"unknown key {k!r} in base; expected one of: "
                  + ", ".join(_BASE_KEYS)) for k in spec.base if k not in _BASE_KEYS]
    for vname, delta in spec.variants.items():
        for key in keys.flatten(delta):
            if (msg := keys.check_key(key)) is not None:
                issues.append(src.issue(("variants", vname, *_yaml_path(src, ("variants", vname),
                                                                         key)), msg))
    for key in spec.axes:
        if key in ("seed", "seeds"):
            issues.extend(_seed_axis_issues(src, key, spec.axes[key]))
            continue
        if (msg := keys.check_key(key)) is not None:
            issues.append(src.issue(("axes", key), msg))
    for section, rules in (("include", spec.include), ("exclude", spec.exclude)):
        for i, rule in enumerate(rules):
            if not rule:
                issues.append(src.issue((section, i), "an empty rule matches every run"))
            for key in keys.flatten(rule):
                if key in ("variant", "seed"):
                    continue
                if (msg := keys.check_key(key)) is not None:
                    issues.append(src.issue((section, i, key), msg))
    _check_conflicts(src, spec, issues)
    if issues:
        raise SpecError(issues)


class _Seeds(StrictModel):
    seeds: list[Seed]


def _seed_axis_issues(src: Source, key: str, values: list[Any]) -> list[SpecIssue]:
    """axes.seed values obey the same rule as ``seeds`` (contract.config.Seed): distinct
    64-bit integers >= 0."""
    try:
        _Seeds(seeds=values)
    except ValidationError as exc:
        return [src.issue(("axes", key, *p.path[1:]), p.text) for p in pydantic_problems(exc)]
    if len(set(values)) != len(values):
        return [src.issue(("axes", key), "seeds must be distinct")]
    return []


def _yaml_path(src: Source, prefix: tuple[str | int, ...], dotted: str) -> tuple[str, ...]:
    """The YAML path of a flattened key: the dotted key itself, or its nested spelling."""
    if (*prefix, dotted) in src.lines:
        return (dotted,)
    return tuple(str(p) for p in keys.split(dotted))


def _check_conflicts(src: Source, spec: SweepSpec, issues: list[SpecIssue]) -> None:
    axis_keys = [k for k in spec.axes if k not in ("seed", "seeds")]
    if spec.lr_ladder is not None and "train.lr" in axis_keys:
        issues.append(src.issue(("lr_ladder",), "give either lr_ladder or axes.train.lr, "
                                                "not both"))
    if spec.seeds is not None and ({"seed", "seeds"} & set(spec.axes)):
        issues.append(src.issue(("seeds",), "give either seeds or axes.seed, not both"))
    if spec.decide is not None:
        for key in [k for k in ("seeds",) if spec.seeds is not None] + \
                [k for k in ("seed", "seeds") if k in spec.axes]:
            where = (key,) if key == "seeds" else ("axes", key)
            issues.append(src.issue(where, "decide: allocates the seeds itself (first_seeds, "
                                           "then more where a row is undecided); remove "
                                           f"{'.'.join(where)}"))
    if "resources" in spec.base and spec.resources is not None:
        issues.append(src.issue(("resources",), "give either resources or base.resources, "
                                                "not both"))
    for vname, delta in spec.variants.items():
        for key in keys.flatten(delta):
            for ax in axis_keys + (["train.lr"] if spec.lr_ladder else []):
                if _overlaps(key, ax):
                    issues.append(src.issue(("variants", vname), f"variant sets {key!r}, which "
                                            f"the axis {ax!r} also sets; use one or the other"))


def _overlaps(a: str, b: str) -> bool:
    """True if setting key a and key b would write the same field (gate.* = model.gates)."""
    if (both_gate := gate_shorthand.conflict(a, b)) is not None:
        return both_gate
    pa, pb = (gate_shorthand.spec_path(k) or keys.split(k) for k in (a, b))
    n = min(len(pa), len(pb))
    return pa[:n] == pb[:n]


def load_spec(path: str | Path) -> tuple[SweepSpec, Source]:
    src = load_file(path)
    return parse_source(src), src


def loads_spec(text: str, file: str = "<string>") -> tuple[SweepSpec, Source]:
    src = load_text(text, file)
    return parse_source(src), src


def stored_decide(spec_text: str, sweep: str) -> DecideSpec | None:
    """The ``decide:`` block of a sweep file as the DB stored it; None for a fixed-seed sweep,
    or for a file an older gatesweep stored that no longer validates (`status`, `leaderboard`
    and the dashboard all skip those)."""
    try:
        return loads_spec(spec_text or "", f"<sweep {sweep} as stored>")[0].decide
    except UserError:
        return None
