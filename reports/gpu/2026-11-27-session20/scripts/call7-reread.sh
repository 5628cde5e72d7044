#!/usr/bin/env bash
# Session 20, call 7: config.persistent_reread_loads (a two-pass persistent row that keeps only loads is read
# again), on against off: the seed table's rms_norm and softmax rows, RMSNorm at other widths and dtypes
# (rms_widths.py), and GPU tests of the heuristics and reduction code.  Writes under $OUT.
set -x
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/env.txt"
python -c "import torch, triton, sys; print(torch.__version__, triton.__version__, sys.version.split()[0])" >> "$OUT/env.txt"
timeout 150 python -m compiler.benchmark --suite seed --only "rms_norm 8192" "softmax 8192" --budget-s 130 \
    --variant held:persistent_reread_loads=False \
    --out "$OUT/seed.md" --json "$OUT/seed.json" > "$OUT/seed.log" 2>&1
timeout 240 python reports/gpu/2026-11-27-session20/scripts/rms_widths.py 5 > "$OUT/widths.txt" 2>&1
timeout 120 python -m pytest -q -n 8 -p no:randomly tests/compiler/test_reduction.py tests/compiler/test_heuristics.py \
    > "$OUT/tests.txt" 2>&1
tail -2 "$OUT/tests.txt"
python - "$OUT/seed.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["rows"]:
    for b, v in r["results"].items():
        print(f"{r['workload'][:22]:22s} {b:28s} GPU {(v['gpu_ms'] or 0) * 1000:8.2f} us  latency {(v['ms'] or 0) * 1000:8.2f} us")
PY
tail -12 "$OUT/widths.txt"
