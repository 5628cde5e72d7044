#!/usr/bin/env bash
# Session 18, call 1: session 17's call 3 (never run: that try was cut off).  Inductor runs rows of 32768
# persistent (R0_BLOCK 32768, 32 warps: session 17 call 2's .best_config files) and reaches 98% of copy bandwidth
# on rms_norm 4096x32768, where our two-pass looped kernel reaches 66%.  Here the rows past 8192 elements of
# both suites, and the seeds' rows of 8192, under persistent rows up to 16384 / 32768 elements and up to 32
# warps, 32 warps for rows of 8192, and looped chunks of 8192.  Run from the repo root on the GPU machine.
set -x
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/env.txt"
python -c "import torch, triton, sys; print(torch.__version__, triton.__version__, sys.version.split()[0])" >> "$OUT/env.txt"
V="--variant p32k:persistent_max_rnumel=32768
   --variant p16k_w32:persistent_max_rnumel=16384,max_num_warps=32
   --variant p32k_w32:persistent_max_rnumel=32768,max_num_warps=32
   --variant e256_w32:max_num_warps=32,elements_per_warp=256
   --variant p32k_w32_l8k:persistent_max_rnumel=32768,max_num_warps=32,looped_rblock=8192,max_reduction_block_numel=8192"
# the wide rows first (what the knobs are for), then the seeds' rows they could move
timeout 340 python -m compiler.benchmark --suite wide --only 32768 131072 --budget-s 320 $V \
    --out "$OUT/sweep-wide.md" --json "$OUT/sweep-wide.json" > "$OUT/sweep-wide.log" 2>&1
timeout 220 python -m compiler.benchmark --suite seed --only 4096x10240 rmsnorm_project "softmax 8192x8192" \
    "rms_norm 8192x8192" --budget-s 200 $V \
    --out "$OUT/sweep-seed.md" --json "$OUT/sweep-seed.json" > "$OUT/sweep-seed.log" 2>&1
