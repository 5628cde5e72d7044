#!/usr/bin/env bash
# Session 21, call 6 (H200): the final code's seed table and its layer-norm kernels one by one.
set -x
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > "$OUT/env.txt"
python -c "import torch, triton, sys; print(torch.__version__, triton.__version__, sys.version.split()[0])" >> "$OUT/env.txt"
timeout 60 python -m kernels.benchmarks.ln_dx_probe > /dev/null 2>&1
timeout 90 python -m kernels.benchmarks.ln_dx_probe --variant lift_invariant_loads=False > "$OUT/call6-ln-probe.txt" 2>&1
grep -v "^   \|Warning\|warn\|return isinstance" "$OUT/call6-ln-probe.txt"
timeout 330 python -m compiler.benchmark --suite seed --budget-s 300 --out "$OUT/call6-seed.md" --json "$OUT/call6-seed.json" \
    > "$OUT/call6-seed.log" 2>&1
grep -i "geometric\|copy bandwidth" "$OUT/call6-seed.md"
python - "$OUT/call6-seed.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["rows"]:
    v, i = r["results"].get("tritondiff", {}), r["results"].get("inductor", {})
    if v.get("gpu_ms") and i.get("gpu_ms"):
        print(f"{r['workload'][:36]:36s} GPU {v['gpu_ms'] * 1000:9.2f} us vs {i['gpu_ms'] * 1000:9.2f}  {i['gpu_ms'] / v['gpu_ms']:.4f}x")
PY
