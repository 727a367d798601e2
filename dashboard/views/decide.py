"""Decide (for sweeps with a ``decide:`` block): what `orchestrator status` says of an
adaptive sweep, as a page -- each row's seeds so far, its anytime-valid interval narrowing seed
by seed against the ±margin, whether it has decided, and the budget spent vs left.

The rule comes from the sweep file as stored (read as `status` reads it: loads_spec, through
the dashboard's door to orchestrator.sweep.spec); the rows from db.decide_rows, the narrowing
from results_db/read/decide_path.py (the same rule read at every seed count), the spending from
db.decide_spent. Nothing here computes a statistic. ``decide_rule`` (``stored_rule`` over a
sweeps frame, for the report) is the stored rule on a metric that every page stating a verdict
passes to results_db, as the CLI's stored_rule.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import altair as alt
import polars as pl
import streamlit as st

from dashboard import data, palette
from dashboard.charts import LEGEND, Layered
from dashboard.mdtext import code, md
from dashboard.tables import fmt_lr
from dashboard.views.common import show_chart, table_height, watch
from orchestrator.sweep.spec import stored_decide
from results_db.analysis.confseq import UNDECIDED
from results_db.analysis.multiplicity import rule_text
from results_db.read.decide_path import interval_path

if TYPE_CHECKING:
    from orchestrator.sweep.decide import DecideSpec
    from results_db.analysis.decide_rule import DecideRule


def decide_spec(url: str, sweep: str) -> DecideSpec | None:
    """The sweep's ``decide:`` block as stored (None: a sweep without one, or a file an older
    gatesweep stored that no longer validates -- `status` skips those too)."""
    return _stored(data.sweeps(url), sweep)


def decide_rule(url: str, sweep: str, metric: str) -> DecideRule | None:
    """The sweep's stored rule when it reads ``metric``, else None (fixed-n): what every page
    that states a verdict passes, as the CLI's stored_rule."""
    return stored_rule(data.sweeps(url), sweep, metric)


def stored_rule(sweeps: pl.DataFrame, sweep: str, metric: str) -> DecideRule | None:
    """decide_rule over a sweeps frame (db.sweeps(): the report reads its DB directly)."""
    spec = _stored(sweeps, sweep)
    return spec.rule() if spec is not None and spec.metric == metric else None


def _stored(sweeps: pl.DataFrame, sweep: str) -> DecideSpec | None:
    if "spec" not in sweeps.columns:
        return None
    text = sweeps.filter(pl.col("name") == sweep)["spec"].to_list()
    return _parse(text[0]) if text and text[0] else None


@st.cache_data(show_spinner=False)
def _parse(text: str) -> DecideSpec | None:
    return stored_decide(text, "as stored")


def has_decide(url: str, sweep: str) -> bool:
    return decide_spec(url, sweep) is not None


@st.cache_data(ttl=data.TTL_S, show_spinner=False)
def _reads(url: str, sweep: str, text: str, version: tuple[int, ...]) -> dict[str, Any]:
    spec = _parse(text)
    assert spec is not None  # callers pass the text of a decide: sweep
    db = data.open_db(url)
    rule = spec.rule()
    return {"rows": db.decide_rows(sweep, rule), "path": interval_path(db, sweep, rule),
            "spent": db.decide_spent(sweep)}


def reads(url: str, sweep: str) -> dict[str, Any]:
    """db.decide_rows, the intervals' path and db.decide_spent, cached per sweep state."""
    text = data.sweeps(url).filter(pl.col("name") == sweep)["spec"][0]
    return _reads(url, sweep, text, data.sweep_state(url, sweep))


def _scale(spec: DecideSpec) -> tuple[float, str]:
    return (100.0, " (%)") if spec.relative else (1.0, "")


def _interval(lo: float | None, hi: float | None, scale: float) -> str:
    if lo is None or hi is None:
        return "–"
    if abs(lo) == float("inf") or abs(hi) == float("inf"):
        return "unbounded yet"
    return f"[{lo * scale:+.2f}, {hi * scale:+.2f}]"


PAIR_CORR = "pairing ρ"
SEED_MULTIPLIER = "seed multiplier (measured)"


def _number(v: float | None, fmt: str, unit: str = "") -> str:
    return "–" if v is None else f"{v:{fmt}}{unit}"


