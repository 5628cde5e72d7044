#!/usr/bin/env bash
# Session 24 call 7 (H200): the gate's bundled subjects (ci profile) and the regression corpus, compiled on the GPU,
# with the first example of each subject run to its hang limit (972b837); then a CAMPAIGN-second campaign over the
# graph fuzzers and the split subjects at the final code.  Outputs: $OUT/call7-*.
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda
mkdir -p "$OUT"
git log -1 --format=%h > $OUT/call7-env.txt; git status --short | head >> $OUT/call7-env.txt
timeout 330 python -m pytest -p harness.pytest_plugin tests/test_bundled_subjects.py tests/regressions \
    --tritondiff-profile=ci -q -rfE -n 4 -p no:cacheprovider > $OUT/call7-subjects.txt 2>&1
tail -6 $OUT/call7-subjects.txt
timeout $((${CAMPAIGN:-100} + 60)) python -m harness fuzz compiler.graph_fuzz compiler.graph_fuzz_backward compiler.nrm2 \
    compiler.reduce_rows_split --budget ${CAMPAIGN:-100}s --seed 241 --store $OUT/call7-campaign.db \
    --report $OUT/call7-campaign > $OUT/call7-campaign.log 2>&1
tail -4 $OUT/call7-campaign.log
