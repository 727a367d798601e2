"""Trainer throughput: the DeepSpeed engine vs a bare PyTorch loop, torch.compile, gate overheads,
MFU.

    python benchmarks/trainer_throughput.py [--preset small] [--batch 8] [--seq 128]
        [--runners bare,engine,compile,g1e,g1h] [--rounds 5] [--steps 3] [--warmup 2]
        [--sequential] [--threads N] [--stat min|median] [--json PATH]

Runners train the same preset on the same fixed batches (host tensors, copied per step as the
trainer does):
  bare     plain PyTorch: forward (bf16 autocast on CUDA), backward, clip, AdamW
  engine   the trainer's own step (trainer.engine.train_step) on its DeepSpeed engine, ZeRO 0
  compile  the same with ``train.compile: true`` (torch.compile inside the engine)
  g1e/g1h  the engine with a G1 elementwise / headwise sigmoid gate
  engine_ar  the engine with DeepSpeed's gradient all-reduce left on at one rank (what the
           trainer did before the per-step sync fix; opt-in: it shows what the fix is worth)
Ratios printed side by side, with their targets: engine >= 0.95x bare; compile >= 1.3x
the eager bare loop (a GPU target); G1 headwise <= +1 % step time; G1 elementwise <= its added
FLOP share + 1 point; MFU per runner on CUDA (train FLOPs 6 N_matmul + 12 L T d_attn per token
against the GPU's dense bf16 peak).

Timing: *interleaved* by default on CPU (each round times ``--steps`` steps of every runner in
a shuffled order, so a noisy neighbour hits all alike; the estimate is the minimum per-step time
over rounds, ``--stat median`` for the median); *sequential* by default on CUDA and with
``--sequential``: one runner is built, warmed up, timed and freed before the next, so a large
model (``--preset paper-dense-1p7b --seq 2048``) needs memory for one runner only. Warm-up
steps absorb compilation (torch.compile's first steps take minutes on a CPU).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("TORCH_EXTENSIONS_DIR", os.path.expanduser(
    "~/.cache/gatesweep/torch_extensions"))

import torch  # noqa: E402
from torch import nn  # noqa: E402

from contract.config import RunSpec  # noqa: E402
from trainer.data import build_data  # noqa: E402
from trainer.dist import ensure_single_process_dist  # noqa: E402
from trainer.engine import build_engine, resolve_precision, to_device, train_step, trainer_clips  # noqa: E402
from trainer.model import build_model  # noqa: E402

# Dense bf16 tensor-core peaks (no sparsity), FLOP/s; longest matching name wins.
PEAK_BF16 = {"H200": 989e12, "H100": 989e12, "H800": 989e12, "GH200": 989e12, "B200": 2250e12,
             "A100": 312e12, "L40S": 362e12, "L40": 181e12, "A10": 125e12, "L4": 121e12}
G1E = [{"position": "G1", "granularity": "elementwise"}]
G1H = [{"position": "G1", "granularity": "headwise"}]


@dataclass(frozen=True)
class RunnerSpec:
    gates: tuple[dict, ...] = ()
    compile: bool = False  # train.compile
    # DeepSpeed's one-rank gradient all-reduce, which build_engine turns off: on only to show
    # what that fix is worth (the `engine_ar` runner)
    one_rank_allreduce: bool = False


RUNNERS: dict[str, RunnerSpec] = {
    "bare": RunnerSpec(), "engine": RunnerSpec(), "compile": RunnerSpec(compile=True),
    "g1e": RunnerSpec(gates=tuple(G1E)), "g1h": RunnerSpec(gates=tuple(G1H)),
    "engine_ar": RunnerSpec(one_rank_allreduce=True)}


@dataclass
class Runner:
    name: str
    step: Callable[[int], None]
    flops_per_token: float
    params: int
    times: list[float] = field(default_factory=list)  # seconds per step, one per round


def train_flops_per_token(model: nn.Module, spec: RunSpec) -> float:
    """6 x (matmul weights) + 12 x layers x T x attention width (QK^T and AV, no causal
    discount): the usual training-FLOPs estimate, measured from the model's Linear layers."""
    matmul = sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.Linear))
    cfg = spec.model
    attn = 12 * cfg.n_layer * spec.train.seq_len * cfg.n_head * cfg.head_dim
    return 6 * matmul + attn


