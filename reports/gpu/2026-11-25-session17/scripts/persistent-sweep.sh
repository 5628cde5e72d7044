#!/usr/bin/env bash
# Session 17, call 3: Inductor runs rows of 32768 persistent (R0_BLOCK 32768, 32 warps; call 2's .best_config
# files) and reaches 98% of copy bandwidth on rms_norm 4096x32768, where our two-pass looped kernel reaches 66%.
# Here: the wide suite and the seed rows whose rows pass 8192 (layer norm 4096x10240, mHC rmsnorm_project),
# with persistent rows up to 16384 / 32768 elements and up to 32 warps, and looped chunks of 8192 at 32 warps.
# Run from the repo root on the GPU machine; writes under $OUT.
set -x
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/env.txt"
python -c "import torch, triton, sys; print(torch.__version__, triton.__version__, sys.version.split()[0])" >> "$OUT/env.txt"
timeout 560 python -m compiler.benchmark --suite all --only 4096x10240 rmsnorm_project 32768 131072 "column sum" \
    --budget-s 500 \
    --variant p32k:persistent_max_rnumel=32768 \
    --variant p16k_w32:persistent_max_rnumel=16384,max_num_warps=32 \
    --variant p32k_w32:persistent_max_rnumel=32768,max_num_warps=32 \
    --variant p32k_w32_l8k:persistent_max_rnumel=32768,max_num_warps=32,looped_rblock=8192,max_reduction_block_numel=8192,elements_per_warp=256 \
    --out "$OUT/sweep.md" --json "$OUT/sweep.json" > "$OUT/sweep.log" 2>&1
