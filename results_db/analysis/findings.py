"""THE answers of a study: what every surface (CLI, dashboard, report, README) says first.

A gate ablation asks, in this order, where the sweep has what each question needs:

1. **same LR** (Table 1's frame: the same hyper-parameters for every variant): at the
   baseline's tuned LR -- the LR of its best mean over all seeds where no seed diverged -- is
   each variant better, worse or within noise? The rows are the leaderboard's at that LR,
   judged by the caller's multiplicity rule over those rows only -- or, in a sweep that adds
   seeds until it decides (``decide:``), the leaderboard's anytime-valid rows as they are
   (sequential.py: its interval, verdict and family), since a fixed-n reading of seeds added
   after looking does not hold its error rate. A variant that did not run at that LR (a
   one-LR variant run elsewhere) answers nothing here, said in words.
2. **tuned vs tuned**: each variant at its own tuned LR against the tuned baseline, each LR
   picked on held-out seeds (bestlr.py, leave-one-seed-out). A variant run at one LR is
   "not tuned" (no number); asked only when the baseline ran at >= 2 LRs.
3. **stability** (Table 2's frame): the largest stable LR of each ladder with its seeds'
   agreement (stability.py), against the baseline's; asked only with an LR ladder.
4. **scale**: when the baseline was swept over a size or token axis (n_layer, d_model,
   steps, ...), the slope of the change per decade of parameters (else training FLOPs)
   across the sizes at the tuned LR, with its CI over seeds (scaling.py).

A per-LR leaderboard row is a detail; one whose baseline is untuned at its LR carries that
condition (untuned.py) and never counts toward a headline "better": only questions 1 and 2
count, and both read the baseline at its tuned LR. Each finding names its condition (metric,
LR or LR rule, seeds, step of the reading), its estimate with the interval of its own verdict
rule, and the rule. Under Holm (no interval of its own) the estimate carries the p-value and
its step-down threshold. Pure Python over the frames api.py computes (``db.findings``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import polars as pl

from results_db.analysis.bestlr import ladders
from results_db.analysis.compare import match_axes
from results_db.analysis.labels import NO_BEST_LR, lr_text
from results_db.analysis.multiplicity import HOLM, NONE, rule_text
from results_db.analysis.sequential import ANYTIME, interval_words
from results_db.analysis.untuned import judge
from results_db.analysis.verdict import BETTER, WORSE
from results_db.schema.vocab import DIMENSIONS, GATE_DIMENSIONS

if TYPE_CHECKING:
    from results_db.analysis.decide_rule import DecideRule
    from results_db.analysis.scaling import Scaling
    from results_db.analysis.stability import Stability

SAME_LR, TUNED, STABILITY, SCALE = "same LR", "tuned vs tuned", "stability", "scale"
QUESTIONS: tuple[str, ...] = (SAME_LR, TUNED, STABILITY, SCALE)
NOT_RUN_THERE = "not run at the baseline's tuned LR"
NOT_TUNED = "not tuned (one LR)"
# words of the stability finding: the ladder's max stable LR against the baseline's
HIGHER_MSL, SAME_MSL, LOWER_MSL, NO_MSL = ("more stable", "as stable", "less stable",
                                           "no stable LR")


@dataclass(frozen=True)
class Condition:
    """What a number holds under."""

    metric: str
    lr: str  # "1e-2" or the rule that chose it ("each at its held-out pick: s0 1e-2, ...")
    seeds: str  # "3 seeds, paired"
    step: str  # "end of training (step 400)"

    def text(self) -> str:
        return f"{self.metric}, LR {self.lr}, {self.seeds}, {self.step}"


@dataclass(frozen=True)
class Estimate:
    """A number with the interval its verdict was read from (``level``), or, under Holm, the
    p-value beside its step-down threshold."""

    value: float
    unit: str  # "%", "pp/decade" or "LR"
    low: float | None = None
    high: float | None = None
    level: float | None = None
    p_value: float | None = None
    threshold: float | None = None

    def text(self) -> str:
        if self.unit == "LR":
            return lr_text(self.value)
        unit = " %" if self.unit == "%" else f" {self.unit}"
        out = f"{self.value:+.2f}{unit}"
        if self.low is not None and self.high is not None:
            level = f"{100 * self.level:.4g} % CI " if self.level is not None else ""
            out += f" [{level}{self.low:+.2f}, {self.high:+.2f}]"
        if self.p_value is not None and self.threshold is not None:
            sign = "<=" if self.p_value <= self.threshold else ">"
            out += f" (p = {self.p_value:.3g} {sign} Holm's {self.threshold:.3g})"
        return out


@dataclass(frozen=True)
class Finding:
    """One variant's answer to one question."""

    question: str
    subject: str  # the variant (ladder) label
    condition: Condition
    estimate: Estimate | None
    verdict: str
    rule: str
    note: str = ""

    def text(self) -> str:
        est = f" {self.estimate.text()}" if self.estimate is not None else ""
        note = f" ({self.note})" if self.note else ""
        return f"{self.subject}{est} at LR {self.condition.lr}: {self.verdict}{note}"