def make_spec(args: argparse.Namespace, name: str) -> RunSpec:
    runner = RUNNERS[name]
    return RunSpec(name=f"bench-{name}", model={"preset": args.preset,
                                                "gates": list(runner.gates)},
                   train={"steps": 10_000, "batch_size": args.batch, "seq_len": args.seq,
                          "warmup": 10, "grad_clip": 1.0, "precision": "auto",
                          "compile": runner.compile})


def engine_runner(name: str, spec: RunSpec, batches: list) -> Runner:
    torch.manual_seed(0)
    model = build_model(spec.model)
    flops, params = train_flops_per_token(model, spec), sum(p.numel() for p in model.parameters())
    engine = build_engine(model, spec, resolve_precision("auto"))
    if RUNNERS[name].one_rank_allreduce:
        engine.enable_backward_allreduce = True
    own_clip = trainer_clips(spec)
    pending: list[torch.Tensor] = []

    def step(i: int) -> None:
        pending.append(train_step(engine, [batches[i % len(batches)]], 1.0, own_clip))
        if len(pending) >= 10:  # the trainer's batched read (log_every 10)
            torch.stack(pending).cpu()
            pending.clear()

    return Runner(name, step, flops, params)


def bare_runner(spec: RunSpec, batches: list, device: torch.device) -> Runner:
    torch.manual_seed(0)
    model = build_model(spec.model).to(device)
    flops, params = train_flops_per_token(model, spec), sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=spec.train.lr, betas=spec.train.betas,
                            fused=True)  # as the trainer's (trainer/engine.py)
    bf16 = device.type == "cuda"

    def step(i: int) -> None:
        x, y = batches[i % len(batches)]
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            out = model(to_device(x, device), to_device(y, device))
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), spec.train.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)

    return Runner("bare", step, flops, params)


def build(name: str, args: argparse.Namespace, batches: list, device: torch.device) -> Runner:
    spec = make_spec(args, name)
    return bare_runner(spec, batches, device) if name == "bare" else engine_runner(name, spec,
                                                                                    batches)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def time_round(r: Runner, args: argparse.Namespace, rnd: int, device: torch.device) -> None:
    sync(device)
    t0 = time.perf_counter()
    for i in range(args.steps):
        r.step(rnd * args.steps + i)
    sync(device)
    r.times.append((time.perf_counter() - t0) / args.steps)


def warm_up(r: Runner, args: argparse.Namespace, device: torch.device) -> None:
    t0 = time.perf_counter()
    for i in range(args.warmup):
        r.step(i)
    sync(device)
    print(f"{r.name}: warm-up {args.warmup} steps {time.perf_counter() - t0:.1f}s", flush=True)


ERRORS: dict[str, str] = {}  # runner -> why it has no figures (fail soft: the others still run)


def _failed(name: str, exc: BaseException) -> None:
    ERRORS[name] = f"{type(exc).__name__}: {exc}"[:500]
    print(f"{name}: FAILED {ERRORS[name]}", flush=True)
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def measure_interleaved(names: list[str], args: argparse.Namespace, batches: list,
                        device: torch.device) -> dict[str, Runner]:
    runners = {}
    for n in names:
        try:
            runners[n] = build(n, args, batches, device)
            warm_up(runners[n], args, device)
        except Exception as exc:  # noqa: BLE001 - reported in the output and the JSON
            runners.pop(n, None)
            _failed(n, exc)
    rng = random.Random(0)
    for rnd in range(args.rounds):
        order = list(runners.values())
        rng.shuffle(order)
        for r in order:
            time_round(r, args, rnd, device)
        print(f"round {rnd + 1}/{args.rounds}: " + "  ".join(
            f"{r.name}={r.times[-1] * 1e3:.1f}ms" for r in runners.values()), flush=True)
    return runners


