#!/usr/bin/env bash
# Session 20, call 1: the softmax max's NaN handling (nan_max_probe.py) and pre_map kernel forms
# (premap_probe.py), each in interleaved rounds beside the compiler's and Inductor's compiled workload.
# Run from the repo root on the GPU machine; writes under $OUT.
set -x
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/env.txt"
python -c "import torch, triton, sys; print(torch.__version__, triton.__version__, sys.version.split()[0])" >> "$OUT/env.txt"
D=reports/gpu/2026-11-27-session20/scripts
timeout 240 python $D/nan_max_probe.py 9 > "$OUT/call1-nan-max.txt" 2>&1
timeout 240 python $D/premap_probe.py 7 > "$OUT/call1-premap.txt" 2>&1
cat "$OUT"/*.txt
