"""Best vs best (results_db/analysis/bestlr.py): each side's learning rate is chosen on other
seeds than the one it judges (leave-one-seed-out) or declared, and a comparison the design
cannot support is said in words with no number. Hand-built frames with hand-computed picks,
then the API on the sample DB, whose variants run at one LR only (kv_heads_x2 used to read
"+45.2 %, its best LR 3e-2" against the baseline's tuned 1e-2)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import results_db
from results_db.analysis.bestlr import best_vs_best, declared_check
from results_db.analysis.labels import LOSO, NO_BEST_LR, NOT_RUN, ONE_SEED
from results_db.analysis.stats import delta_ci, seeds_needed
from tests import sample_db

LO, HI = 1e-3, 1e-2
# (variant, lr) -> per-seed val/ppl (None: diverged). "lucky": seed 0 at 1e-2 is lucky, so
# all three seeds pick 1e-2 while seed 0's own held-out pick is 1e-3.
VALUES: dict[tuple[str, float], tuple[float | None, ...]] = {
    ("baseline", LO): (10.3, 10.4, 10.5), ("baseline", HI): (10.8, 10.9, 11.0),
    ("lucky", LO): (10.0, 10.2, 10.1), ("lucky", HI): (9.0, 10.6, 10.5),
    ("shaky", LO): (10.2, 10.2, 10.3), ("shaky", HI): (9.5, None, 9.6),
    ("one_lr", HI): (9.0, 9.1, 9.2),
    ("one_seed", LO): (10.0,), ("one_seed", HI): (9.9,),
}


def _frames(values: dict[tuple[str, float], tuple[float | None, ...]]
            ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(board, values) as db.leaderboard and the runs give them (only what bestlr reads)."""
    board = pl.DataFrame([{"variant": v, "lr": lr, "group_key": f"{v}@{lr:g}",
                           "lr_group_key": v, "is_baseline": v == "baseline"}
                          for v, lr in values])
    runs = pl.DataFrame([{"group_key": f"{v}@{lr:g}", "seed": s, "value": x,
                          "status": "diverged" if x is None else "succeeded"}
                         for (v, lr), xs in values.items() for s, x in enumerate(xs)],
                        schema={"group_key": pl.String, "seed": pl.Int64,
                                "value": pl.Float64, "status": pl.String})
    return board, runs


@pytest.fixture(scope="module")
def rows() -> dict[str, dict]:
    board, runs = _frames(VALUES)
    out = best_vs_best(board, runs, False, "baseline")
    return {r["variant"]: r for r in out.iter_rows(named=True)}


def test_each_seed_is_judged_at_the_lr_its_other_seeds_pick(rows: dict) -> None:
    r = rows["lucky"]
    assert r["selection"] == LOSO and r["best_lr"] == HI  # all seeds: 1e-2 (10.03 < 10.1)
    # held out: s0 sees (10.15 at 1e-3, 10.55 at 1e-2) -> 1e-3; s1 and s2 pick 1e-2
    assert r["picks"] == "s0 1e-3, s1 1e-2, s2 1e-2"
    assert r["baseline_picks"] == "s0 1e-3, s1 1e-3, s2 1e-3"
    ci = delta_ci([10.0, 10.6, 10.5], [10.3, 10.4, 10.5], [0, 1, 2], [0, 1, 2])
    assert ci.method == "paired" and r["ci_method"] == "paired" and r["n"] == 3
    assert r["delta"] == pytest.approx(ci.delta)  # -0.033, where 1e-2 for all gave -0.367
    assert r["ci_low_pct"] == pytest.approx(100 * ci.low / 10.4)
    assert r["ci_high_pct"] == pytest.approx(100 * ci.high / 10.4)
    assert ci.spread is not None
    k = seeds_needed(ci.spread / 10.4, paired=True)
    assert r["verdict"] == (f"needs >= {k} seeds" if k > 3 else "inconclusive")