@dataclass(frozen=True)
class Answer:
    """One question: its frame, rule, the shared condition, and a finding per variant."""

    question: str
    frame: str
    rule: str
    condition: str
    findings: tuple[Finding, ...]
    summary: str  # the answer in one sentence, for the first lines of every surface


@dataclass(frozen=True)
class Findings:
    sweep: str
    metric: str
    baseline: str | None
    tuned_lr: float | None  # the baseline's tuned LR (None: one LR, or no baseline)
    answers: tuple[Answer, ...]
    note: str = ""  # why there are no answers, or what the sweep cannot answer

    def lines(self) -> list[str]:
        """The answers in words: what every surface prints first."""
        head = (f"Sweep {self.sweep}, {self.metric} vs the baseline '{self.baseline}':"
                if self.baseline is not None else f"Sweep {self.sweep}:")
        body = [f"{i}. {a.summary}" for i, a in enumerate(self.answers, 1)]
        return [head, *body, *([self.note] if self.note else [])]

    def text(self) -> str:
        return "\n".join(self.lines())

    def rows(self) -> list[dict[str, str]]:
        """One row per finding, in words (ROW_COLUMNS): the table every surface shows under
        the answers, so the CLI, the dashboard and the report cannot word them apart."""
        return [{"question": a.question, "variant": f.subject,
                 "estimate": f.estimate.text() if f.estimate else "–", "verdict": f.verdict,
                 "LR": f.condition.lr, "seeds": f.condition.seeds, "step": f.condition.step,
                 "note": f.note, "rule": f.rule} for a in self.answers for f in a.findings]

    def answer(self, question: str) -> Answer | None:
        return next((a for a in self.answers if a.question == question), None)


def tuned_lrs(board: pl.DataFrame, values: pl.DataFrame, higher: bool,
              baseline: str | None) -> dict[str, tuple[float, bool, float]]:
    """{baseline ladder key: (the LR question 1 reads at, whether the baseline had >= 2 LRs
    to choose from, its best LR)}. The best LR is the LR of its best mean over all seeds where
    no seed diverged (bestlr.Ladder.pick). Question 1 reads at the best LR, or at another LR
    where the baseline is tuned too -- not worse than at its best beyond noise
    (untuned.judge) -- when more of the sweep's variant rows ran there: the same
    hyper-parameters for as many variants as the design allows, chosen by the baseline's data
    and the design, never by a variant's result."""
    if baseline is None or board.is_empty() or not board["is_baseline"].any():
        return {}
    found, base_of, _ = ladders(board, values, baseline)
    ran: dict[tuple[str, float], int] = {}
    for key, lr, own in board.select(pl.col("lr_group_key").cast(pl.String), "lr",
                                     "is_baseline").iter_rows():
        b = base_of.get(key) if not own else None
        if b is not None and lr is not None:
            ran[(b, float(lr))] = ran.get((b, float(lr)), 0) + 1
    out = {}
    for key in board.filter(pl.col("is_baseline"))["lr_group_key"].cast(pl.String).unique():
        ladder = found.get(key)
        best = ladder.pick(None, higher) if ladder is not None else None
        if ladder is None or best is None:
            continue
        tuned = [lr for lr, at in judge(ladder, higher).items()
                 if not at.untuned and at.worse_pct is not None]
        pick = max(tuned, key=lambda lr: (ran.get((key, lr), 0), lr == best))
        out[key] = (pick, len(ladder.lrs) > 1, best)
    return out


def at_tuned(board: pl.DataFrame, values: pl.DataFrame,
             tuned: dict[str, tuple[float, bool, float]],
             baseline: str | None) -> list[str]:
    """The group keys of question 1: each baseline ladder at its tuned LR and every variant
    row compared with it at that LR (bestlr.ladders' matching of the other axes)."""
    _, base_of, _ = ladders(board, values, baseline)
    keep = []
    for g, key, lr, own in board.select("group_key", "lr_group_key", "lr",
                                        "is_baseline").iter_rows():
        b = str(key) if own else base_of.get(str(key))
        if b in tuned and lr is not None and float(lr) == tuned[b][0]:
            keep.append(str(g))
    return keep


