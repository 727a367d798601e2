"""Trainer throughput: DeepSpeed engine vs a bare PyTorch loop, and the G1 gates' step overhead.

    python benchmarks/trainer_throughput.py [--preset small] [--batch 8] [--seq 128]
                                            [--rounds 5] [--steps 3] [--warmup 2]

Four runners train the same preset on the same fixed batches: ``bare`` (plain PyTorch loop:
forward, backward, clip, AdamW), ``ds`` (the trainer's DeepSpeed engine, ZeRO 0), and
``ds+G1e`` / ``ds+G1h`` (the engine with a G1 elementwise / headwise sigmoid gate). The
runners are *interleaved*: each round times ``--steps`` steps of every runner, in a shuffled
order, so a noisy neighbour on a shared machine hits all of them alike. Interference only ever
adds time, so the estimate is the *minimum* per-step time over rounds (``--stat median`` for the
median); both are printed with the spread. ``--threads 1`` makes CPU timings far steadier on a
loaded 2-core box (no OpenMP barrier stalls). Targets: engine >= 0.9x the bare loop; headwise
overhead <= 2%; elementwise overhead <= its added FLOP share + 2 points. On CUDA everything runs
in bf16 and MFU is printed (against the GPU's dense bf16 peak, when known).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

os.environ.setdefault("DS_ACCELERATOR", "cpu" if not os.environ.get("CUDA_VISIBLE_DEVICES")
                      and not os.path.exists("/dev/nvidia0") else "cuda")
os.environ.setdefault("TORCH_EXTENSIONS_DIR", os.path.expanduser(
    "~/.cache/gatesweep/torch_extensions"))

import torch  # noqa: E402
from torch import nn  # noqa: E402

from trainer.config import RunSpec  # noqa: E402
from trainer.data import build_data  # noqa: E402
from trainer.dist import ensure_single_process_dist  # noqa: E402
from trainer.engine import build_engine, resolve_precision  # noqa: E402
from trainer.model import build_model  # noqa: E402

PEAK_BF16 = {"H200": 989e12, "H100": 989e12, "A100": 312e12, "L40S": 362e12, "A10": 125e12}
GATES = {"baseline": [], "G1 elementwise": [{"position": "G1", "granularity": "elementwise"}],
         "G1 headwise": [{"position": "G1", "granularity": "headwise"}]}


@dataclass
class Runner:
    name: str
    step: Callable[[int], None]
    spec: RunSpec
    flops_per_token: float
    times: list[float] = field(default_factory=list)  # seconds per step, one per round


def train_flops_per_token(model: nn.Module, spec: RunSpec) -> float:
    """6 x (matmul weights) + 12 x layers x T x attention width (QK^T and AV, no causal
    discount): the usual training-FLOPs estimate, measured from the model's Linear layers."""
    matmul = sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.Linear))
    cfg = spec.model
    attn = 12 * cfg.n_layer * spec.train.seq_len * cfg.n_head * cfg.head_dim
    return 6 * matmul + attn


def make_spec(args: argparse.Namespace, gates: list[dict]) -> RunSpec:
    return RunSpec(name="bench", model={"preset": args.preset, "gates": gates},
                   train={"steps": 10_000, "batch_size": args.batch, "seq_len": args.seq,
                          "warmup": 10, "grad_clip": 1.0, "precision": "auto"})


def ds_runner(name: str, spec: RunSpec, batches: list, device: torch.device) -> Runner:
    torch.manual_seed(0)
    model = build_model(spec.model)
    flops = train_flops_per_token(model, spec)
    engine = build_engine(model, spec, resolve_precision("auto"))

    def step(i: int) -> None:
        x, y = batches[i % len(batches)]
        out = engine(x.to(engine.device), y.to(engine.device))
        engine.backward(out.loss)
        engine.step()

    return Runner(name, step, spec, flops)


