#!/usr/bin/env bash
# Session 22, call 6: the chunk / prefetch tests (the review's padded-variance case among them) and a short
# campaign over compiler.mixed_order_chunked, compiled on the GPU.
set -x
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv > "$OUT/call6-env.txt"
timeout 70 python -m pytest -q tests/compiler/test_reduction.py -k "chunk or pad_mask or extremes" -p no:cacheprovider \
    > "$OUT/call6-tests.txt" 2>&1
tail -2 "$OUT/call6-tests.txt"
timeout 70 python -m harness fuzz compiler.mixed_order_chunked --budget 45s --seed 22 --store "$OUT/call6-campaign.db" \
    --report "$OUT/call6-campaign" > "$OUT/call6-campaign.log" 2>&1
tail -3 "$OUT/call6-campaign.log"
