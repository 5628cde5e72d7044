#!/usr/bin/env bash
# Session 25 call 4 (H200): the gate's bundled subjects (ci profile) and the regression corpus, compiled on the GPU,
# with the one-thread-a-slot tagged poll as the default.  Outputs: $OUT/call4-*.
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda
mkdir -p "$OUT"
git log -1 --format=%h > $OUT/call4-env.txt; git status --short | head -20 >> $OUT/call4-env.txt
timeout 400 python -m pytest -p harness.pytest_plugin tests/test_bundled_subjects.py tests/regressions \
    --tritondiff-profile=ci -q -rfE -n 4 -p no:cacheprovider > $OUT/call4-subjects.txt 2>&1
tail -6 $OUT/call4-subjects.txt
