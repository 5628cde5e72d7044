#!/usr/bin/env bash
# Session 18, call 4 (H100): the seed table (issue #8's workloads) at the session's final compiler, and the
# per-kernel GPU time of layer norm 2048x32768 and the column sum under the defaults and elements_per_warp=256
# (scripts/kernel_breakdown.py).  Run from the repo root on the GPU machine; writes under $OUT.
set -x
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/env.txt"
python -c "import torch, triton, sys; print(torch.__version__, triton.__version__, sys.version.split()[0])" >> "$OUT/env.txt"
git log -1 --format='commit %H %s' >> "$OUT/env.txt" 2>/dev/null
timeout 90 python reports/gpu/2026-11-27-session18/scripts/kernel_breakdown.py > "$OUT/kernels.txt" 2>&1
timeout 380 python -m compiler.benchmark --suite seed --budget-s 360 \
    --out "$OUT/seed.md" --json "$OUT/seed.json" > "$OUT/seed.log" 2>&1