def rows_frame(rows: pl.DataFrame, spec: DecideSpec) -> pl.DataFrame:
    """db.decide_rows as the strings the page shows."""
    scale, unit = _scale(spec)
    # the change by the one rule of every board (compare.pct_of_base); the interval the
    # decide rule's own (for a relative margin: of the per-seed relative differences)
    change = "delta_pct" if spec.relative else "delta"
    out = [{"variant": r["variant"], "lr": fmt_lr(r["lr"]),
            "seeds so far": str(len(r["seeds"] or [])), "paired": str(r["n"]),
            f"Δ{unit}": "–" if r.get(change) is None else f"{r[change]:+.2f}",
            f"interval{unit}": _interval(r["low"], r["high"], scale),
            "verdict": r["verdict"],
            "state": "undecided" if r["verdict"] == UNDECIDED else "decided",
            "more seeds (about)": "–" if r["more_seeds"] is None else str(r["more_seeds"]),
            PAIR_CORR: _number(r.get("pair_corr"), "+.2f"),
            SEED_MULTIPLIER: _number(r.get("seed_multiplier"), ".2g", "×"),
            # incomplete pairs, one-sided divergences, a skew the mixture t does not cover
            "note": r.get("note") or "–"}
           for r in rows.iter_rows(named=True)]
    return pl.DataFrame(out) if out else pl.DataFrame(schema={"variant": pl.String})


def rule_words(rows: pl.DataFrame, spec: DecideSpec) -> str:
    """The rule behind the verdicts as the rows record it (db.decide_rows' ``rule`` and
    ``family``, what `orchestrator status` reads): "Holm over the 3 rows ..., intervals at
    Bonferroni's 98.33 %" or "Bonferroni over the 3 rows: each interval at 98.33 % ..."."""
    said = rule_text(str(rows["rule"][0]), spec.error_rate, int(rows["family"][0]))
    return "anytime-valid intervals; " + said.replace("CIs", "intervals").replace(
        "each CI", "each interval").replace(" with a CI", "")


def amount(what: str, value: float) -> str:
    """A budget amount in its unit: runs as a count, hours as s / min / h."""
    if what == "runs":
        return f"{value:.0f}"
    seconds = value * 3600
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min" if seconds < 5400 else f"{value:.1f} h"


def budget_lines(spec: DecideSpec, spent: Any) -> list[tuple[str, float, float | None]]:
    """(what, used, bound or None) per budget the sweep counts: runs, wall time and GPU time
    (both in hours)."""
    b = spec.budget
    out: list[tuple[str, float, float | None]] = [
        ("runs", float(spent.runs), None if b.runs is None else float(b.runs)),
        ("wall time", float(spent.wall_hours), b.hours)]
    if b.gpu_hours is not None or spent.gpu_hours:
        out.append(("GPU time", float(spent.gpu_hours), b.gpu_hours))
    return out


def path_chart(path: pl.DataFrame, spec: DecideSpec, colors: dict[str, str]) -> Layered:
    """Each row's interval at every seed count (a bar from low to high, the mean a dot), in
    the variant's colour, against the ±margin band and 0: decided where a bar leaves 0 behind
    or fits inside the band. Unbounded intervals (too few seeds) are not drawn."""
    scale, unit = _scale(spec)
    frame = path.filter(pl.col("low").is_finite() & pl.col("high").is_finite()).with_columns(
        row=pl.col("variant") + " @ lr=" + pl.col("lr").map_elements(fmt_lr,
                                                                    return_dtype=pl.String),
        low=pl.col("low") * scale, high=pl.col("high") * scale, mean=pl.col("mean") * scale)
    color = alt.Color("variant:N", scale=palette.scale(colors, frame["variant"].unique()
                                                        .to_list()), legend=LEGEND)
    ks = frame["seeds"].to_list() or [0]
    x = alt.X("seeds:Q", title="seeds given (the interval after each)",
              axis=alt.Axis(tickMinStep=1, format="d"),
              scale=alt.Scale(domain=[min(ks) - 0.5, max(ks) + 0.5], nice=False))
    y = alt.Y("low:Q", title=f"Δ {spec.metric} vs baseline{unit}, anytime-valid interval")
    margin = spec.margin * scale
    band = alt.Chart(pl.DataFrame({"lo": [-margin], "hi": [margin]}).to_pandas()).mark_rect(
        color="#999", opacity=0.15).encode(y="lo:Q", y2="hi:Q")
    zero = alt.Chart(pl.DataFrame({"z": [0.0]}).to_pandas()).mark_rule(
        color="#333", strokeDash=[4, 3]).encode(y="z:Q")
    pdf = frame.to_pandas()
    bars = alt.Chart(pdf).mark_rule(strokeWidth=2).encode(
        x=x, y=y, y2="high:Q", color=color, xOffset=alt.XOffset("row:N"))
    dots = alt.Chart(pdf).mark_point(filled=True, size=40).encode(
        x=x, y="mean:Q", color=color, xOffset=alt.XOffset("row:N"),
        tooltip=["row", "seeds", "n", alt.Tooltip("mean:Q", format="+.2f"),
                 alt.Tooltip("low:Q", format="+.2f"), alt.Tooltip("high:Q", format="+.2f"),
                 "verdict"])
    return alt.layer(band, zero, bars, dots).properties(height=320)


