#!/usr/bin/env bash
# Session 21, call 4: loop-invariant loads lifted out of their loops (config.lift_invariant_loads): the LN 4096
# partial edited again (partial_diff_probe), the layer norm kernels with the lift off and without eviction hints
# (ln_dx_probe), and the layer-norm seed rows with the lift on and off.
set -x
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > "$OUT/env.txt"
timeout 200 python reports/gpu/2026-11-28-session21/scripts/partial_diff_probe.py 7 > "$OUT/call4-partial-diff.txt" 2>&1
sed -n 1,22p "$OUT/call4-partial-diff.txt"
timeout 150 python -m kernels.benchmarks.ln_dx_probe --variant lift_invariant_loads=False --variant eviction_hints=False \
    > "$OUT/call4-ln-probe.txt" 2>&1
grep -v "^   \|Warning\|warn\|return isinstance" "$OUT/call4-ln-probe.txt"
timeout 250 python -m compiler.benchmark --suite seed --only "layer_norm" --budget-s 230 \
    --variant nolift:lift_invariant_loads=False \
    --out "$OUT/call4-seed.md" --json "$OUT/call4-seed.json" > "$OUT/call4-seed.log" 2>&1
python - "$OUT/call4-seed.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["rows"]:
    for b, v in r["results"].items():
        print(f"{r['workload'][:28]:28s} {b:22s} GPU {(v['gpu_ms'] or 0) * 1000:9.2f} us  latency {(v['ms'] or 0) * 1000:9.2f} us {v.get('matches_eager')}")
PY
