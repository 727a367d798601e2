"""Student's t distribution for the analysis: quantiles for one df or for many at once, and
the two-sided p-values of a column of t statistics (two_sided_p).

Thin wrappers over scipy's Cephes routine ``scipy.special.stdtrit``: a maintained, exact
implementation instead of a hand-written one. scipy is
imported inside the functions (``import scipy.special`` costs ~0.1-0.3 s; an
``import results_db`` that never computes a CI does not pay it). The quantiles are cached per
(p, df): the tables ask for the same few dfs over and over.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import polars as pl

_CACHE: dict[tuple[float, float], float] = {}  # (p, df) -> quantile; cleared when large
_CACHE_MAX = 200_000


def _check(p: float, df: float | None = None) -> None:
    if not 0.0 < p < 1.0 or (df is not None and not df > 0) or (df is not None
                                                                  and math.isnan(df)):
        got = f"p={p}" if df is None else f"p={p}, df={df}"
        raise ValueError(f"t_quantile: need 0 < p < 1 and df > 0, got {got}")


def t_quantiles(p: float, dfs: Iterable[float]) -> dict[float, float]:
    """{df: the ``p`` quantile of Student's t} for every distinct df (each > 0), the
    uncached ones in one vectorised scipy.special.stdtrit call."""
    _check(p)
    out: dict[float, float] = {}
    todo: list[float] = []
    for df in {float(d) for d in dfs}:
        _check(p, df)
        hit = _CACHE.get((p, df))
        if hit is None:
            todo.append(df)
        else:
            out[df] = hit
    if todo:
        import numpy as np
        from scipy.special import stdtrit

        if len(_CACHE) > _CACHE_MAX:
            _CACHE.clear()
        for df, t in zip(todo, stdtrit(np.array(todo), p).tolist(), strict=True):
            _CACHE[p, df] = float(t)
            out[df] = float(t)
    return out


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t (df > 0, 0 < p < 1)."""
    _check(p, df)
    return t_quantiles(p, (df,))[float(df)]


def two_sided_p(delta: pl.Series, se: pl.Series, df: pl.Series) -> pl.Series:
    """The two-sided p-value of "no change" for each row's t = delta / se on ``df`` degrees
    of freedom (scipy.special.stdtr, vectorised); se 0: p 0 for a non-zero delta, else 1;
    null where any input is null (no test)."""
    import numpy as np
    from scipy.special import stdtr

    d, s, f = (x.cast(pl.Float64).fill_null(np.nan).to_numpy() for x in (delta, se, df))
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.abs(d) / s
        p = np.where(s == 0.0, np.where(d == 0.0, 1.0, 0.0), 2.0 * stdtr(f, -t))
    p = np.where(np.isnan(d) | np.isnan(s) | np.isnan(f), np.nan, p)
    return pl.Series("p_value", p, dtype=pl.Float64).fill_nan(None)
