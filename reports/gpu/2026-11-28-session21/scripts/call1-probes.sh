#!/usr/bin/env bash
# Session 21, call 1: layer norm 4096x10240's backward partial in shapes that fit several programs per SM
# (register caps, columns sliced between programs); softmax 8192^2 hand-written forms beside both compilers and
# Inductor's own kernel; mHC rmsnorm_project with bf16 helpers against native casts on one machine.
set -x
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > "$OUT/env.txt"
python -c "import torch, triton, sys; print(torch.__version__, triton.__version__, sys.version.split()[0])" >> "$OUT/env.txt"
timeout 240 python -m kernels.benchmarks.mixed_order_probe > "$OUT/call1-mixed-order.txt" 2>&1
tail -40 "$OUT/call1-mixed-order.txt"
timeout 120 python reports/gpu/2026-11-28-session21/scripts/softmax_probe.py 9 > "$OUT/call1-softmax.txt" 2>&1
tail -18 "$OUT/call1-softmax.txt"
timeout 60 python reports/gpu/2026-11-28-session21/scripts/inductor_softmax.py > "$OUT/call1-inductor-softmax.txt" 2>&1
head -5 "$OUT/call1-inductor-softmax.txt"
timeout 150 python -m compiler.benchmark --suite seed --only "mHC rmsnorm" --budget-s 120 \
    --variant helpers:native_bf16_casts=False \
    --out "$OUT/call1-rmsproj.md" --json "$OUT/call1-rmsproj.json" > "$OUT/call1-rmsproj.log" 2>&1
python - "$OUT/call1-rmsproj.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["rows"]:
    for b, v in r["results"].items():
        print(f"{r['workload'][:24]:24s} {b:22s} GPU {(v['gpu_ms'] or 0) * 1000:9.2f} us  latency {(v['ms'] or 0) * 1000:9.2f} us {v.get('matches_eager')}")
PY
