#!/usr/bin/env bash
# Session 24 call 5 (H200), the final code: GPU tests of the split reductions (tagged and fence forms) and the
# planted-state subjects, tagged_stress.py, then the seed table in ROUNDS interleaved rounds (default 7) and its
# per-round summary.  Outputs: $OUT/call5-*.
set -x
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
C=${CALL:-call5}
D=reports/gpu/2026-11-28-session24/scripts
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > "$OUT/$C-env.txt"
python -c "import torch, triton, sys; print(torch.__version__, triton.__version__, sys.version.split()[0])" >> "$OUT/$C-env.txt"
git log -1 --format=%h >> "$OUT/$C-env.txt"; git status --short | head -20 >> "$OUT/$C-env.txt"
cat "$OUT/$C-env.txt"
timeout 120 python -m pytest -q -n 8 -p no:randomly -p harness.pytest_plugin tests/compiler/test_reduction.py \
    tests/compiler/test_runtime.py tests/compiler/test_heuristics.py \
    "tests/compiler/test_subjects.py::test_a_split_that_leaves_its_state_set_is_caught" > "$OUT/$C-tests.txt" 2>&1
tail -3 "$OUT/$C-tests.txt"
timeout 90 python $D/tagged_stress.py ${CALLS:-1000} > "$OUT/$C-stress.txt" 2>&1
tail -12 "$OUT/$C-stress.txt"
timeout ${TABLE_S:-400} python -m compiler.benchmark --suite seed --rounds ${ROUNDS:-7} --budget-s ${BUDGET:-330} \
    --out "$OUT/$C-seed.md" --json "$OUT/$C-seed.json" > "$OUT/$C-seed.log" 2>&1
grep -i "geometric\|copy bandwidth" "$OUT/$C-seed.md"
python -m compiler.benchmark --summary "$OUT/$C-seed.json"
