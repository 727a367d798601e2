"""AnalysisMixin: the ResultsDB methods that turn stored runs into conclusions."""

from __future__ import annotations


class AnalysisMixin:
    """Filled in by issue 10 (baseline, leaderboard with CIs/verdicts, effects, stability)."""
