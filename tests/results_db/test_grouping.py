"""results_db.read.grouping.group_stats (the Explore page's "group by"): n, mean, std, min, max per
value of a key, checked against numpy; non-finite values are counted as runs, not as values."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from results_db.read.grouping import GROUP_COLUMNS, group_stats


def test_matches_numpy_per_group_and_orders_keys() -> None:
    rng = np.random.default_rng(7)
    keys = [3e-3, 1e-2, 1e-2, 3e-3, None, 1e-1, 1e-2, 3e-3]
    vals = rng.normal(8.0, 0.5, len(keys)).tolist()
    vals[1] = math.nan  # a diverged run: a run of its group, no value
    out = group_stats(pl.DataFrame({"lr": keys, "ppl": vals}), "lr", "ppl")
    assert out.columns == list(GROUP_COLUMNS)
    assert out["group"].to_list() == ["0.003", "0.01", "0.1", "–"]  # numeric order, none last
    for row in out.iter_rows(named=True):
        mine = [v for k, v in zip(keys, vals, strict=True)
                if (k is None and row["key"] is None) or k == row["key"]]
        finite = np.array([v for v in mine if math.isfinite(v)])
        assert row["runs"] == len(mine) and row["n"] == len(finite)
        assert row["mean"] == pytest.approx(finite.mean())
        assert (row["min"], row["max"]) == pytest.approx((finite.min(), finite.max()))
        if len(finite) > 1:
            assert row["std"] == pytest.approx(finite.std(ddof=1))
        else:
            assert row["std"] is None


def test_text_keys_and_a_missing_column() -> None:
    out = group_stats(pl.DataFrame({"pos": ["G2", "G1", None, "G1"], "v": [1.0, 2.0, 3.0, 4.0]}),
                      "pos", "v")
    assert out.select("group", "runs", "mean").rows() == [("G1", 2, 3.0), ("G2", 1, 1.0),
                                                          ("–", 1, 3.0)]
    with pytest.raises(ValueError, match="no column 'lr'"):
        group_stats(pl.DataFrame({"v": [1.0]}), "lr", "v")
