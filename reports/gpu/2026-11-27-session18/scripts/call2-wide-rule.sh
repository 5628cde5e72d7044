#!/usr/bin/env bash
# Session 18, call 2: the wide-persistent rule (heuristics.persistent_wide: rows past 8192 run persistent at 32
# warps where the values held across passes x RBLOCK fit 32768 elements) on both suites, against the rule off
# (old: persistent_wide_max_rnumel=8192, the looped kernels as before) and against one warp per 256 elements of
# a non-one-wave kernel (e256: a looped 4096-element block at 16 warps; call 1's e256_w32 took layer norm
# 2048x32768 from 0.467 to 0.376 ms of GPU time).  Run from the repo root on the GPU machine; writes under $OUT.
set -x
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/env.txt"
python -c "import torch, triton, sys; print(torch.__version__, triton.__version__, sys.version.split()[0])" >> "$OUT/env.txt"
git log -1 --format='commit %H %s' >> "$OUT/env.txt" 2>/dev/null
V="--variant old:persistent_wide_max_rnumel=8192 --variant e256:elements_per_warp=256
   --variant e256_old:elements_per_warp=256,persistent_wide_max_rnumel=8192"
timeout 250 python -m compiler.benchmark --suite wide --budget-s 235 $V \
    --out "$OUT/wide.md" --json "$OUT/wide.json" > "$OUT/wide.log" 2>&1
timeout 310 python -m compiler.benchmark --suite seed --only layer_norm mHC --budget-s 295 $V \
    --out "$OUT/seed.md" --json "$OUT/seed.json" > "$OUT/seed.log" 2>&1
