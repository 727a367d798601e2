#!/usr/bin/env bash
# The one GPU session's script: bounded (<= 8 min wall by default, every step under
# `timeout`), fail-soft (a failing step never loses the others' output), everything into $OUT
# (at most 8 files). Needs python3 with torch, numpy, pydantic, pyyaml, rich and the installed
# `deepspeed` package folder on PYTHONPATH together with what deepspeed imports at start-up:
# hjson, dill, einops, msgpack, packaging, psutil, tabulate, tqdm (env.txt lists any missing);
# sqlalchemy + alembic (+ mako) for the sweep step.
#
#   OUT=/some/dir bash benchmarks/device_run.sh
#   OUT=/some/dir DEVICE_SWEEP=sweeps/gpu/quick.yaml bash benchmarks/device_run.sh
#   DEVICE_RUN_CPU_SMOKE=1 OUT=/tmp/x bash benchmarks/device_run.sh   # tiny sizes on the CPU
#
# On a GPU box without the project's packages (how the 2026-12-01 H200 run was made): download
# cp312 wheels of pydantic, pydantic-core, annotated-types, typing-inspection, typing-extensions,
# sqlalchemy, alembic, mako, hjson and greenlet into .whl/, copy the venv's site-packages folders
# deepspeed/, deepspeed-*.dist-info/ and dill/ into .dev/site/, carry both, then
#   pip install --no-index --no-deps --target /tmp/site .whl/*.whl
#   PYTHONPATH=/tmp/site:$PWD/.dev/site DS_ACCELERATOR=cuda OUT=... bash benchmarks/device_run.sh
#
# Steps and files:
#   env.txt                         device, versions (nvidia-smi, torch, deepspeed)
#   (1) throughput_small.{json,log} trainer_throughput.py, preset small, batch 32 x 512, bf16:
#                                   bare, engine, engine with DeepSpeed's one-rank all-reduce,
#                                   compile, G1 elementwise, G1 headwise
#   (2) mfu_1p7b.{json,log}         paper-dense-1p7b, seq 2048: compile and engine, MFU
#   (3) sweep.{db,log}              only when DEVICE_SWEEP names a sweep YAML: every run
#                                   in-process into an SQLite DB (benchmarks/device_sweep.py)
#   summary.txt                     each step's exit code and seconds
# Budget: DEVICE_RUN_BUDGET_S (default 470 s) caps the whole script; each step gets its own
# limit (THROUGHPUT_TIMEOUT 180, MFU_TIMEOUT 170, DEVICE_SWEEP_TIMEOUT 240) or what is left.
# Knobs: MFU_BATCH (4 sequences of 2048), MFU_RUNNERS (compile,engine: the 1.7B engine-vs-bare
# ratio was measured on 2026-12-01 (0.976x), compile's MFU was not; add bare to re-check it),
# SMALL_PRESET, DEVICE_SWEEP_STORAGE (checkpoints, default /tmp/gatesweep_device_runs).
set -uo pipefail   # no -e: fail soft, every step's exit code goes to summary.txt
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
: "${OUT:?set OUT to the output folder}"
mkdir -p "$OUT"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1 RAY_AUTH_MODE=disabled
export TORCH_EXTENSIONS_DIR="${TORCH_EXTENSIONS_DIR:-/tmp/gatesweep_torch_extensions}"
BUDGET="${DEVICE_RUN_BUDGET_S:-470}"
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"

if [ "${DEVICE_RUN_CPU_SMOKE:-0}" = 1 ]; then   # CI: the script's plumbing, in ~1-2 minutes
  export DS_ACCELERATOR=cpu
  SMALL_ARGS=(--preset "${SMALL_PRESET:-tiny}" --batch 2 --seq 32 --rounds 1 --steps 1
              --warmup 1 --runners "${SMOKE_RUNNERS:-bare,engine,g1e,g1h}")
  BIG_ARGS=(--preset tiny --batch 2 --seq 64 --rounds 1 --steps 1 --warmup 1
            --runners engine,bare --sequential)
