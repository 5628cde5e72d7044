#!/usr/bin/env bash
# Session 25 call 6 (H200): owned_poll_stress.py again, its wrapper of Executable._check_owned fixed for the new
# signature (call 5's run stopped there).  Outputs: $OUT/call6-*.
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
mkdir -p "$OUT"
git log -1 --format=%h > "$OUT/call6-env.txt"; git status --short | head -20 >> "$OUT/call6-env.txt"
timeout 200 python reports/gpu/2026-11-28-session25/scripts/owned_poll_stress.py ${CALLS:-1000} > "$OUT/call6-stress.txt" 2>&1
tail -18 "$OUT/call6-stress.txt"
