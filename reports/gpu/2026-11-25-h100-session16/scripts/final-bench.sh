#!/usr/bin/env bash
# Session 16, calls 6 (H100, TESTS=1) and 7 (H200): the full compiler-vs-Inductor table on f2ca2d7 (split
# partials that stream their chunk at 32 warps); with TESTS=1 first the GPU tests of the split / reduction
# code.  Run from the repo root on the GPU machine; writes under $OUT.
set -x
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/env.txt"
python -c "import torch, triton, sys; print(torch.__version__, triton.__version__, sys.version.split()[0])" >> "$OUT/env.txt"
git log -1 --format=%h >> "$OUT/env.txt" 2>/dev/null
if [ "${TESTS:-0}" = 1 ]; then
  timeout 200 python -m pytest -n 16 -q -p no:cacheprovider tests/compiler/test_reduction.py tests/compiler/test_heuristics.py \
      tests/compiler/test_grid_limits.py tests/compiler/test_subjects.py tests/compiler/test_config.py > "$OUT/tests.txt" 2>&1
fi
timeout 380 python -m compiler.benchmark --budget-s 340 --out "$OUT/bench.md" --json "$OUT/bench.json" > "$OUT/bench.log" 2>&1
