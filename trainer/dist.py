"""Single-process torch.distributed set-up for runs without a launcher.

DeepSpeed (its engine and its MoE layer) expects a process group. Under torchrun, the
``deepspeed`` launcher or Ray Train the environment and the group already exist and this is a
no-op; a plain ``python`` process gets RANK=0, WORLD_SIZE=1 and a free MASTER_PORT, so several
single-process runs on one machine (concurrent Tune trials) do not collide on a port.
"""

from __future__ import annotations

import os
import socket

import torch


def free_port(host: str = "127.0.0.1") -> int:
    """A currently free TCP port, by binding port 0 and reading it back."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _default_env() -> None:
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    os.environ.setdefault("LOCAL_RANK", "0")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    if "MASTER_PORT" not in os.environ:
        os.environ["MASTER_PORT"] = str(free_port(os.environ["MASTER_ADDR"]))


def ensure_single_process_dist() -> None:
    """Fill the launcher variables when absent and initialise torch.distributed once.

    Backend: nccl on CUDA, gloo otherwise (DeepSpeed's CPU accelerator reports gloo/ccl; we
    pass the backend explicitly so a CPU run never asks for oneCCL).
    """
    import torch.distributed as tdist

    if tdist.is_available() and tdist.is_initialized():
        return
    os.environ.setdefault("DS_ACCELERATOR", "cuda" if torch.cuda.is_available() else "cpu")
    _default_env()
    import deepspeed

    backend = "nccl" if torch.cuda.is_available() else "gloo"
    deepspeed.init_distributed(dist_backend=backend, auto_mpi_discovery=False)
