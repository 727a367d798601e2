"""Single-process torch.distributed set-up for runs without a launcher.

DeepSpeed (its engine and its MoE layer) expects a process group. Under torchrun, the
``deepspeed`` launcher or Ray Train the environment and the group already exist and this is a
no-op; a plain ``python`` process gets RANK=0, WORLD_SIZE=1 and a group over an in-process
store (``HashStore``), so it opens no port: several single-process runs on one machine (concurrent
Tune trials) cannot collide on one. (A free port read by binding port 0 and handed to torch's
TCPStore later is a race: in between, any outgoing connection on the machine may take it as its
local port, and the run dies with EADDRINUSE.)

No comm-op compile on CPU: DeepSpeed's torch backend builds its
shared-memory all-reduce op (``deepspeed_shm_comm``, a C++ extension: 60-80 s and ~96 CPU-s on 2
cores, cached in TORCH_EXTENSIONS_DIR) whenever it starts on the CPU accelerator. Only
``inference_all_reduce`` uses it (DeepSpeed's tensor-parallel inference layers,
``deepspeed.module_inject``); training all-reduces (ZeRO's gradients, our metrics) go through
torch.distributed, so no run of ours, of one process or of many, ever calls it.
``skip_shm_comm_op`` marks the op unavailable in DeepSpeed's own table of compatible ops
(``deepspeed.ops.__compatible_ops__``, a dict DeepSpeed keeps and reads in
``deepspeed.comm.torch.build_shm_op``) before DeepSpeed's comm starts, so DeepSpeed uses plain
gloo, as it does on any platform without the op.
"""

from __future__ import annotations

import os

import torch


def _launched() -> bool:
    """A launcher (torchrun, ``deepspeed``) set the rendezvous: the group starts from the env."""
    return "MASTER_PORT" in os.environ or int(os.environ.get("WORLD_SIZE", "1")) > 1


def _default_env() -> None:
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    os.environ.setdefault("LOCAL_RANK", "0")


SHM_COMM_OP = "deepspeed_shm_comm"


def skip_shm_comm_op() -> None:
    """Tell DeepSpeed its shared-memory comm op is unavailable (CPU runs: nothing calls it)."""
    import deepspeed.ops

    deepspeed.ops.__compatible_ops__[SHM_COMM_OP] = False


def ensure_single_process_dist() -> None:
    """Fill the launcher variables when absent and initialise torch.distributed once.

    Backend: nccl on CUDA, gloo otherwise (DeepSpeed's CPU accelerator reports gloo/ccl; we
    pass the backend explicitly so a CPU run never asks for oneCCL).
    """
    import torch.distributed as tdist

    os.environ.setdefault("DS_ACCELERATOR", "cuda" if torch.cuda.is_available() else "cpu")
    if not torch.cuda.is_available():  # the op is CPU-only
        skip_shm_comm_op()  # before DeepSpeed's comm backend starts (here or in initialize)
    if tdist.is_available() and tdist.is_initialized():
        return
    import deepspeed

    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if not _launched():
        _default_env()
        # DeepSpeed wraps a group that already exists (its TorchBackend skips init then)
        tdist.init_process_group(backend, store=tdist.HashStore(), rank=0, world_size=1)
    deepspeed.init_distributed(dist_backend=backend, auto_mpi_discovery=False)