def test_a_diverged_lr_is_not_eligible_and_a_diverged_pick_is_left_out(rows: dict) -> None:
    r = rows["shaky"]
    # s0 and s2: their other seeds include s1, which diverged at 1e-2 -> 1e-3; s1 picks
    # 1e-2 (9.55) and has no value there
    assert r["picks"] == "s0 1e-3, s1 1e-2, s2 1e-3"
    assert r["n"] == 2 and r["ci_method"] == "welch"  # seeds {0, 2} vs {0, 1, 2}
    ci = delta_ci([10.2, 10.3], [10.3, 10.4, 10.5])
    assert r["delta"] == pytest.approx(ci.delta)
    assert r["note"] == "1 seed of shaky without a finite value at its pick (diverged) left out"
    assert r["best_lr"] == LO  # all seeds: 1e-2 is out (a seed diverged there)


def test_one_lr_or_one_seed_is_said_in_words_with_no_number(rows: dict) -> None:
    one = rows["one_lr"]
    assert one["verdict"] == NO_BEST_LR and one["n_lrs"] == 1
    assert one["note"] == ("one_lr ran at one LR (1e-2) only: no best LR to compare (the "
                           "leaderboard has the change at that LR)")
    seed = rows["one_seed"]
    assert seed["verdict"] == ONE_SEED
    assert seed["note"] == "one_seed has one seed: no other seed to choose its LR on"
    for r in (one, seed):
        assert r["best_lr"] is None and r["baseline_best_lr"] is None
        assert all(r[c] is None for c in ("delta", "delta_pct", "ci_low_pct", "ci_high_pct"))


def test_a_baseline_at_one_lr_leaves_no_row_tuned() -> None:
    values = {k: v for k, v in VALUES.items() if k != ("baseline", HI)}
    board, runs = _frames(values)
    out = best_vs_best(board, runs, False, "baseline")
    assert set(out["verdict"]) == {NO_BEST_LR} and out["delta"].null_count() == out.height
    assert out.filter(variant="lucky")["note"][0].startswith("the baseline ran at one LR (1e-3)")


def test_a_declared_lr_is_the_plain_comparison_there(rows: dict) -> None:
    board, runs = _frames(VALUES)
    out = {r["variant"]: r for r in best_vs_best(board, runs, False, "baseline",
                                                   lr=HI).iter_rows(named=True)}
    r = out["lucky"]
    ci = delta_ci([9.0, 10.6, 10.5], [10.8, 10.9, 11.0], [0, 1, 2], [0, 1, 2])
    assert r["selection"] == "declared LR 1e-2" and r["picks"] == "s0 1e-2, s1 1e-2, s2 1e-2"
    assert (r["delta"], r["ci_low_pct"]) == (pytest.approx(ci.delta),
                                             pytest.approx(100 * ci.low / 10.9))
    assert out["one_lr"]["verdict"] != NOT_RUN and out["one_lr"]["n"] == 3
    lo = {r["variant"]: r for r in best_vs_best(board, runs, False, "baseline",
                                                  lr=LO).iter_rows(named=True)}
    assert lo["one_lr"]["verdict"] == NOT_RUN and lo["one_lr"]["note"] == \
        "one_lr did not run at 1e-3"
    with pytest.raises(ValueError, match=r"lr: the sweep ran no row at 3e-2; its learning "
                                         r"rates: 1e-3, 1e-2"):
        declared_check(3e-2, [LO, HI])


def test_untuned_variants_of_the_sample_db_are_not_shown_as_tuned(tmp_path: Path) -> None:
    url = sample_db.copy_to(tmp_path)
    with results_db.open(url, readonly=True) as db:
        out = {r["variant"]: r for r in db.best_vs_best("gates-toy").iter_rows(named=True)}
    kv = out["kv_heads_x2"]  # run at 1e-2 only, the baseline over 4 LRs
    assert kv["verdict"] == NO_BEST_LR and kv["delta_pct"] is None and kv["best_lr"] is None
    assert kv["note"].startswith("kv_heads_x2 ran at one LR (1e-2) only")
    g1 = out["sdpa_elementwise"]  # its own LR ladder, 3 seeds: compared, held out
    assert g1["selection"] == LOSO and g1["verdict"] == "better" and g1["n"] == 3
