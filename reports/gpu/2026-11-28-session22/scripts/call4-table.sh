#!/usr/bin/env bash
# Session 22, calls 4 (H200) and 5 (H100): the code of 3db4a70 -- the layer-norm kernels one by one (prefetch on
# and off), GPU tests of the reduction / kernel / layer-norm code, the whole seed table; CAMPAIGN=S adds an
# S-second campaign over the mixed-order and layer-norm subjects; TESTS_K / TESTS_S: a -k selection of the tests and
# their time limit (call 4's 120 s ran out at 46% of the three files, no failure by then).  Outputs are named after $CALL (call4, call5).
set -x
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
C=${CALL:-call4}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > "$OUT/$C-env.txt"
python -c "import torch, triton, sys; print(torch.__version__, triton.__version__, sys.version.split()[0])" >> "$OUT/$C-env.txt"
git log -1 --format=%h >> "$OUT/$C-env.txt"; git status --short | head >> "$OUT/$C-env.txt"
cat "$OUT/$C-env.txt"
timeout 60 python -m kernels.benchmarks.ln_dx_probe > /dev/null 2>&1
timeout 100 python -m kernels.benchmarks.ln_dx_probe --variant mixed_order_prefetch=off > "$OUT/$C-ln-probe.txt" 2>&1
grep -v "Warning\|warn\|return isinstance" "$OUT/$C-ln-probe.txt"
timeout ${TESTS_S:-120} python -m pytest -q tests/compiler/test_layer_norm.py tests/compiler/test_reduction.py \
    tests/compiler/test_kernel.py ${TESTS_K:+-k "$TESTS_K"} -p no:cacheprovider > "$OUT/$C-tests.txt" 2>&1
tail -3 "$OUT/$C-tests.txt"
if [ -n "$CAMPAIGN" ]; then
  timeout $((CAMPAIGN + 60)) python -m harness fuzz compiler.mixed_order_reductions compiler.layer_norm_fwd_bwd \
      --budget ${CAMPAIGN}s --seed 22 --store "$OUT/$C-campaign.db" --report "$OUT/$C-campaign" > "$OUT/$C-campaign.log" 2>&1
  tail -4 "$OUT/$C-campaign.log"
fi
timeout 330 python -m compiler.benchmark --suite seed --budget-s 300 --out "$OUT/$C-seed.md" --json "$OUT/$C-seed.json" \
    > "$OUT/$C-seed.log" 2>&1
grep -i "geometric\|copy bandwidth" "$OUT/$C-seed.md"
python - "$OUT/$C-seed.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["rows"]:
    v, i = r["results"].get("tritondiff", {}), r["results"].get("inductor", {})
    if v.get("gpu_ms") and i.get("gpu_ms"):
        bw = r["bytes"] / (v["gpu_ms"] * 1e-3) / 1e9 / d["copy_gbps"]
        print(f"{r['workload'][:36]:36s} GPU {v['gpu_ms'] * 1000:9.2f} us vs {i['gpu_ms'] * 1000:9.2f}  "
              f"{i['gpu_ms'] / v['gpu_ms']:.4f}x  {bw:.1%} CBW  oracle {v.get('matches_eager')}")
PY
