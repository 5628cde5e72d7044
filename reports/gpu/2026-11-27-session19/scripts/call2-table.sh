#!/usr/bin/env bash
# Session 19, call 2: the split stress and latency script (fixed after call 1), nrm2 under a few split
# counts, and the seed table (issue #8's workloads) at this session's code.  Run from the repo root on the GPU
# machine; writes under $OUT.
set -x
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/env.txt"
python -c "import torch, triton, sys; print(torch.__version__, triton.__version__, sys.version.split()[0])" >> "$OUT/env.txt"
timeout 150 python reports/gpu/2026-11-27-session19/scripts/split_stress.py 2000 > "$OUT/stress.txt" 2>&1
timeout 120 python -m compiler.benchmark --suite seed --only "nrm2 2^20" --budget-s 100 \
    --variant s132:split_count=132 --variant s64:split_count=64 --variant s512:split_count=512 \
    --variant twokernels:split_last_program_final=False \
    --out "$OUT/nrm2-splits.md" --json "$OUT/nrm2-splits.json" > "$OUT/nrm2-splits.log" 2>&1
timeout 380 python -m compiler.benchmark --suite seed --budget-s 360 \
    --out "$OUT/seed.md" --json "$OUT/seed.json" > "$OUT/seed.log" 2>&1
cat "$OUT/stress.txt"; grep -E "nrm2" "$OUT/nrm2-splits.md"; grep -E "tritondiff \||geometric" "$OUT/seed.md"
