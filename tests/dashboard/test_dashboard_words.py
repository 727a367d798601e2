"""The tables' words (AppTest on real SQLite DBs written by the submit path: the
57-run gates-toy sweep, tests.support.report_db, and the sample sweep):

- LR stability: a variant run at one LR read "0 of 0" seeds agreeing and a max stable LR of
  its only LR, under snake_case headers (best_lr, max_stable_lr, n_lrs);
- the ablation stability table's loss spikes and grad norm are the best LR's, unlabelled;
- the paper's Table 4 column mixed "94.000" and "1053".
"""

from __future__ import annotations

import pytest

from tests.support import dashboard_sample as sample
from tests.support import report_db
from tests.support.apppage import open_page


@pytest.fixture(scope="module")
def db_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = report_db.build(f"sqlite:///{tmp_path_factory.mktemp('words') / 'r.db'}")
    import results_db

    with results_db.open(url) as db:
        sample.fill(db)
    return url


def test_lr_stability_summary_headers_and_one_lr_rows(url: str) -> None:
    at = open_page("LR stability", report_db.SWEEP)
    summary = at.dataframe[0].value
    assert list(summary.columns) == ["variant", "best LR", "best val/loss", "max stable LR",
                                     "seeds agree", "per-seed max stable LR", "LRs"]
    rows = summary.set_index("variant")
    one = rows[rows["LRs"] == "1"]
    assert len(one) == 7  # the ablation rows ran at 3e-2 only
    assert set(one["max stable LR"]) == {"one LR: no ladder"}
    assert set(one["seeds agree"]) == {"one LR: no ladder"}
    assert not summary.isin(["0 of 0"]).any().any()
    assert rows.loc["sdpa_elementwise", "seeds agree"] == "3 of 3"  # a ladder: as before


def test_ablation_stability_says_which_lr_its_spikes_are_at(url: str) -> None:
    at = open_page("Ablation tables", report_db.SWEEP)
    at.radio(key="ab_kind").set_value("stability").run()
    assert not at.exception, [e.value for e in at.exception]
    table = next(d.value for d in at.dataframe if "Variant" in d.value.columns)
    assert {"Loss spikes at best LR", "Max grad norm at best LR"} <= set(table.columns)
    assert "Loss spikes" not in table.columns


def test_paper_table4_column_as_printed(url: str) -> None:
    at = open_page("Ablation tables", sample.SWEEP)
    at.radio(key="ab_kind").set_value("probes").run()
    table = next(d.value for d in at.dataframe if "Paper M-Act" in d.value.columns)
    shown = dict(zip(table["Variant"], table["Paper M-Act"], strict=True))
    assert shown["baseline"] == "1053" and shown["sdpa_elementwise"] == "94"
    for col in ("Paper M-Act", "Paper Gate score", "Paper F-Attn"):
        assert not [v for v in table[col] if v.endswith(".000")], table[col].tolist()
