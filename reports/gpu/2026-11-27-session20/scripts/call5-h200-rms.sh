#!/usr/bin/env bash
# Session 20, call 5 (H200): rms_norm 8192x8192 in Inductor's form (call 4: a looped kernel of one
# 8192-element step per pass, x read again in the second pass, 16 warps) against the compiler's persistent
# default, and nrm2 2^28 once more for the noise between machines.  Writes under $OUT.
set -x
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/env.txt"
L=reduction_strategy=looped,looped_rblock=8192,max_reduction_block_numel=8192
timeout 260 python -m compiler.benchmark --suite seed --only "rms_norm 8192" "nrm2 2^28" "softmax 8192" --budget-s 240 \
    --variant again:split_last_program_max_numel=4096 \
    --variant lp8k:$L,num_warps=16 --variant lp8kw8:$L,num_warps=8 --variant lp8kw32:$L,num_warps=32,max_num_warps=32 \
    --variant lp8k_nohint:$L,num_warps=16,eviction_hints=False \
    --out "$OUT/rms.md" --json "$OUT/rms.json" > "$OUT/rms.log" 2>&1
python - "$OUT/rms.json" <<'PY'
import json, sys
for p in sys.argv[1:]:
    d = json.load(open(p))
    for r in d["rows"]:
        for b, v in r["results"].items():
            print(f"{r['workload'][:22]:22s} {b:28s} GPU {(v['gpu_ms'] or 0) * 1000:8.2f} us  latency {(v['ms'] or 0) * 1000:8.2f} us {v.get('error') or ''}")
PY
