#!/usr/bin/env bash
# Session 20, call 2 (H200): the seed table at this session's code (the first H200 table since session 16),
# then GPU tests of the reduction, heuristics and runtime code.  Run from the repo root on the GPU machine;
# writes under $OUT.
set -x
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/env.txt"
python -c "import torch, triton, sys; print(torch.__version__, triton.__version__, sys.version.split()[0])" >> "$OUT/env.txt"
timeout 380 python -m compiler.benchmark --suite seed --budget-s 360 \
    --out "$OUT/seed.md" --json "$OUT/seed.json" > "$OUT/seed.log" 2>&1
timeout 150 python -m pytest -q -n 8 -p no:randomly tests/compiler/test_reduction.py tests/compiler/test_heuristics.py \
    tests/compiler/test_runtime.py > "$OUT/tests.txt" 2>&1
tail -2 "$OUT/tests.txt"; cat "$OUT/seed.md"