def scale_axes(board: pl.DataFrame, baseline: str | None) -> list[str]:
    """The size / token dimensions the baseline was swept over (question 4 needs one)."""
    if baseline is None or board.is_empty():
        return []
    bases = board.filter(pl.col("variant") == baseline)
    return [c for c in DIMENSIONS if c in bases.columns and c != "lr"
            and c not in GATE_DIMENSIONS and bases[c].n_unique() > 1]


def _steps(rows: list[dict[str, Any]]) -> str:
    steps = sorted({int(r["steps"]) for r in rows if r.get("steps") is not None})
    if len(steps) == 1:
        return f"end of training (step {steps[0]})"
    return "end of training" + (f" (steps {', '.join(map(str, steps))})" if steps else "")


def _seeds(n: int | None, method: str | None) -> str:
    if not n:
        return "no seeds"
    how = {"paired": "paired", ANYTIME: "paired", "welch": "unpaired (Welch)"}.get(
        method or "", "no CI")
    return f"{n} seed{'s' if n != 1 else ''}, {how}"


def _holm_thresholds(rows: list[dict[str, Any]], alpha: float) -> dict[str, float]:
    """Holm's step-down threshold of each tested row (group_key -> alpha / (m - rank))."""
    tested = sorted((r for r in rows if r["p_value"] is not None and not r["is_baseline"]
                     and r["ci_method"] not in (None, "none")), key=lambda r: r["p_value"])
    return {r["group_key"]: alpha / (len(tested) - i) for i, r in enumerate(tested)}


def _counted(findings: list[Finding], total_what: str) -> str:
    """"1 of 9 better (a -6.4 % [...]); 2 worse (...); 3 within noise; 2 inconclusive"."""
    order = [BETTER, WORSE]
    named = {v: [f for f in findings if f.verdict == v] for v in order}
    parts = [f"{len(named[BETTER])} of {len(findings)} {total_what} better"
             + (" (" + "; ".join(f"{f.subject} {f.estimate.text() if f.estimate else ''}"
                                  for f in named[BETTER]) + ")" if named[BETTER] else "")]
    if named[WORSE]:
        parts.append(f"{len(named[WORSE])} worse (" + "; ".join(
            f"{f.subject} {f.estimate.text() if f.estimate else ''}" for f in named[WORSE])
            + ")")
    rest: dict[str, int] = {}
    for f in findings:
        if f.verdict not in order:
            kind = "needing more seeds" if f.verdict.startswith("needs >= ") else f.verdict
            rest[kind] = rest.get(kind, 0) + 1
    parts += [f"{n} {kind}" for kind, n in rest.items()]
    return "; ".join(parts)


def _some(names: list[str], shown: int = 4) -> str:
    """The first ``shown`` names, then "..." (a summary line names a few, the table all)."""
    return ", ".join(names[:shown]) + (", ..." if len(names) > shown else "")


def same_lr(at: pl.DataFrame, board: pl.DataFrame,
            tuned: dict[str, tuple[float, bool, float]],
            metric: str, decide: DecideRule | None = None) -> Answer | None:
    """Question 1 over ``at`` (compare() over the runs of the at_tuned groups: its family is
    those rows; with ``decide``, the leaderboard's anytime-valid rows there, whose family is
    every row the rule reads) and the variants of ``board`` that did not run there."""
    if not tuned or at.is_empty():
        return None
    rows = at.to_dicts()
    first = rows[0]
    rule = rule_text(str(first["correction"]), float(first["family_error"]),
                     int(first["family"] or 0))
    if decide is not None:  # the interval named as the leaderboard's summary names it
        rule = f"{interval_words(decide)}, {rule}"
    holm = (_holm_thresholds(rows, float(first["family_error"]))
            if first["correction"] == HOLM else {})
    lrs = sorted({v[0] for v in tuned.values()})
    chosen = all(c for _, c, _ in tuned.values())
    lr_words = ", ".join(lr_text(v) for v in lrs)
    moved = sorted({best for lr, _, best in tuned.values() if lr != best})
    where = (f"the baseline's tuned LR {lr_words}" if chosen else
             f"the baseline's only LR {lr_words} (not tuned: the baseline ran at one LR)")
    if chosen and moved:
        where += (f" (within noise of its best mean at {', '.join(lr_text(v) for v in moved)}"
                  ", where fewer variants ran)")
    axes = [c for c in match_axes(board, first["baseline"]) if c != "lr"]
    found = []
    for r in rows:
        if r["is_baseline"]:
            continue
        est = None
        if r["delta_pct"] is not None:
            est = Estimate(r["delta_pct"], "%", r["ci_low_pct"], r["ci_high_pct"],
                           r["ci_level"], r["p_value"] if holm else None,
                           holm.get(r["group_key"]))
        where_ = f" ({', '.join(f'{a}={r[a]}' for a in axes)})" if axes else ""
        found.append(Finding(SAME_LR, str(r["variant"]) + where_, Condition(
            metric, lr_text(r["lr"]), _seeds(r["n"], r["ci_method"]), _steps([r])), est,
            str(r["verdict"]), rule))
    there = {str(r["variant"]) for r in rows}
    unit = "rows" if axes else "variants"
    missing = [v for v in dict.fromkeys(board["variant"].to_list()) if v not in there]
    for v in missing:
        ran = sorted({float(x) for x in board.filter(board["variant"] == v)["lr"].drop_nulls()})
        note = f"ran at {', '.join(lr_text(x) for x in ran)} only" if ran else "no LR"
        found.append(Finding(SAME_LR, str(v), Condition(metric, lr_words, "no seeds",
                                                        _steps(rows)),
                             None, NOT_RUN_THERE, rule, note))
    judged = [f for f in found if f.verdict != NOT_RUN_THERE]
    summary = (f"At {where}, same hyper-parameters for every variant (Table 1's frame), "
               f"{metric} at the {_steps(rows)}: "
               + (_counted(judged, unit) if judged else "no variant ran there"))
    if missing:
        summary += (f"; {len(missing)} not run at {lr_words} ({_some(missing)}): they answer "
                    "nothing here")
    return Answer(SAME_LR, "Table 1: same hyper-parameters", rule,
                  f"{metric}, LR {lr_words}, {_steps(rows)}", tuple(found),
                  summary + f" [{rule}].")


