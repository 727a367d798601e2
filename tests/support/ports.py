"""A free TCP port for a test's server (PostgreSQL, Slurm, Ray, a dashboard).

Binding port 0 and reading it back answers with a port that is free now; the server binds it
later, so another process may take it in between (an outgoing connection's local port, most
often). Fine for a test's server started at once; the product never does this (trainer/dist.py).
"""

from __future__ import annotations

import socket


def free_port(host: str = "127.0.0.1") -> int:
    """A currently free TCP port on ``host``; nothing listens on it once this returns."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])
