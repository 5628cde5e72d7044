#!/usr/bin/env bash
# Session 24 call 6 (H200): the gate's bundled subjects (ci profile) and the regression corpus, compiled on the GPU,
# at the final code; then tagged_stress.py with the fence form split alike.  Outputs: $OUT/call6-*.
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda
mkdir -p "$OUT"
timeout 330 python -m pytest -p harness.pytest_plugin tests/test_bundled_subjects.py tests/regressions \
    --tritondiff-profile=ci -q -rfE -n 4 -p no:cacheprovider > $OUT/call6-subjects.txt 2>&1
tail -25 $OUT/call6-subjects.txt
timeout 90 python reports/gpu/2026-11-28-session24/scripts/tagged_stress.py 1000 > $OUT/call6-stress.txt 2>&1
tail -12 $OUT/call6-stress.txt
