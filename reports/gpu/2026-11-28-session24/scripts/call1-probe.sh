#!/usr/bin/env bash
# Session 24 call 1 (H200): nrm2 2^20's single-launch forms (nrm2_tail_probe.py), then the benchmark's nrm2 2^20
# row in 15 rounds with the compiler's RBLOCK forced to 8192 (one step per partial) beside the default.
# Outputs: $OUT/call1-*.
set -x
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
C=${CALL:-call1}
D=reports/gpu/2026-11-28-session24/scripts
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > "$OUT/$C-env.txt"
python -c "import torch, triton, sys; print(torch.__version__, triton.__version__, sys.version.split()[0])" >> "$OUT/$C-env.txt"
git log -1 --format=%h >> "$OUT/$C-env.txt"; git status --short | head >> "$OUT/$C-env.txt"
cat "$OUT/$C-env.txt"
timeout 240 python $D/nrm2_tail_probe.py ${ROUNDS:-15} 40 > "$OUT/$C-probe.md" 2> "$OUT/$C-probe.log"
tail -40 "$OUT/$C-probe.md"; tail -5 "$OUT/$C-probe.log"
timeout 200 python -m compiler.benchmark --only "nrm2 2^20" --rounds 15 --budget-s 150 \
    --variant "b8192:rblock=8192" --out "$OUT/$C-nrm2.md" --json "$OUT/$C-nrm2.json" > "$OUT/$C-nrm2.log" 2>&1
python -m compiler.benchmark --summary "$OUT/$C-nrm2.json"
