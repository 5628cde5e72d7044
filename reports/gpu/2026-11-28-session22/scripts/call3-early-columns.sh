#!/usr/bin/env bash
# Session 22, call 3: as call 2, the column terms now taken before the row reductions (chunked kernels)
# (config.mixed_order_row_chunks / mixed_order_prefetch, the tree's defaults) against each off; the layer-norm
# rows of the seed table under them; the GPU tests of the reduction and layer-norm code.
set -x
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > "$OUT/env.txt"
python -c "import torch, triton, sys; print(torch.__version__, triton.__version__, sys.version.split()[0])" >> "$OUT/env.txt"
git log -1 --format=%h >> "$OUT/env.txt"; git status --short | head >> "$OUT/env.txt"
cat "$OUT/env.txt"
timeout 60 python -m kernels.benchmarks.ln_dx_probe > /dev/null 2>&1
timeout 200 python -m kernels.benchmarks.ln_dx_probe --variant mixed_order_prefetch=off \
    --variant lift_invariant_loads=False --variant lift_invariant_loads=False,eviction_hints=False \
    --variant mixed_order_row_chunks=1,mixed_order_prefetch=off > "$OUT/call3-ln-probe.txt" 2>&1
grep -v "Warning\|warn\|return isinstance" "$OUT/call3-ln-probe.txt"
timeout 200 python -m compiler.benchmark --suite seed --only "layer_norm" --variant prefetch_all:mixed_order_prefetch=all \
    --variant old:mixed_order_row_chunks=1,mixed_order_prefetch=off --budget-s 170 \
    --out "$OUT/call3-ln.md" --json "$OUT/call3-ln.json" > "$OUT/call3-ln.log" 2>&1
grep -i "copy bandwidth" "$OUT/call3-ln.md" | head -3
python - "$OUT/call3-ln.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["rows"]:
    i = r["results"].get("inductor", {}).get("gpu_ms")
    for k, v in r["results"].items():
        if v.get("gpu_ms"):
            bw = r["bytes"] / (v["gpu_ms"] * 1e-3) / 1e9 / d["copy_gbps"]
            print(f"{r['workload'][:36]:36s} {k:32s} GPU {v['gpu_ms'] * 1000:8.2f} us  {i / v['gpu_ms'] if i else 0:.3f}x  "
                  f"{bw:.1%} of copy BW (GPU time), oracle {v.get('matches_eager')}")
PY