def tuned_vs_tuned(bvb: pl.DataFrame, board: pl.DataFrame, metric: str) -> Answer | None:
    """Question 2 over db.best_vs_best's frame (leave-one-seed-out), when the baseline ran at
    >= 2 LRs (else nothing is tuned and the question is not asked)."""
    bases = board.filter(pl.col("is_baseline"))
    if bvb.is_empty() or bases["lr"].n_unique() < 2:
        return None
    rows = bvb.to_dicts()
    family = sum(r["ci_method"] in ("paired", "welch") for r in rows)
    rule = (rule_text(NONE, 0.05, family) + "; each seed judged at the LR its other seeds "
            "pick (leave-one-seed-out)")
    found = []
    for r in rows:
        if r["verdict"] == NO_BEST_LR:
            found.append(Finding(TUNED, str(r["label"]), Condition(
                metric, "one LR", "-", _steps(board.to_dicts())), None, NOT_TUNED, rule,
                str(r["note"] or "")))
            continue
        est = None
        if r["delta_pct"] is not None:
            est = Estimate(r["delta_pct"], "%", r["ci_low_pct"], r["ci_high_pct"], 0.95)
        lr = (f"{lr_text(r['best_lr'])} vs the baseline's {lr_text(r['baseline_best_lr'])} "
              f"(held-out picks: {r['picks']} / {r['baseline_picks']})"
              if r["best_lr"] is not None else "none")
        found.append(Finding(TUNED, str(r["label"]), Condition(
            metric, lr, _seeds(r["n"], r["ci_method"]), _steps(board.to_dicts())), est,
            str(r["verdict"]), rule, str(r["note"] or "")))
    judged = [f for f in found if f.verdict != NOT_TUNED]
    untuned = [f.subject for f in found if f.verdict == NOT_TUNED]
    summary = ("Each variant at its tuned LR vs the baseline at its tuned LR, each LR picked "
               f"on held-out seeds, {metric}: "
               + (_counted(judged, "tuned variants") if judged else "no variant has an LR "
                  "ladder"))
    if untuned:
        summary += f"; {len(untuned)} not tuned (one LR: {_some(untuned)})"
    return Answer(TUNED, "each at its own LR, picked on held-out seeds", rule,
                  f"{metric}, each side at its held-out LR pick", tuple(found),
                  summary + f" [{rule}].")


