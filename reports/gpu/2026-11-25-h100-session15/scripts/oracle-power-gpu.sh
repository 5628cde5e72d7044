#!/usr/bin/env bash
# Session 15, call 6: the oracle's tail allowance on a GPU -- the harness's power suite (planted bugs it must
# catch, correct twins it must pass), the oracle and compiler-subject tests, and the dy-large-offset dump again
# (the verdicts now come from the new oracle).  Run from the repo root on the GPU machine; writes under $OUT.
set -x
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
mkdir -p "$OUT"
timeout 300 python -m pytest -n 8 -q -p no:cacheprovider -m "not slow" tests/harness/test_oracle.py \
    tests/harness/test_planted.py tests/harness/test_hazards.py tests/harness/test_runner.py \
    tests/compiler/test_subjects.py tests/compiler/test_layer_norm.py > "$OUT/call6-tests.txt" 2>&1
tail -3 "$OUT/call6-tests.txt"
timeout 250 python reports/gpu/2026-11-25-h100-session15/ln_large_offset_dump.py "$OUT/call6-dump.pt" \
    > "$OUT/call6-ln-large-offset-verdicts.txt" 2>&1
grep -c " pass" "$OUT/call6-ln-large-offset-verdicts.txt"
