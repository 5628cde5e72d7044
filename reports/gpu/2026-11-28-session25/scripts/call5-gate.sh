#!/usr/bin/env bash
# Session 25 call 5 (H200): after the review -- the runtime compiles an owned-loads kernel without running it
# (warmup), checks its layout and its count of volatile loads before the first launch, and keeps a refusal.
# GPU tests (layouts, split reductions, runtime, variants), owned_poll_stress.py, nrm2 in the benchmark.
# Outputs: $OUT/call5-*.
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
C=${CALL:-call5}
D=reports/gpu/2026-11-28-session25/scripts
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > "$OUT/$C-env.txt"
python -c "import torch, triton, sys; print(torch.__version__, triton.__version__, sys.version.split()[0])" >> "$OUT/$C-env.txt"
git log -1 --format=%h >> "$OUT/$C-env.txt"; git status --short | head -20 >> "$OUT/$C-env.txt"
cat "$OUT/$C-env.txt"
timeout 200 python -m pytest -q -n 8 -p no:randomly -p harness.pytest_plugin tests/compiler/test_layouts.py \
    tests/compiler/test_reduction.py tests/compiler/test_runtime.py tests/compiler/test_variants.py \
    "tests/compiler/test_subjects.py::test_a_split_that_leaves_its_state_set_is_caught" > "$OUT/$C-tests.txt" 2>&1
tail -5 "$OUT/$C-tests.txt"
timeout 150 python $D/owned_poll_stress.py ${CALLS:-500} > "$OUT/$C-stress.txt" 2>&1
tail -18 "$OUT/$C-stress.txt"
timeout 150 python -m compiler.benchmark --only "nrm2" --rounds ${ROUNDS:-7} --budget-s 120 \
    --out "$OUT/$C-nrm2.md" --json "$OUT/$C-nrm2.json" > "$OUT/$C-nrm2.log" 2>&1
python -m compiler.benchmark --summary "$OUT/$C-nrm2.json"
