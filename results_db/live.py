"""LiveMixin: reads about runs in flight (per-run step, last loss, tokens/s, ETA, heartbeat age)."""

from __future__ import annotations


class LiveMixin:
    """Filled in by issue 13 (dashboard Overview, orchestrator progress, CLI status)."""
