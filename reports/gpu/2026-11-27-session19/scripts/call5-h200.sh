#!/usr/bin/env bash
# Session 19, call 5 (H200): the split stress script (500 calls per case) and the seed table at this session's
# final code.  Run from the repo root on the GPU machine; writes under $OUT.
set -x
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/env.txt"
python -c "import torch, triton, sys; print(torch.__version__, triton.__version__, sys.version.split()[0])" >> "$OUT/env.txt"
timeout 60 python reports/gpu/2026-11-27-session19/scripts/split_stress.py 500 > "$OUT/stress.txt" 2>&1
timeout 360 python -m compiler.benchmark --suite seed --budget-s 330 \
    --out "$OUT/seed.md" --json "$OUT/seed.json" > "$OUT/seed.log" 2>&1
cat "$OUT/stress.txt"; grep -E "tritondiff \||geometric" "$OUT/seed.md"
