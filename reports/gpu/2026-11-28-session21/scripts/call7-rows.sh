#!/usr/bin/env bash
# Session 21, call 7: a last sample at 3f5f401 of the rows at the 80% line and at the roofline: the layer-norm
# kernels one by one; LN 4096x10240, nrm2 2^28, softmax and rms_norm 8192^2 against Inductor.
set -x
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > "$OUT/env.txt"
timeout 60 python -m kernels.benchmarks.ln_dx_probe > /dev/null 2>&1
timeout 60 python -m kernels.benchmarks.ln_dx_probe --variant lift_invariant_loads=True > "$OUT/call7-ln-probe.txt" 2>&1
grep -v "^   \|Warning\|warn\|return isinstance" "$OUT/call7-ln-probe.txt"
timeout 200 python -m compiler.benchmark --suite seed --only "layer_norm fwd+bwd 4096" "nrm2 2^28" "softmax" "rms_norm" \
    --budget-s 180 --out "$OUT/call7-rows.md" --json "$OUT/call7-rows.json" > "$OUT/call7-rows.log" 2>&1
grep -i "copy bandwidth" "$OUT/call7-rows.md"
python - "$OUT/call7-rows.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["rows"]:
    v, i = r["results"].get("tritondiff", {}), r["results"].get("inductor", {})
    if v.get("gpu_ms") and i.get("gpu_ms"):
        print(f"{r['workload'][:36]:36s} GPU {v['gpu_ms'] * 1000:9.2f} us vs {i['gpu_ms'] * 1000:9.2f}  {i['gpu_ms'] / v['gpu_ms']:.4f}x")
PY
