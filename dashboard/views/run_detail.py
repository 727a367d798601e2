"""Run detail: status and attempts (errors and tracebacks) refreshed while the run is live, the
rerun button (asks first; the dashboard's one write, through the orchestrator's rerun path),
the run's curves, its checkpoints and final values, what produced each attempt (code version,
packages, device), and its config diff against the baseline."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, cast

import polars as pl
import streamlit as st

from contract.ids import parse_id
from contract.metrics import TRAIN_LOSS, VAL_LOSS
from contract.states import DONE_OK, RunStatus
from dashboard import charts, data, jsontext, palette, provenance, urlstate
from dashboard.configdiff import config_diff
from dashboard.mdtext import code, md
from dashboard.status import ACTIVE_STATES, DONE_STATES, WAITING_STATES
from dashboard.tables import fmt_num
from dashboard.views.common import show_chart, watch

if TYPE_CHECKING:
    from results_db import AttemptRow, RunRow

# a finished run (any way) or a lost one; pending/running ones are already scheduled
RERUNNABLE = tuple(s for s in (*DONE_STATES, *WAITING_STATES) if s != RunStatus.PENDING)
LIVE = ACTIVE_STATES  # may move on its own: running, or waiting for a driver
REFRESH_S = 3
CURVES = (TRAIN_LOSS, VAL_LOSS)  # one chart each, side by side
CHECKPOINT_KINDS = ("checkpoint_dir", "checkpoint")


# a DeepSpeed config nests a few levels and holds a few KB; past these it is shown as stored
MAX_JSON_DEPTH = 32
MAX_JSON_CHARS = 200_000
MAX_OPTIONS = 500  # a selectbox of 10k runs costs ~1 s per page run: pick the variant first


def _pick_run(runs: pl.DataFrame) -> int:
    """Variant, then one of its runs (?run=ID preselects both)."""
    runs = runs.sort("id")
    variants = runs["variant"].unique(maintain_order=True).to_list()
    raw = urlstate.read("run", "")
    wanted = parse_id(raw)  # contract/ids.py: '²' is no id
    if raw and wanted is None:
        urlstate.drop("run", "not a run id")
    hit = runs.filter(pl.col("id") == wanted) if wanted is not None else runs[:0]
    v_index = variants.index(hit["variant"][0]) if hit.height else 0
    c1, c2 = st.columns([1, 3])
    variant = c1.selectbox("Variant", variants, index=v_index, key="rd_variant")
    mine = runs.filter(pl.col("variant") == variant).head(MAX_OPTIONS)
    ids = mine["id"].to_list()
    labels = {r["id"]: f"{r['id']} · {r['name']} · {r['status']}"
              for r in mine.iter_rows(named=True)}
    index = ids.index(hit["id"][0]) if hit.height and hit["id"][0] in ids else 0
    return cast(int, c2.selectbox("Run", ids, index=index, format_func=labels.__getitem__,
                                  key="rd_run"))


def _baseline_id(url: str, sweep: str, runs: pl.DataFrame, seed: int) -> int | None:
    """The baseline run with the same seed (else the first baseline run)."""
    base = data.baseline(url, sweep)
    cands = runs.filter(pl.col("variant") == base).sort("id") if base else runs.head(0)
    same = cands.filter(pl.col("seed") == seed)
    pick = same if not same.is_empty() else cands
    return None if pick.is_empty() else int(pick["id"][0])


def _attempts(attempts: list[AttemptRow]) -> None:
    st.markdown(f"**Attempts ({len(attempts)})**")
    if not attempts:
        st.caption("Not started yet.")
        return
    st.table(pl.DataFrame([{"attempt": a.number, "status": a.status, "host": a.host,
                            "started": str(a.started)[:19], "ended": str(a.ended or "")[:19],
                            "fault": getattr(a, "fault", None) or "",
                            "error": a.error or ""} for a in attempts]))
    for a in attempts:
        if a.traceback or a.error:
            with st.expander(f"attempt {a.number}: {a.status} — {md((a.error or '')[:80])}",
                             expanded=a is attempts[-1] and a.status == RunStatus.FAILED):
                st.code(a.traceback or a.error, language="python")


def _spawn(url: str, run_id: int, name: str) -> None:
    """Start `orchestrator rerun ID --db URL [--fresh]` detached (the CLI's own code path); a
    button callback, so the page that follows already shows the new state."""
    st.session_state[f"rd_confirm_{run_id}"] = False
    fresh = bool(st.session_state.get(f"rd_fresh_{run_id}"))
    try:
        from orchestrator.run.driver.rerun import spawn_rerun  # lazy: the dashboard stays Ray-free

        spawn_rerun(url, run_id, fresh=fresh)
    except Exception as exc:  # noqa: BLE001 - shown to the user, who can use the CLI instead
        st.session_state[f"rd_error_{run_id}"] = (
            f"Rerun of run {run_id} ({md(name)}) failed to start: {md(exc)}. "
            f"Try {code(f'orchestrator rerun {run_id} --db {url}')}.")
        return
    data.clear()
    st.session_state[f"rd_started_{run_id}"] = True


def _set(key: str, value: bool) -> None:
    st.session_state[key] = value


def _rerun_controls(url: str, run: RunRow) -> None:
    """Rerun asks for confirmation; after it the state block shows the new attempt."""
    confirm = f"rd_confirm_{run.id}"
    allowed = run.status in RERUNNABLE
    if st.session_state.get(f"rd_started_{run.id}"):
        st.success(f"Rerun of run {run.id} ({md(run.name)}) started: status {run.status}.")
    error = st.session_state.pop(f"rd_error_{run.id}", None)
    if error:
        st.error(error)
    st.button("Rerun this run…", key="rd_rerun", disabled=not allowed,
              on_click=_set, args=(confirm, True),
              help="a new attempt; resumes from the run's last checkpoint" if allowed
              else f"a {run.status} run is already scheduled")
    if not (allowed and st.session_state.get(confirm)):
        return
    # A finished run's last checkpoint is its final step: resuming it trains nothing, so
    # starting over is the default there (the CLI's `rerun --fresh`).
    fresh = st.checkbox("Start from step 0 (delete its checkpoints)", key=f"rd_fresh_{run.id}",
                        value=run.status in DONE_OK)
    how = ("starts from step 0: its checkpoints are deleted first" if fresh
           else "resumes from the run's last checkpoint")
    st.warning(f"Start a new attempt of **{md(run.name)}** (status {run.status})? It {how} "
               "and uses compute.")
    c1, c2, _ = st.columns([1, 1, 4])
    c1.button("Yes, rerun", key="rd_rerun_yes", type="primary", on_click=_spawn,
              args=(url, run.id, run.name))
    c2.button("Cancel", key="rd_rerun_no", on_click=_set, args=(confirm, False))


def _state_block(url: str, run_id: int) -> None:
    detail = data.run_detail(url, run_id)
    if detail is None:
        st.error(f"Run {run_id} is not in {url}.")
        return
    run = detail["run"]
    if run.status != st.session_state.get("_rd_status"):
        # the status moved since the page was drawn (a rerun click re-runs only this
        # fragment): rebuild the page, so the run picker, curves and refresh follow it
        st.rerun()
    st.markdown(f"**{md(run.name)}** — variant {code(run.variant)}, seed {run.seed}, "
                f"status **{run.status}**")
    _rerun_controls(url, run)
    _attempts(detail["attempts"])
    if run.status in LIVE:
        st.caption(f"Live: refreshed every {REFRESH_S} s.")


def _curves(url: str, sweep: str, run: RunRow) -> None:
    raw = data.metrics(url, (run.id,), CURVES, 1000)
    if raw.is_empty():
        st.caption("No training points yet." if run.status in LIVE else
                   f"No training points were recorded (status {run.status}).")
        return
    colors = palette.colors(data.variants(url, sweep), data.baseline(url, sweep))
    cols = st.columns(2)
    for col, name in zip(cols, CURVES, strict=True):
        pts = raw.filter(pl.col("name") == name)
        if pts.is_empty():
            col.caption(f"{name}: no points.")
            continue
        series = pts.select(pl.lit(run.variant).alias("variant"),
                            pl.lit(run.name).alias("series"),
                            pl.col("step").cast(pl.Float64).alias("x"), "value")
        col.markdown(f"**{name}**")
        show_chart(where=col, chart=charts.curves(series, name, colors, x="x"))


def _checkpoints(artifacts: pl.DataFrame) -> None:
    st.markdown("**Checkpoints**")
    if artifacts.is_empty() or "kind" not in artifacts.columns:
        st.caption("No checkpoint recorded.")
        return
    ck = artifacts.filter(pl.col("kind").is_in(list(CHECKPOINT_KINDS)))
    if ck.is_empty():
        st.caption("No checkpoint recorded.")
        return
    st.table(ck.select("kind", pl.col("path").fill_null("–"),
                       pl.col("created").cast(pl.String).str.slice(0, 19)))


def _summaries(url: str, run_id: int) -> None:
    mine = data.run_summaries(url, run_id)
    with st.expander(f"Final values ({mine.height})", expanded=False):
        if mine.is_empty():
            st.caption("No summaries yet (the run reports them when it ends).")
        else:
            # NaN is stored as NULL, which map_elements skips: "–", not "None"
            st.table(mine.with_columns(pl.col("value").map_elements(
                fmt_num, return_dtype=pl.String).fill_null("–")))


def _provenance(url: str, run_id: int) -> None:
    """What produced each attempt: code version (commit, dirty diff), packages, device, CPU,
    and the DeepSpeed config the newest one used."""
    prov = data.run_provenance(url, run_id)
    st.markdown("**Provenance**")
    if prov.is_empty():
        st.caption("Not recorded (trained before provenance was recorded, or not started).")
        return
    st.table(provenance.display_frame(prov))
    raw = prov["deepspeed_config"][-1] or "{}"
    try:  # bounded: any writer of a shared DB can store text, or 5,000 nested brackets
        shown = json.dumps(jsontext.loads(raw, max_chars=MAX_JSON_CHARS,
                                          max_depth=MAX_JSON_DEPTH), indent=2, sort_keys=True)
    except ValueError:
        shown = raw[:MAX_JSON_CHARS]
    with st.expander(f"DeepSpeed config (attempt {prov['attempt'][-1]})"):
        st.code(shown, language="json")


def render(url: str, sweep: str) -> None:  # app.py: these pages need a sweep
    st.header(f"Run detail — {md(sweep)}")
    runs = data.runs(url, sweep)
    if runs.is_empty():
        st.info("This sweep has no runs.")
        return
    run_id = _pick_run(runs)
    detail = data.run_detail(url, run_id)
    if detail is None:
        st.error(f"Run {run_id} is not in {url}.")
        return
    run = detail["run"]
    st.session_state["_rd_status"] = run.status
    live = run.status in LIVE
    watch(url, sweep, "rd")
    st.fragment(run_every=REFRESH_S if live else None)(_state_block)(url, run_id)
    _curves(url, sweep, run)
    _checkpoints(detail["artifacts"])
    _summaries(url, run.id)
    _provenance(url, run.id)
    st.subheader("Config")
    base_id = _baseline_id(url, sweep, runs, run.seed)
    if base_id is not None and base_id != run.id:
        base_cfg = data.run_config(url, base_id) or {}
        diff = config_diff(run.config, base_cfg)
        st.caption(f"Differences from baseline run {base_id}:")
        st.table(pl.DataFrame(diff, schema=["key", "this run", "baseline"], orient="row")
                 if diff else pl.DataFrame({"key": ["(identical apart from name/seed)"]}))
    with st.expander("Full config (JSON)"):
        st.code(json.dumps(run.config, indent=2, sort_keys=True), language="json")
