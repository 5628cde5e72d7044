#!/usr/bin/env bash
# Session 23, call 7 (H100): the gate's bundled subjects (ci profile) and the regression corpus, compiled on the GPU.
# The device's copy is not pip-installed, so the harness's pytest plugin is named with -p (its entry point is absent).
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda
timeout 330 python -m pytest -p harness.pytest_plugin tests/test_bundled_subjects.py tests/regressions \
    --tritondiff-profile=ci -q -rfE -n 4 -p no:cacheprovider > $OUT/call7-subjects.txt 2>&1
tail -25 $OUT/call7-subjects.txt
