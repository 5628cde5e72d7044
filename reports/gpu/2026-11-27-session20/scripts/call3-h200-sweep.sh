#!/usr/bin/env bash
# Session 20, call 3 (H200): the two rows call 2 has below Inductor on the H200 -- nrm2 2^28 (0.96x) and
# rms_norm 8192x8192 (0.98x) -- under knob variants (more bytes in flight per SM: larger blocks, warps,
# programs per SM), and Inductor's own source and autotuned configs for both.  Writes under $OUT.
set -x
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/env.txt"
D=reports/gpu/2026-11-27-session20/scripts
timeout 120 python $D/inductor_configs.py > "$OUT/inductor-configs.txt" 2>&1
timeout 200 python -m compiler.benchmark --suite seed --only "nrm2 2^28" --budget-s 180 \
    --variant again:split_last_program_max_numel=4096 \
    --variant r8k:rblock=8192 --variant r16k:rblock=16384,max_reduction_block_numel=16384 \
    --variant w16:split_streaming_warps=16 --variant r8kw16:rblock=8192,split_streaming_warps=16 \
    --variant pps4w16:programs_per_sm=4,split_streaming_warps=16 \
    --variant s1024w8:split_count=1024,split_streaming_warps=8 \
    --variant st2:loop_stages=2 \
    --out "$OUT/nrm2.md" --json "$OUT/nrm2.json" > "$OUT/nrm2.log" 2>&1
timeout 200 python -m compiler.benchmark --suite seed --only "rms_norm 8192" --budget-s 180 \
    --variant again:split_last_program_max_numel=4096 \
    --variant w8:num_warps=8 --variant w32:num_warps=32,max_num_warps=32 \
    --variant hintsoff:eviction_hints=False --variant x2:xblock=2 \
    --out "$OUT/rms.md" --json "$OUT/rms.json" > "$OUT/rms.log" 2>&1
python - "$OUT/nrm2.json" "$OUT/rms.json" <<'PY'
import json, sys
for p in sys.argv[1:]:
    d = json.load(open(p))
    for r in d["rows"]:
        for b, v in r["results"].items():
            print(f"{r['workload'][:22]:22s} {b:28s} GPU {(v['gpu_ms'] or 0) * 1000:8.2f} us  latency {(v['ms'] or 0) * 1000:8.2f} us")
PY
grep -n "=====\|chosen" "$OUT/inductor-configs.txt" | cut -c1-400
