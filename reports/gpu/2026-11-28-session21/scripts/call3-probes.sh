#!/usr/bin/env bash
# Session 21, call 3: partial_diff_probe (fixed: the edited kernel loaded inside its generated module); GPU tests of
# the GEMM template and cast code after the template's helper casts.
set -x
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > "$OUT/env.txt"
timeout 200 python reports/gpu/2026-11-28-session21/scripts/partial_diff_probe.py 7 > "$OUT/call3-partial-diff.txt" 2>&1
sed -n 1,24p "$OUT/call3-partial-diff.txt"
timeout 200 python -m pytest -q -n 12 -p no:randomly tests/compiler/test_kernel.py tests/compiler/test_matmul_operands.py \
    tests/compiler/test_templates.py > "$OUT/call3-tests.txt" 2>&1
tail -3 "$OUT/call3-tests.txt"
