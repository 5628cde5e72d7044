#!/usr/bin/env bash
# Session 20, call 9 (H100): is the reread rule's cost on the H100 (call 8: rms_norm 179.8 us read again
# against 178.9 held) more than noise?  rms_probe.py's hand-written forms in 9 interleaved rounds, and RMSNorm
# at other widths (rms_widths.py, Inductor fixed to one static graph per shape).  Writes under $OUT.
set -x
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/env.txt"
D=reports/gpu/2026-11-27-session20/scripts
timeout 150 python $D/rms_probe.py 9 > "$OUT/rms-probe.txt" 2>&1
timeout 300 python $D/rms_widths.py 5 > "$OUT/widths.txt" 2>&1
cat "$OUT/rms-probe.txt"; tail -10 "$OUT/widths.txt"
