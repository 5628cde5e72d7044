#!/usr/bin/env bash
# Session 23, call 6 (H100): softmax and rms_norm 8192^2 at 4 and 8 warps against the default 16, in 7 rounds.
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda
timeout 330 python -m compiler.benchmark --only softmax rms_norm --rounds 7 --variant w4:num_warps=4 \
    --variant w8:num_warps=8 --budget-s 250 --out $OUT/call6-warps.md --json $OUT/call6-warps.json > $OUT/call6-warps.log 2>&1
grep -i geometric $OUT/call6-warps.md
python -m compiler.benchmark --summary $OUT/call6-warps.json
