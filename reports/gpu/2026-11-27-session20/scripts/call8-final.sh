#!/usr/bin/env bash
# Session 20, call 8: the seed table at this session's final code, then rms_norm 8192x8192 with the reread
# rule off (persistent_reread_loads=False) beside it.  Writes under $OUT.
set -x
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/env.txt"
python -c "import torch, triton, sys; print(torch.__version__, triton.__version__, sys.version.split()[0])" >> "$OUT/env.txt"
timeout 380 python -m compiler.benchmark --suite seed --budget-s 360 \
    --out "$OUT/seed.md" --json "$OUT/seed.json" > "$OUT/seed.log" 2>&1
timeout 120 python -m compiler.benchmark --suite seed --only "rms_norm 8192" --budget-s 100 \
    --variant held:persistent_reread_loads=False \
    --out "$OUT/rms.md" --json "$OUT/rms.json" > "$OUT/rms.log" 2>&1
python - "$OUT/seed.json" "$OUT/rms.json" <<'PY'
import json, sys
for p in sys.argv[1:]:
    d = json.load(open(p))
    for r in d["rows"]:
        for b, v in r["results"].items():
            print(f"{r['workload'][:30]:30s} {b:24s} GPU {(v['gpu_ms'] or 0) * 1000:8.2f} us  latency {(v['ms'] or 0) * 1000:8.2f} us")
PY
grep -E "geometric" "$OUT/seed.md"
