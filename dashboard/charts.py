"""Altair charts (altair ships with streamlit: no new dependency) and the loss-spike marker.

Charts take already-downsampled long frames; nothing here queries the DB.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import altair as alt
import numpy as np
import polars as pl

SPIKE_WINDOW = 20  # same rule as the trainer's detector (trainer/stability.py)
SPIKE_MADS = 6.0
SPIKE_MIN_REL = 0.10
_LAYER = re.compile(r"/layer_(\d+)$")


def spike_mask(values: np.ndarray, window: int = SPIKE_WINDOW) -> np.ndarray:
    """True where a point exceeds the median of the previous ``window`` points by more than
    max(6 * MAD, 10% of that median): the trainer's rule, applied to the plotted series.

    values: (T,) floats, NaN allowed (never a spike, and left out of the windows).
    """
    out = np.zeros(values.shape[0], dtype=bool)
    if values.shape[0] <= window:
        return out
    # (T - window, window): the `window` points before each candidate point
    windows = np.lib.stride_tricks.sliding_window_view(values[:-1], window)
    med = np.nanmedian(windows, axis=1)
    mad = np.nanmedian(np.abs(windows - med[:, None]), axis=1)
    cur = values[window:]
    thresh = np.maximum(SPIKE_MADS * mad, SPIKE_MIN_REL * np.abs(med))
    with np.errstate(invalid="ignore"):
        out[window:] = np.nan_to_num(cur - med, nan=-np.inf) > thresh
    return out


def mark_spikes(series: pl.DataFrame) -> pl.DataFrame:
    """(run, step, value) sorted by step per run -> the rows that are spikes."""
    parts = []
    for _, grp in series.sort("step").group_by("run", maintain_order=True):
        vals = grp["value"].cast(pl.Float64).fill_null(np.nan).to_numpy()
        parts.append(grp.filter(pl.Series(spike_mask(vals))))
    return pl.concat(parts) if parts else series.head(0)


def curves(series: pl.DataFrame, title: str, log_y: bool = False,
           spikes: pl.DataFrame | None = None) -> alt.LayerChart | alt.Chart:
    """Overlaid lines of (run, step, value); spikes as red points on top."""
    scale = alt.Scale(type="log") if log_y else alt.Scale(zero=False)
    base = alt.Chart(series.to_pandas()).mark_line(strokeWidth=1.2).encode(
        x=alt.X("step:Q", title="step"), y=alt.Y("value:Q", title=title, scale=scale),
        color=alt.Color("run:N", title="run"), tooltip=["run", "step", "value"])
    if spikes is None or spikes.is_empty():
        return base.properties(height=280).interactive()
    dots = alt.Chart(spikes.to_pandas()).mark_point(color="red", size=60, filled=True).encode(
        x="step:Q", y=alt.Y("value:Q", scale=scale), tooltip=["run", "step", "value"])
    return alt.layer(base, dots).properties(height=280).interactive()


def per_layer(frame: pl.DataFrame, title: str) -> alt.Chart:
    """frame (row, layer, value): one line per variant row over the layers."""
    return alt.Chart(frame.to_pandas()).mark_line(point=True).encode(
        x=alt.X("layer:O", title="layer"), y=alt.Y("value:Q", title=title),
        color=alt.Color("row:N", title="variant"),
        tooltip=["row", "layer", "value"]).properties(height=260)


def layer_index(name: str) -> int | None:
    """'probe/max_activation/layer_3' -> 3; the aggregate name -> None."""
    m = _LAYER.search(name)
    return int(m.group(1)) if m else None


def parse_histogram(data: Any) -> list[tuple[str, list[float], list[float]]]:
    """A gate_histogram artifact -> [(label, edges, counts)].

    Accepts the trainer's {"edges": [...], "layers": {"layer_i": [counts]}} (shared edges),
    {"edges"|"bins": [...], "counts": [...]}, or per-layer nestings {"layers": [{...}]} /
    {"layer_i": {...}}; anything else yields [] (shown as "no histogram").
    """
    if isinstance(data, Mapping):
        edges = data.get("edges", data.get("bins"))
        counts = data.get("counts")
        if isinstance(edges, list) and isinstance(counts, list) and len(edges) == len(counts) + 1:
            return [(str(data.get("layer", "all")), [float(e) for e in edges],
                     [float(c) for c in counts])]
        if isinstance(edges, list) and isinstance(data.get("layers"), Mapping):
            return [(str(k), [float(e) for e in edges], [float(c) for c in v])
                    for k, v in data["layers"].items()
                    if isinstance(v, list) and len(v) == len(edges) - 1]
        if isinstance(data.get("layers"), list):
            return [h for i, sub in enumerate(data["layers"])
                    for h in _relabel(parse_histogram(sub), f"layer_{i}")]
        return [h for k, sub in data.items() if isinstance(sub, Mapping)
                for h in _relabel(parse_histogram(sub), str(k))]
    return []


def combine_layers(hists: list[tuple[str, list[float], list[float]]], label: str
                   ) -> list[tuple[str, list[float], list[float]]]:
    """Sum the per-layer counts that share bin edges into one fraction-per-bin histogram
    (so runs with different numbers of scores compare); others are kept per layer."""
    if not hists or any(e != hists[0][1] for _, e, _ in hists):
        return [(f"{label} {lab}", e, c) for lab, e, c in hists]
    total = np.sum([c for _, _, c in hists], axis=0)
    frac = (total / total.sum()).tolist() if total.sum() > 0 else total.tolist()
    return [(label, hists[0][1], frac)]


def _relabel(hists: list[tuple[str, list[float], list[float]]], label: str) -> list:
    return [(label if lab == "all" else lab, e, c) for lab, e, c in hists]


def histogram(label_edges_counts: list[tuple[str, list[float], list[float]]]) -> alt.Chart:
    """Bars of the gate-score distribution (fraction of scores per bin); a colour per label."""
    rows = [{"label": lab, "lo": e[i], "hi": e[i + 1], "count": c[i]}
            for lab, e, c in label_edges_counts for i in range(len(c))]
    return alt.Chart(pl.DataFrame(rows).to_pandas()).mark_bar(opacity=0.6).encode(
        x=alt.X("lo:Q", title="gate score", bin="binned"), x2="hi:Q",
        y=alt.Y("count:Q", stack=None, title="fraction of gate scores"),
        color=alt.Color("label:N", title=""),
        tooltip=["label", "lo", "hi", "count"]).properties(height=260)