def measure_sequential(names: list[str], args: argparse.Namespace, batches: list,
                       device: torch.device) -> dict[str, Runner]:
    """One runner in memory at a time: build, warm up, time, free."""
    done: dict[str, Runner] = {}
    for n in names:
        try:
            r = build(n, args, batches, device)
            warm_up(r, args, device)
            for rnd in range(args.rounds):
                time_round(r, args, rnd, device)
        except Exception as exc:  # noqa: BLE001 - e.g. out of memory: the next runner still runs
            r = None
            _failed(n, exc)
            continue
        r.step = _freed  # drop the closure: the model, engine and optimizer go with it
        done[n] = r
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
            print(f"{n}: {statistics.median(done[n].times) * 1e3:.1f}ms/step; peak memory "
                  f"{torch.cuda.max_memory_allocated() / 2**30:.1f} GiB", flush=True)
            torch.cuda.reset_peak_memory_stats()
    return done


def _freed(i: int) -> None:
    raise RuntimeError("this runner was freed after timing")


def peak_flops(device: torch.device) -> float | None:
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name()
    return next((v for k, v in sorted(PEAK_BF16.items(), key=lambda kv: -len(kv[0]))
                 if k in name), None)


def figures(runners: dict[str, Runner], args: argparse.Namespace,
            device: torch.device) -> dict[str, object]:
    """Per-runner figures and the side-by-side ratios (also the --json document)."""
    tokens = args.batch * args.seq
    stat = min if args.stat == "min" else statistics.median
    peak = peak_flops(device)
    per = {}
    for n, r in runners.items():
        sec = stat(r.times)
        per[n] = {"ms_per_step": sec * 1e3, "tokens_per_s": tokens / sec,
                  "median_ms": statistics.median(r.times) * 1e3,
                  "spread": max(r.times) / min(r.times) - 1, "params": r.params,
                  "flops_per_token": r.flops_per_token,
                  "mfu": None if peak is None else tokens / sec * r.flops_per_token / peak}
    ratios: dict[str, float] = {}
    if "bare" in per and "engine" in per:
        ratios["engine_vs_bare"] = per["bare"]["ms_per_step"] / per["engine"]["ms_per_step"]
    if "bare" in per and "compile" in per:
        ratios["compile_vs_bare"] = per["bare"]["ms_per_step"] / per["compile"]["ms_per_step"]
    if "engine" in per and "engine_ar" in per:
        ratios["engine_vs_engine_ar"] = (per["engine_ar"]["ms_per_step"]
                                         / per["engine"]["ms_per_step"])
    if "engine" in per and "compile" in per:
        ratios["compile_vs_engine"] = per["engine"]["ms_per_step"] / per["compile"]["ms_per_step"]
    for g in ("g1e", "g1h"):
        if g in per and "engine" in per:
            ratios[f"{g}_overhead"] = per[g]["ms_per_step"] / per["engine"]["ms_per_step"] - 1
            ratios[f"{g}_flop_share"] = (per[g]["flops_per_token"]
                                         / per["engine"]["flops_per_token"] - 1)
    return {"machine": f"{platform.node()} {platform.processor() or platform.machine()}, "
                       f"{os.cpu_count()} cpus",
            "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
            "precision": "bf16" if device.type == "cuda" else "fp32",
            "torch": torch.__version__, "threads": torch.get_num_threads(),
            "preset": args.preset, "batch": args.batch, "seq": args.seq, "stat": args.stat,
            "rounds": args.rounds, "steps": args.steps, "mode": args.mode,
            "date": time.strftime("%Y-%m-%d"), "runners": per, "ratios": ratios,
            "errors": dict(ERRORS)}