else
  SMALL_ARGS=(--preset "${SMALL_PRESET:-small}" --batch 32 --seq 512 --rounds 5 --steps 10
              --warmup 15 --runners bare,engine,engine_ar,compile,g1e,g1h --sequential)
  BIG_ARGS=(--preset paper-dense-1p7b --batch "${MFU_BATCH:-4}" --seq 2048 --rounds 3
            --steps 3 --warmup 3 --runners "${MFU_RUNNERS:-compile,engine}" --sequential)
fi

left() { echo $(( BUDGET - SECONDS )); }

# step NAME LIMIT_S CMD...: run under timeout (capped by the budget), log, record rc + seconds.
step() {
  local name="$1" limit="$2"; shift 2
  local rest; rest="$(left)"
  [ "$rest" -lt "$limit" ] && limit="$rest"
  if [ "$limit" -lt 20 ]; then
    echo "$name: skipped (budget spent)" >> "$SUMMARY"; return
  fi
  local t0=$SECONDS
  timeout --signal=TERM --kill-after=15 "$limit" "$@"
  local rc=$?
  echo "$name: rc=$rc seconds=$(( SECONDS - t0 )) limit=${limit}" >> "$SUMMARY"
}

{
  date -u; uname -a; nvidia-smi 2>&1 | head -15
  "$PY" -c "import torch, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name() if torch.cuda.is_available() else '')" 2>&1
  # deepspeed imports these at start-up; the sweep step needs sqlalchemy + alembic too
  "$PY" -c "import importlib.util as u; m=[n for n in ('deepspeed','hjson','dill','einops','msgpack','packaging','psutil','tabulate','tqdm','pydantic','yaml','rich','sqlalchemy','alembic') if u.find_spec(n) is None]; print('missing python packages:', ' '.join(m) or 'none')" 2>&1
  "$PY" -c "import deepspeed; print('deepspeed', deepspeed.__version__)" 2>&1 | tail -1
} > "$OUT/env.txt" 2>&1

step throughput_small "${THROUGHPUT_TIMEOUT:-180}" \
  "$PY" "$ROOT/benchmarks/trainer_throughput.py" "${SMALL_ARGS[@]}" \
  --json "$OUT/throughput_small.json" > "$OUT/throughput_small.log" 2>&1

step mfu_1p7b "${MFU_TIMEOUT:-170}" \
  "$PY" "$ROOT/benchmarks/trainer_throughput.py" "${BIG_ARGS[@]}" \
  --json "$OUT/mfu_1p7b.json" > "$OUT/mfu_1p7b.log" 2>&1

# ---- (3) the lead's sweep hook ---------------------------------------------------------------
if [ -n "${DEVICE_SWEEP:-}" ]; then
  SWEEP_STORAGE="${DEVICE_SWEEP_STORAGE:-/tmp/gatesweep_device_runs}"
  step sweep "${DEVICE_SWEEP_TIMEOUT:-240}" \
    "$PY" -m benchmarks.device_sweep "$DEVICE_SWEEP" --storage "$SWEEP_STORAGE" \
    --copy-to "$OUT/sweep.db" > "$OUT/sweep.log" 2>&1
  # a timeout kills the copy too: copy what the DB holds so far
  [ -f "$OUT/sweep.db" ] || "$PY" -c "import sys; from pathlib import Path; from benchmarks.device_sweep import copy_sqlite; copy_sqlite(sys.argv[1], Path(sys.argv[2]))" \
    "sqlite:///$SWEEP_STORAGE/device_sweep.db" "$OUT/sweep.db" >> "$OUT/sweep.log" 2>&1
fi

echo "total: seconds=$SECONDS budget=$BUDGET" >> "$SUMMARY"
cat "$SUMMARY"
exit 0
