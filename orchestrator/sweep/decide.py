"""The ``decide:`` block of a sweep file: add seeds where a row's verdict is still open, until
it decides or the budget ends, with a family-wise error rate that survives the peeking.

```yaml
decide:
  metric: val/ppl          # default: contract.analysis_defaults.METRIC
  margin: 0.01             # "within noise" means the interval lies inside +-margin
  relative: true           # margin (and differences) relative to the baseline's per-seed value
  error_rate: 0.05         # family-wise, over the sweep's variant rows
  first_seeds: 3           # every row (and the baseline) starts with these
  max_seeds: 20            # a row still open here is inconclusive
  test: mixture_t          # or sign: no Gaussian assumption, more seeds (docs/reproduction.md)
  budget: {runs: 200, hours: 1.0, gpu_hours: 50}   # any of them; the sweep stops at the first
```
Seeds are allocated by the run room (orchestrator/run/driver/adaptive.py); the statistics are
results_db's (results_db/analysis/sequential.py). A sweep without the block runs its seeds as
before. The block replaces ``seeds``/``axes.seed``: the seeds are what it allocates.

The rule is fixed once the sweep has runs: a resubmit that changes it (``rule_differences``) or
the sweep's rows is refused, unless ``submit --change-rule``, which records the change
(results_db/write/decide_records.py) and every verdict after it says so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field, model_validator

from contract.analysis_defaults import FAMILY_ERROR, METRIC, MIN_EFFECT
from contract.config import StrictModel
from contract.errors import SpecIssue
from results_db.analysis.confseq import MIXTURE_G
from results_db.analysis.decide_rule import DecideRule
from results_db.schema.vocab import higher_is_better

if TYPE_CHECKING:
    from contract.yamlsrc import Source
    from results_db import ResultsDB
    from results_db.analysis.sequential import Spent

MAX_SEEDS = 1000
# An absolute margin is in the metric's own units. Every metric the trainer records (PPL,
# losses, probes, benchmark scores, seconds) is far below this; a margin above it is a typo
# or a trick, and would call any difference "within noise" (1e308 did, at the first interval).
MAX_ABS_MARGIN = 1e6


class Budget(StrictModel):
    """Where an adaptive sweep stops giving seeds, whatever is still open (any of them)."""

    runs: int | None = Field(default=None, ge=1, le=1_000_000)
    hours: float | None = Field(default=None, gt=0, le=24 * 366)  # wall clock, from the first start
    gpu_hours: float | None = Field(default=None, gt=0, le=1e9)


class DecideSpec(StrictModel):
    metric: str = Field(default=METRIC, min_length=1, max_length=200)
    margin: float = Field(default=MIN_EFFECT, gt=0)
    relative: bool = True
    error_rate: float = Field(default=FAMILY_ERROR, gt=0, le=0.5)
    first_seeds: int = Field(default=3, ge=2, le=MAX_SEEDS)
    max_seeds: int = Field(default=20, ge=2, le=MAX_SEEDS)
    budget: Budget = Field(default_factory=Budget)
    mixture_g: float = Field(default=MIXTURE_G, gt=0, le=1e4)
    # mixture_t: Gaussian differences (confseq.py); sign: any continuous ones (signcs.py)
    test: Literal["mixture_t", "sign"] = "mixture_t"

    @model_validator(mode="after")
    def _bounds(self) -> DecideSpec:
        if self.max_seeds < self.first_seeds:
            raise ValueError(f"decide.max_seeds ({self.max_seeds}) must be at least "
                             f"decide.first_seeds ({self.first_seeds})")
        if self.relative and self.margin >= 1:
            raise ValueError(f"decide.margin: a relative margin is a fraction of the baseline "
                             f"(0.01 = 1 %), got {self.margin:g}; set relative: false for an "
                             "absolute one")
        if not self.relative and self.margin > MAX_ABS_MARGIN:
            raise ValueError(f"decide.margin: an absolute margin is in {self.metric}'s own units "
                             f"and at most {MAX_ABS_MARGIN:g}, got {self.margin:g}: it would call "
                             "any difference within noise; give the largest change that does "
                             "not matter (or relative: true for a fraction of the baseline)")
        return self

    def rule(self) -> DecideRule:
        return DecideRule(metric=self.metric, margin=self.margin, relative=self.relative,
                          error_rate=self.error_rate, max_seeds=self.max_seeds,
                          higher_is_better=higher_is_better(self.metric), g=self.mixture_g,
                          test=self.test)


def rule_differences(stored: DecideSpec | None, new: DecideSpec | None) -> list[str]:
    """What ``new`` changes of the rule ``stored`` decided under: "key: old -> new" for every
    rule key (metric, margin, error rate, mixture g, test, first/max seeds...) that differs,
    and for a budget bound that shrank (a larger budget only lets open rows go on). A block
    added or removed is a change too (a fixed-seed reading of adaptive seeds is invalid)."""
    if stored is None and new is None:
        return []
    if stored is None or new is None:
        return [f"decide: {'present' if stored else '(none)'} -> {'present' if new else '(none)'}"]
    old_doc, new_doc = stored.model_dump(mode="json"), new.model_dump(mode="json")
    out = [f"decide.{k}: {old_doc[k]} -> {new_doc[k]}" for k in old_doc
           if k != "budget" and old_doc[k] != new_doc[k]]
    for k, old in old_doc["budget"].items():
        now = new_doc["budget"][k]
        if now is not None and (old is None or now < old):
            out.append(f"decide.budget.{k}: {old} -> {now} (a budget may only grow)")
    return out


def row_issues(src: Source, variants: list[str]) -> list[SpecIssue]:
    """A decide: block needs something to decide: at least two variants left after include /
    exclude (``variants``: the expanded runs' variants, in order), one of them the baseline
    the others are compared with. One variant has no row to compare with anything."""
    names = list(dict.fromkeys(variants))
    if len(names) >= 2:
        return []
    only = f"only the variant {names[0]!r}" if names else "no variant"
    return [src.issue(("decide",), f"the sweep has {only} (after include/exclude): nothing to "
                                   "compare with the baseline, so nothing to decide; add a "
                                   "variant or remove decide")]


def progress_line(db: ResultsDB, sweep: str, decide: DecideSpec, used: Spent) -> str:
    """One line per round: rows decided vs open, and the budget spent vs its bounds."""
    rows = db.decide_rows(sweep, decide.rule())
    counts = rows["verdict"].value_counts().sort("verdict").rows() if rows.height else []
    b = decide.budget
    spend = [f"{used.runs}" + (f"/{b.runs}" if b.runs else "") + " runs",
             f"{used.wall_hours:.2f}" + (f"/{b.hours:g}" if b.hours else "") + " h"]
    if b.gpu_hours:
        spend.append(f"{used.gpu_hours:.2f}/{b.gpu_hours:g} GPU-h")
    return (f"decide: {rows.height} rows: " + ", ".join(f"{n} {v}" for v, n in counts)
            + "; budget " + ", ".join(spend))
