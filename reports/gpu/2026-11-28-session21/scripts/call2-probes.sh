#!/usr/bin/env bash
# Session 21, call 2: what separates the compiler's LN 4096x10240 backward partial from the hand-written one
# (partial_diff_probe), the layer norm kernels under FMA contraction and other loop blocks (ln_dx_probe), and
# three seed rows with the GEMM template's helper casts (the code now), FMA contraction and 8 / 4 warps per
# 8192-element row.
set -x
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > "$OUT/env.txt"
timeout 150 python reports/gpu/2026-11-28-session21/scripts/partial_diff_probe.py 5 > "$OUT/call2-partial-diff.txt" 2>&1
sed -n 1,30p "$OUT/call2-partial-diff.txt"
timeout 150 python -m kernels.benchmarks.ln_dx_probe --variant fp_fusion=True --variant looped_rblock=2048 \
    --variant looped_rblock=8192 > "$OUT/call2-ln-probe.txt" 2>&1
grep -v "^   " "$OUT/call2-ln-probe.txt"
timeout 280 python -m compiler.benchmark --suite seed --only "softmax" "mHC rmsnorm" "layer_norm fwd+bwd 4096" \
    --budget-s 260 --variant helpers:native_bf16_casts=False --variant fma:fp_fusion=True \
    --variant w8:elements_per_warp=1024 --variant w4:elements_per_warp=2048 \
    --out "$OUT/call2-seed.md" --json "$OUT/call2-seed.json" > "$OUT/call2-seed.log" 2>&1
python - "$OUT/call2-seed.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["rows"]:
    for b, v in r["results"].items():
        print(f"{r['workload'][:24]:24s} {b:22s} GPU {(v['gpu_ms'] or 0) * 1000:9.2f} us  latency {(v['ms'] or 0) * 1000:9.2f} us {v.get('matches_eager')}")
PY