def stability_answer(st: Stability | None, baseline: str | None, metric: str
                     ) -> Answer | None:
    """Question 3 over db.stability's summary: each ladder's max stable LR (with its seeds'
    agreement) against the baseline's."""
    if st is None:
        return None
    s = st.summary.filter(pl.col("n_lrs") > 1)
    base = s.filter(pl.col("variant") == baseline)
    if s.is_empty() or base.is_empty():
        return None
    b_msl = base["max_stable_lr"][0]
    found = []
    for r in s.iter_rows(named=True):
        agree = (f"{r['seeds_agree']} of {r['n_seeds']} seeds agree"
                 + ("" if r["seeds_agree"] == r["n_seeds"] else f": {r['seed_msls']}")
                 if r["n_seeds"] else "no per-seed ladder")
        msl = r["max_stable_lr"]
        if r["variant"] == baseline:
            verdict = "baseline"
        elif msl is None:
            verdict = NO_MSL
        elif b_msl is None or msl > b_msl:
            verdict = HIGHER_MSL
        else:
            verdict = SAME_MSL if msl == b_msl else LOWER_MSL
        lrs = " ".join(lr_text(v) for v in (r["lrs"] or []))
        found.append(Finding(STABILITY, str(r["label"]), Condition(
            metric, f"ladder {lrs}", f"{r['n_seeds'] or '?'} seeds", "end of training"),
            Estimate(msl, "LR") if msl is not None else None, verdict, st.rule, agree))
    words = [f"{f.subject} {f.estimate.text() if f.estimate else 'none'} ({f.note})"
             for f in found]
    summary = ("Largest stable LR (Table 2's frame: no seed diverged and within tolerance of "
               "its best LR), " + "; ".join(words))
    return Answer(STABILITY, "Table 2: LR ladder", st.rule, f"final {metric} per LR",
                  tuple(found), summary + ".")


def scale_answer(sc: Scaling | None, tuned: dict[str, tuple[float, bool, float]],
                 axes: list[str]) -> Answer | None:
    """Question 4: the across-sizes trend (x = parameters when the sizes differ in it, else
    training FLOPs) of each variant at the baseline's tuned LR."""
    if sc is None or not axes or sc.trends.is_empty():
        return None
    lrs = {v[0] for v in tuned.values()}
    rows = [r for r in sc.trends.iter_rows(named=True) if r["x"] in ("params", "flops")
            and (r["lr"] in lrs or not lrs) and r["n_points"] >= 2]
    by_variant: dict[str, dict[str, Any]] = {}
    for r in rows:  # params first: the scale a reader means; FLOPs when params do not vary
        by_variant.setdefault(str(r["variant"]), r)
    if not by_variant:
        return None
    rule = ("slope of the change per decade, 95 % t-interval over per-seed slopes; flat only "
            "inside the smallest effect that matters")
    found = []
    for v, r in by_variant.items():
        est = None
        if r["slope"] is not None:
            what = "parameters" if r["x"] == "params" else "training FLOPs"
            est = Estimate(r["slope"], f"pp per decade of {what}", r["slope_ci_low"],
                           r["slope_ci_high"], 0.95)
        found.append(Finding(SCALE, v, Condition(
            sc.metric, lr_text(r["lr"]), f"{r['n_seeds']} seeds",
            f"each size's last common step, over {', '.join(axes)}"), est, str(r["verdict"]),
            rule))
    summary = (f"Across {', '.join(axes)} at LR {', '.join(lr_text(v) for v in sorted(lrs))}: "
               + "; ".join(f"{f.subject} {f.estimate.text() if f.estimate else ''} "
                           f"{f.verdict}" for f in found))
    return Answer(SCALE, "across model sizes / tokens", rule, f"{sc.metric}, across sizes",
                  tuple(found), summary + ".")


def findings(sweep: str, metric: str, baseline: str | None, board: pl.DataFrame,
             at: pl.DataFrame, tuned: dict[str, tuple[float, bool, float]], bvb: pl.DataFrame,
             st: Stability | None, sc: Scaling | None, st_metric: str,
             decide: DecideRule | None = None) -> Findings:
    """The answers (module docstring) from the frames api.AnalysisMixin.findings computes;
    ``decide``: the rule ``at``'s rows were read by (None: fixed-n)."""
    if board.is_empty():
        return Findings(sweep, metric, baseline, None, (),
                        f"No finished runs with a {metric} value yet.")
    if baseline is None:
        return Findings(sweep, metric, None, None, (), "There is no baseline (no variant is "
                        "named 'baseline' and none is the plain ungated model): no answers.")
    if board["is_baseline"].all():
        return Findings(sweep, metric, baseline, None, (), f"Only the baseline '{baseline}' "
                        f"has a {metric} value so far: nothing to compare with it yet.")
    answers = [a for a in (same_lr(at, board, tuned, metric, decide),
                           tuned_vs_tuned(bvb, board, metric),
                           stability_answer(st, baseline, st_metric),
                           scale_answer(sc, tuned, scale_axes(board, baseline))) if a]
    lrs = sorted({v[0] for v in tuned.values() if v[1]})
    return Findings(sweep, metric, baseline, lrs[0] if len(lrs) == 1 else None,
                    tuple(answers))
