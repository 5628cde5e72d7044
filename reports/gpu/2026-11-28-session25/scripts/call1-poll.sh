#!/usr/bin/env bash
# Session 25 call 1 (H200): tagged_poll_probe.py (the race fix's cost; a poll with no copies); session 24's
# tagged_stress.py on the fixed tagged form; nrm2 2^20 / 2^28 in the benchmark with the default (fence) form and
# the fixed tagged form at 2 and 1 programs per SM.  Outputs: $OUT/call1-*.
set -x
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
C=${CALL:-call1}
D=reports/gpu/2026-11-28-session25/scripts
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > "$OUT/$C-env.txt"
python -c "import torch, triton, sys; print(torch.__version__, triton.__version__, sys.version.split()[0])" >> "$OUT/$C-env.txt"
git log -1 --format=%h >> "$OUT/$C-env.txt"; git status --short | head -20 >> "$OUT/$C-env.txt"
cat "$OUT/$C-env.txt"
timeout 170 python $D/tagged_poll_probe.py ${ROUNDS:-15} > "$OUT/$C-probe.md" 2>&1
cat "$OUT/$C-probe.md" | grep -v "^Inductor\|^compiler" | tail -50
timeout 100 python reports/gpu/2026-11-28-session24/scripts/tagged_stress.py ${CALLS:-1000} > "$OUT/$C-stress.txt" 2>&1
tail -12 "$OUT/$C-stress.txt"
timeout 220 python -m compiler.benchmark --only "nrm2" --rounds ${BROUNDS:-9} --budget-s 180 \
    --variant "tagged:split_last_program_sync='tagged'" \
    --variant "tagged1:split_last_program_sync='tagged',split_short_tagged_programs_per_sm=1" \
    --out "$OUT/$C-nrm2.md" --json "$OUT/$C-nrm2.json" > "$OUT/$C-nrm2.log" 2>&1
python -m compiler.benchmark --summary "$OUT/$C-nrm2.json"
