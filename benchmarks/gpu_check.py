"""GPU check: the ``small`` preset, baseline vs G1 elementwise gate, bf16, a plain torch loop.

    bash benchmarks/gpu_check.sh [--preset small] [--batch 32] [--seq 512] [--steps 60]
    GPU_CHECK_CPU_SMOKE=1 bash benchmarks/gpu_check.sh     # 3 tiny steps on the CPU (CI)

Needs only torch + pydantic (+ numpy): no DeepSpeed, no Ray, no orchestrator, so it runs on a
bare GPU box. Uses the trainer's model code (trainer.model.build_model), so what it measures is
what the sweeps train. Prints, per variant: tokens/s, MFU (6*N_matmul + 12*L*T*d_attn FLOPs
per token against the GPU's dense bf16 peak), the loss before/after, and the mechanistic
probes of the trained model (first-token attention = attention sink, max activation, mean gate
score); then the gate's step-time overhead. ``--json PATH`` also writes the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
from torch import nn

from contract.config import ModelConfig
from trainer.model import build_model

# Dense bf16 tensor-core peaks (no sparsity), FLOP/s.
PEAK_BF16 = {"H200": 989e12, "H100": 989e12, "H800": 989e12, "GH200": 989e12, "B200": 2250e12,
             "A100": 312e12, "A800": 312e12, "L40S": 362e12, "L40": 181e12, "A10": 125e12,
             "L4": 121e12, "RTX 4090": 165e12, "A6000": 155e12}
VARIANTS = {"baseline": [], "G1-elem": [{"position": "G1", "granularity": "elementwise"}],
            "G1-head": [{"position": "G1", "granularity": "headwise"}]}


@dataclass
class Figures:
    variant: str
    device: str
    precision: str
    params: int
    tokens_per_s: float
    step_ms: float
    mfu: float | None
    loss_first: float
    loss_last: float
    first_token_attention: float
    max_activation: float
    gate_score_mean: float | None


def flops_per_token(model: nn.Module, cfg: ModelConfig, seq: int) -> float:
    """6 x matmul weights (forward + backward) + 12 x L x T x attention width (QK^T, AV)."""
    matmul = sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.Linear))
    return 6 * matmul + 12 * cfg.n_layer * seq * cfg.n_head * cfg.head_dim


def peak_flops(device: torch.device) -> float | None:
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((v for k, v in sorted(PEAK_BF16.items(), key=lambda kv: -len(kv[0]))
                 if k in name), None)


def batches(vocab: int, batch: int, seq: int, n: int, device: torch.device) -> list:
    """Learnable synthetic data (the trainer's Markov+copy task) for small vocabularies when
    available, else uniform tokens."""
    try:
        if vocab > 4096:  # the chain's set-up is O(vocab^2); throughput needs no learnable data
            raise ImportError
        from trainer.data import SyntheticSource, _generator

        src = SyntheticSource(vocab)
        seqs = [src.sample(_generator(0, "gpu_check", i), batch, seq + 1) for i in range(n)]
    except ImportError:  # a bare box without numpy: any tokens do for throughput
        g = torch.Generator().manual_seed(0)
        seqs = [torch.randint(vocab, (batch, seq + 1), generator=g) for _ in range(n)]
    return [(s[:, :-1].to(device), s[:, 1:].to(device)) for s in seqs]  # (B, T), (B, T)


def run_variant(name: str, args: argparse.Namespace, device: torch.device) -> Figures:
    cfg = ModelConfig.model_validate({"preset": args.preset, "gates": VARIANTS[name]})
    torch.manual_seed(0)
    model = build_model(cfg).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95),
                            weight_decay=0.1, fused=device.type == "cuda")
    bf16 = device.type == "cuda"
    data = batches(cfg.vocab_size, args.batch, args.seq, min(args.steps, 16), device)
    losses: list[float] = []
    t0 = 0.0
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            _sync(device)
            t0 = time.perf_counter()
        x, y = data[step % len(data)]
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            loss = model(x, y).loss
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step in (0, args.warmup + args.steps - 1):
            losses.append(float(loss.detach()))
    _sync(device)
    dt = (time.perf_counter() - t0) / args.steps
    tps = args.batch * args.seq / dt
    peak = peak_flops(device)
    probe = _probe(model, data[0][0][: min(args.batch, 8)])
    return Figures(name, _device_name(device), "bf16" if bf16 else "fp32",
                   sum(p.numel() for p in model.parameters()), tps, dt * 1e3,
                   None if peak is None else tps * flops_per_token(model, cfg, args.seq) / peak,
                   losses[0], losses[-1], probe.first_token_attention_mean,
                   probe.max_activation_mean, probe.gate_score_mean)


def _probe(model: nn.Module, idx: torch.Tensor):  # type: ignore[no-untyped-def]
    model.eval()
    with torch.no_grad():
        out = model.probe(idx)  # explicit-softmax path, fp32
    model.train()
    return out


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"cpu ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)"


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="small")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--steps", type=int, default=60, help="timed steps per variant")
    p.add_argument("--warmup", type=int, default=10, help="untimed steps (compile, autotune)")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    if os.environ.get("GPU_CHECK_CPU_SMOKE") == "1":  # CI: proves the script still runs
        args.preset, args.batch, args.seq, args.steps, args.warmup = "tiny", 2, 32, 3, 1
    return args


def report(figs: list[Figures]) -> str:
    head = (f"{'variant':<9} {'tokens/s':>11} {'step ms':>8} {'MFU':>6} {'loss0':>7} "
            f"{'lossN':>7} {'F-Attn':>7} {'M-Act':>8} {'gate':>6}")
    lines = [f"device: {figs[0].device}, precision {figs[0].precision}", head]
    for f in figs:
        mfu = "n/a" if f.mfu is None else f"{f.mfu * 100:.1f}%"
        gate = "-" if f.gate_score_mean is None else f"{f.gate_score_mean:.3f}"
        lines.append(f"{f.variant:<9} {f.tokens_per_s:>11,.0f} {f.step_ms:>8.2f} {mfu:>6} "
                     f"{f.loss_first:>7.3f} {f.loss_last:>7.3f} {f.first_token_attention:>7.3f} "
                     f"{f.max_activation:>8.2f} {gate:>6}")
    base = figs[0]
    for f in figs[1:]:
        lines.append(f"{f.variant} gate overhead: {(f.step_ms / base.step_ms - 1) * 100:+.1f}% "
                     f"step time, {(f.params / base.params - 1) * 100:+.1f}% parameters")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    smoke = os.environ.get("GPU_CHECK_CPU_SMOKE") == "1"
    if not torch.cuda.is_available() and not smoke:
        print("gpu_check: no CUDA device visible (torch.cuda.is_available() is False); "
              "set GPU_CHECK_CPU_SMOKE=1 for the CPU smoke run", file=sys.stderr)
        return 2
    device = torch.device("cuda" if torch.cuda.is_available() and not smoke else "cpu")
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    figs = [run_variant(name, args, device) for name in VARIANTS]
    print(report(figs))
    print(f"torch {torch.__version__}, python {platform.python_version()}, preset {args.preset}, "
          f"batch {args.batch} x seq {args.seq}, {args.steps} timed steps")
    if args.json:
        args.json.write_text(json.dumps([asdict(f) for f in figs], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