def print_report(doc: dict) -> None:
    per, ratios = doc["runners"], doc["ratios"]
    print(f"\n{doc['device']} ({doc['precision']}), preset {doc['preset']}, batch "
          f"{doc['batch']} x seq {doc['seq']}, {doc['stat']} over {doc['rounds']} x "
          f"{doc['steps']} steps, {doc['mode']}")
    print(f"{'runner':<9}{'ms/step':>10}{'tokens/s':>13}{'MFU':>8}{'spread':>8}")
    for n, f in per.items():
        mfu = "-" if f["mfu"] is None else f"{f['mfu'] * 100:.1f}%"
        print(f"{n:<9}{f['ms_per_step']:>10.2f}{f['tokens_per_s']:>13,.0f}{mfu:>8}"
              f"{f['spread'] * 100:>7.1f}%")
    rows = [("engine vs bare", "engine_vs_bare", "x", ">= 0.95x"),
            ("compile vs bare (eager)", "compile_vs_bare", "x", ">= 1.3x (GPU)"),
            ("compile vs engine", "compile_vs_engine", "x", ""),
            ("engine vs engine_ar", "engine_vs_engine_ar", "x", "")]
    print(f"\n{'ratio':<26}{'value':>10}   target")
    for label, key, unit, target in rows:
        if key in ratios:
            print(f"{label:<26}{ratios[key]:>9.3f}{unit}   {target}")
    for g, label, slack in (("g1e", "G1 elementwise", None), ("g1h", "G1 headwise", 0.01)):
        if f"{g}_overhead" in ratios:
            share = ratios[f"{g}_flop_share"]
            target = share + 0.01 if slack is None else slack
            print(f"{label + ' overhead':<26}{ratios[f'{g}_overhead'] * 100:>+9.2f}%   "
                  f"<= {target * 100:.2f}% (added FLOP share {share * 100:.2f}%)")


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="small")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--runners", default="bare,engine,compile,g1e,g1h",
                    help=f"comma-separated subset of {','.join(RUNNERS)}")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--sequential", action="store_true",
                    help="one runner in memory at a time (default on CUDA)")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch default)")
    ap.add_argument("--stat", choices=["min", "median"], default="min")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = ap.parse_args(argv)
    names = [n.strip() for n in args.runners.split(",") if n.strip()]
    unknown = [n for n in names if n not in RUNNERS]
    if unknown or not names:
        ap.error(f"--runners: unknown {unknown}; expected a subset of {','.join(RUNNERS)}")
    args.names = names
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if any(n != "bare" for n in args.names):
        try:
            ensure_single_process_dist()  # imports deepspeed
        except Exception as exc:  # noqa: BLE001 - keep the bare loop's figures
            for n in [n for n in args.names if n != "bare"]:
                _failed(n, exc)
            args.names = [n for n in args.names if n == "bare"]
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    args.mode = "sequential" if args.sequential or device.type == "cuda" else "interleaved"
    print(f"{platform.node()}: torch {torch.__version__}, threads {torch.get_num_threads()}, "
          f"device {device}, preset {args.preset}, batch {args.batch} x seq {args.seq}, "
          f"runners {','.join(args.names)} ({args.mode})", flush=True)
    batches = [build_data(make_spec(args, "bare")).train_batch(i) for i in range(4)]
    measure = measure_sequential if args.mode == "sequential" else measure_interleaved
    doc = figures(measure(args.names, args, batches, device), args, device)
    print_report(doc)
    for n, why in ERRORS.items():
        print(f"{n}: no figures ({why})")
    if args.json:
        args.json.write_text(json.dumps(doc, indent=1))
    return 1 if ERRORS else 0


if __name__ == "__main__":
    sys.exit(main())
