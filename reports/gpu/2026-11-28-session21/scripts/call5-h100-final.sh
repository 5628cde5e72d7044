#!/usr/bin/env bash
# Session 21, call 5 (H100): the final code -- GPU tests of the kernel, reduction, layer-norm and template code; a
# 60-s campaign over the layer-norm and mixed-order subjects; the layer-norm kernels one by one; the seed table.
set -x
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > "$OUT/env.txt"
python -c "import torch, triton, sys; print(torch.__version__, triton.__version__, sys.version.split()[0])" >> "$OUT/env.txt"
git log -1 --format=%H >> "$OUT/env.txt" 2>/dev/null
timeout 150 python -m pytest -q -n 12 -p no:randomly tests/compiler/test_kernel.py tests/compiler/test_layer_norm.py \
    tests/compiler/test_reduction.py tests/compiler/test_matmul_operands.py tests/compiler/test_templates.py \
    > "$OUT/call5-tests.txt" 2>&1
tail -3 "$OUT/call5-tests.txt"
timeout 90 python -m harness fuzz compiler.layer_norm_fwd_bwd compiler.mixed_order_reductions --budget 60s --workers 4 \
    --seed 21 --store "$OUT/campaign.db" --report "$OUT/campaign" > "$OUT/call5-campaign.log" 2>&1
echo "campaign exit $?"; tail -4 "$OUT/call5-campaign.log"
timeout 60 python -m kernels.benchmarks.ln_dx_probe > /dev/null 2>&1
timeout 90 python -m kernels.benchmarks.ln_dx_probe --variant lift_invariant_loads=False > "$OUT/call5-ln-probe.txt" 2>&1
grep -v "^   \|Warning\|warn\|return isinstance" "$OUT/call5-ln-probe.txt"
timeout 330 python -m compiler.benchmark --suite seed --budget-s 300 --out "$OUT/call5-seed.md" --json "$OUT/call5-seed.json" \
    > "$OUT/call5-seed.log" 2>&1
grep -i "geometric" "$OUT/call5-seed.md"
python - "$OUT/call5-seed.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["rows"]:
    v, i = r["results"].get("tritondiff", {}), r["results"].get("inductor", {})
    if v.get("gpu_ms") and i.get("gpu_ms"):
        print(f"{r['workload'][:36]:36s} GPU {v['gpu_ms'] * 1000:9.2f} us vs {i['gpu_ms'] * 1000:9.2f}  {i['gpu_ms'] / v['gpu_ms']:.4f}x")
PY
