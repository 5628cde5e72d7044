#!/usr/bin/env bash
# Session 22, call 2: the compiler's mixed-order partial held as row chunks and prefetching the next row
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
    --variant mixed_order_row_chunks=1 --variant mixed_order_row_chunks=1,mixed_order_prefetch=off \
    --variant mixed_order_min_chunk=512 > "$OUT/call2-ln-probe.txt" 2>&1
grep -v "Warning\|warn\|return isinstance" "$OUT/call2-ln-probe.txt"
timeout 150 python -m pytest -q -x tests/compiler/test_layer_norm.py tests/compiler/test_reduction.py -p no:cacheprovider \
    > "$OUT/call2-tests.txt" 2>&1
tail -5 "$OUT/call2-tests.txt"
timeout 200 python -m compiler.benchmark --suite seed --only "layer_norm" --variant prefetch_all:mixed_order_prefetch=all \
    --variant old:mixed_order_row_chunks=1,mixed_order_prefetch=off --budget-s 170 \
    --out "$OUT/call2-ln.md" --json "$OUT/call2-ln.json" > "$OUT/call2-ln.log" 2>&1
grep -i "copy bandwidth" "$OUT/call2-ln.md" | head -3
python - "$OUT/call2-ln.json" <<'PY'
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
