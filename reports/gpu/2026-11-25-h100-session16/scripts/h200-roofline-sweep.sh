#!/usr/bin/env bash
# Session 16, call 3 (H200): the two rows behind Inductor there (call 2: nrm2 2^28 GPU 0.237 vs 0.232 ms,
# rms_norm 8192^2 0.130 vs 0.128) under knob variants, in one interleaved benchmark run; then a
# 2-minute campaign over the compiler subjects whose report shows, per subject, the oracle allowance
# each passing example needed (harness.coverage).  Run from the repo root on the GPU machine; writes under $OUT.
set -x
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/env.txt"
python -c "import torch, triton, sys; print(torch.__version__, triton.__version__, sys.version.split()[0])" >> "$OUT/env.txt"
timeout 330 python -m compiler.benchmark --only "nrm2 2^28" rms_norm --budget-s 300 \
    --variant p4:programs_per_sm=4 --variant rb8k:looped_rblock=8192 --variant w8:num_warps=8 \
    --variant w32:num_warps=32 --variant looped4k:persistent_max_rnumel=4096 --variant stages2:loop_stages=2 \
    --out "$OUT/sweep.md" --json "$OUT/sweep.json" > "$OUT/sweep.log" 2>&1
timeout 200 tritondiff fuzz 'compiler.*' --budget 2m --workers 12 --seed 1616 --store /tmp/c3.db \
    --report "$OUT/campaign" > "$OUT/campaign.log" 2>&1