def render(url: str, sweep: str) -> None:  # app.py offers it for decide: sweeps only
    st.header(f"Decide — {md(sweep)}")
    watch(url, sweep, "dc")
    spec = decide_spec(url, sweep)
    if spec is None:
        st.info("This sweep has no `decide:` block: its seeds are fixed.")
        return
    got = reads(url, sweep)
    rows, path, spent = got["rows"], got["path"], got["spent"]
    scale, unit = _scale(spec)
    margin = f"±{spec.margin * scale:g}{' %' if spec.relative else ''}"
    st.info(f"**Rule**: each row gets seeds {spec.first_seeds} at a time first, then one more "
            f"while undecided, up to {spec.max_seeds}; it is decided once its interval of "
            f"{code(spec.metric)} vs the baseline leaves 0 (better / worse) or lies inside "
            f"{margin} (within noise), at a family-wise error rate of "
            f"{spec.error_rate:g} over the rows however often they are read.")
    _budget(spec, spent)
    if rows.is_empty():
        st.caption("No row pairs with a finished baseline run yet.")
        return
    decided = rows.filter(pl.col("verdict") != UNDECIDED).height
    st.markdown(f"**{decided} of {rows.height} rows decided**: " + rule_words(rows, spec) + ".")
    colors = palette.colors(data.variants(url, sweep), data.baseline(url, sweep))
    bounded = path.filter(pl.col("low").is_finite() & pl.col("high").is_finite())
    if bounded.height:
        first = int(bounded["seeds"].min() or 0)
        st.markdown("**The intervals narrowing, seed by seed** (grey band: the margin)")
        show_chart(path_chart(path, spec, colors))
        if first > 1:
            st.caption(f"Before {first} seeds no interval is bounded at this error rate: "
                       "an anytime-valid interval pays for being read after every seed.")
    elif path.height:
        st.caption("No row's interval is bounded yet: more seeds are on their way.")
    table = rows_frame(rows, spec)
    st.dataframe(table, hide_index=True, key="dc_rows", height=table_height(table.height))
    st.caption(f"**{PAIR_CORR}**: the correlation of the row's and the baseline's "
               f"{code(spec.metric)} over their paired seeds (the same seed: the same data "
               "order and, under model.init paired, the same initial shared weights). "
               f"**{SEED_MULTIPLIER}**: (var(row) + var(baseline)) / var(row - baseline) over "
               "those seeds, what pairing bought: a paired seed is worth about that many "
               "unpaired ones (1 / (1 - ρ) when both spreads are equal; below 1 when pairing "
               "hurt). From 3 paired seeds.")


def _budget(spec: DecideSpec, spent: Any) -> None:
    cols = st.columns(3)
    for col, (what, used, bound) in zip(cols, budget_lines(spec, spent), strict=False):
        if bound:
            col.progress(min(used / bound, 1.0),
                         text=f"{what}: {amount(what, used)} of {amount(what, bound)} spent, "
                              f"{amount(what, max(bound - used, 0))} left")
        else:
            col.caption(f"{what}: {amount(what, used)} spent (no bound)")
