#!/usr/bin/env bash
# Session 16, call 8 (H100): the final tree's GPU tests of the split / variant / autotune code, and nrm2 with
# autotuning on (its candidates now keep a streaming partial's 32 warps).  Run from the repo root on the GPU
# machine; writes under $OUT.
set -x
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/env.txt"
python -c "import torch, triton, sys; print(torch.__version__, triton.__version__, sys.version.split()[0])" >> "$OUT/env.txt"
timeout 240 python -m pytest -n 16 -q -p no:cacheprovider tests/compiler/test_reduction.py tests/compiler/test_heuristics.py \
    tests/compiler/test_variants.py tests/compiler/test_autotune.py tests/compiler/test_config.py tests/compiler/test_subjects.py \
    tests/harness/test_coverage.py tests/harness/test_runner.py tests/harness/test_report.py > "$OUT/tests.txt" 2>&1
timeout 200 python -m compiler.benchmark --only nrm2 --budget-s 170 --variant tuned:autotune=True \
    --out "$OUT/bench-nrm2-tuned.md" --json "$OUT/bench-nrm2-tuned.json" > "$OUT/bench.log" 2>&1
