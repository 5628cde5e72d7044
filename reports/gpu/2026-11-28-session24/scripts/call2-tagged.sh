#!/usr/bin/env bash
# Session 24 call 2 (H200): nrm2_tail_probe.py with the tagged-partials forms (no fence: a never-reset ticket
# counter gives each launch an epoch, the slots carry it, the last ticket polls).  Outputs: $OUT/call2-*.
set -x
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
C=${CALL:-call2}
D=reports/gpu/2026-11-28-session24/scripts
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > "$OUT/$C-env.txt"
python -c "import torch, triton, sys; print(torch.__version__, triton.__version__, sys.version.split()[0])" >> "$OUT/$C-env.txt"
git log -1 --format=%h >> "$OUT/$C-env.txt"; git status --short | head >> "$OUT/$C-env.txt"
cat "$OUT/$C-env.txt"
timeout 300 python $D/nrm2_tail_probe.py ${ROUNDS:-15} 40 > "$OUT/$C-probe.md" 2> "$OUT/$C-probe.log"
tail -40 "$OUT/$C-probe.md"; grep -v "__output_code\|_warn_once\|UserWarning" "$OUT/$C-probe.log" | tail -20