def bare_runner(spec: RunSpec, batches: list, device: torch.device) -> Runner:
    torch.manual_seed(0)
    model = build_model(spec.model).to(device)
    flops = train_flops_per_token(model, spec)
    opt = torch.optim.AdamW(model.parameters(), lr=spec.train.lr, betas=spec.train.betas)
    bf16 = device.type == "cuda"

    def step(i: int) -> None:
        x, y = batches[i % len(batches)]
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            out = model(x.to(device), y.to(device))
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), spec.train.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)

    return Runner("bare", step, spec, flops)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def measure(runners: list[Runner], args: argparse.Namespace, device: torch.device) -> None:
    for r in runners:  # warm-up: allocator, kernels, optimizer state
        for i in range(args.warmup):
            r.step(i)
    sync(device)
    rng = random.Random(0)
    for rnd in range(args.rounds):
        order = runners[:]
        rng.shuffle(order)
        for r in order:
            t0 = time.perf_counter()
            for i in range(args.steps):
                r.step(rnd * args.steps + i)
            sync(device)
            r.times.append((time.perf_counter() - t0) / args.steps)
        print(f"round {rnd + 1}/{args.rounds}: " + "  ".join(
            f"{r.name}={r.times[-1] * 1e3:.0f}ms" for r in runners), flush=True)


def report(runners: dict[str, Runner], args: argparse.Namespace, device: torch.device) -> None:
    tokens = args.batch * args.seq
    stat = min if args.stat == "min" else statistics.median
    med = {k: stat(r.times) for k, r in runners.items()}
    print(f"\nestimate: {args.stat} over {args.rounds} rounds of {args.steps} step(s); medians: "
          + "  ".join(f"{k}={statistics.median(r.times) * 1e3:.0f}ms" for k, r in runners.items()))
    print(f"\n{'runner':<16}{'ms/step':>10}{'tokens/s':>12}{'vs':>10}{'ratio':>9}{'target':>22}")
    print(f"{'bare':<16}{med['bare'] * 1e3:>10.1f}{tokens / med['bare']:>12.0f}")
    ratio = med["bare"] / med["ds"]
    print(f"{'ds':<16}{med['ds'] * 1e3:>10.1f}{tokens / med['ds']:>12.0f}{'bare':>10}"
          f"{ratio:>8.3f}x{'tokens/s >= 0.90x':>22}")
    base_flops = runners["ds"].flops_per_token
    for key, label in (("ds+G1e", "G1 elementwise"), ("ds+G1h", "G1 headwise")):
        over = med[key] / med["ds"] - 1
        share = runners[key].flops_per_token / base_flops - 1
        target = share + 0.02 if key == "ds+G1e" else 0.02
        print(f"{key:<16}{med[key] * 1e3:>10.1f}{tokens / med[key]:>12.0f}{'ds':>10}"
              f"{over * 100:>+8.2f}%{f'<= {target * 100:.2f}%':>22}"
              f"   (added FLOP share {share * 100:.2f}%)")
    spread = max(max(r.times) / min(r.times) - 1 for r in runners.values())
    print(f"\nmax spread (slowest/fastest round - 1) over runners: {spread * 100:.1f}%")
    if device.type == "cuda":
        name = torch.cuda.get_device_name()
        peak = next((v for k, v in PEAK_BF16.items() if k in name), None)
        achieved = tokens / med["ds"] * base_flops
        mfu = f"{achieved / peak * 100:.1f}%" if peak else "unknown peak"
        print(f"{name}: {achieved / 1e12:.1f} TFLOP/s (bf16), MFU {mfu}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="small")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch default)")
    ap.add_argument("--stat", choices=["min", "median"], default="min")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    ensure_single_process_dist()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    print(f"{platform.node()} {platform.processor() or platform.machine()} "
          f"{os.cpu_count()} cpus, torch {torch.__version__} threads {torch.get_num_threads()},"
          f" device {device}, preset {args.preset}, batch {args.batch} x seq {args.seq}")
    base = make_spec(args, GATES["baseline"])
    batches = [build_data(base).train_batch(i) for i in range(4)]
    runners = {"bare": bare_runner(base, batches, device),
               "ds": ds_runner("ds", base, batches, device),
               "ds+G1e": ds_runner("ds+G1e", make_spec(args, GATES["G1 elementwise"]), batches,
                                   device),
               "ds+G1h": ds_runner("ds+G1h", make_spec(args, GATES["G1 headwise"]), batches,
                                   device)}
    measure(list(runners.values()), args, device)
    report(runners, args, device)


if __name__ == "__main__":
    main()
