#!/usr/bin/env bash
# Session 16, call 10 (H200): rms_norm 8192^2, the one row behind Inductor there (0.129 vs 0.127 ms in call 7),
# as Inductor runs it (looped, small RBLOCK) and with hints off, interleaved.  Run from the repo root on the GPU
# machine; writes under $OUT.
set -x
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/env.txt"
python -c "import torch, triton, sys; print(torch.__version__, triton.__version__, sys.version.split()[0])" >> "$OUT/env.txt"
timeout 280 python -m compiler.benchmark --only rms_norm softmax --budget-s 250 \
    --variant looped2k:persistent_max_rnumel=1024,looped_rblock=2048 \
    --variant looped2k_w8:persistent_max_rnumel=1024,looped_rblock=2048,num_warps=8 \
    --variant looped1k_w4:persistent_max_rnumel=512,looped_rblock=1024,num_warps=4 \
    --variant nohints:eviction_hints=False \
    --out "$OUT/sweep.md" --json "$OUT/sweep.json" > "$OUT/sweep.log" 2>&1
