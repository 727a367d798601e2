#!/usr/bin/env bash
# One command for anyone with a CUDA GPU: train the `small` preset, baseline vs G1 gate, in bf16
# with a plain torch loop and print tokens/s, MFU, gate overhead and the attention-sink / gate
# probes. Bounded to 8 minutes. Needs python3 with torch + pydantic (no DeepSpeed, no Ray).
#   bash benchmarks/gpu_check.sh [--batch 32 --seq 512 --steps 60 --json out.json]
#   GPU_CHECK_CPU_SMOKE=1 bash benchmarks/gpu_check.sh      # CPU smoke run (CI)
# Put the figures and the GPU's name into docs/benchmarks.md.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
if ! "$PY" -c "import torch, pydantic" 2>/dev/null; then
  echo "gpu_check: $PY needs torch and pydantic (pip install pydantic)" >&2
  exit 3
fi
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
exec timeout --signal=TERM --kill-after=10 "${GPU_CHECK_TIMEOUT:-480}" \
  "$PY" "$ROOT/benchmarks/gpu_check.py" "$@"
