#!/usr/bin/env bash
# Session 19, call 3: nrm2 2^20 (the seed row at 0.99x of Inductor's GPU time) under split counts and blocks
# around call 2's lead (split_count=132, i.e. 128 partials of two 4096-element steps: 3.17 us against 3.38),
# the default twice for the noise.  Run from the repo root on the GPU machine; writes under $OUT.
set -x
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/env.txt"
python -c "import torch, triton, sys; print(torch.__version__, triton.__version__, sys.version.split()[0])" >> "$OUT/env.txt"
timeout 200 python -m compiler.benchmark --suite seed --only "nrm2 2^20" --budget-s 180 \
    --variant again:split_last_program_max_numel=4096 \
    --variant s128:split_count=128 --variant s64:split_count=64 \
    --variant s128r2k:split_count=128,rblock=2048 --variant s128w8:split_count=128,num_warps=8 \
    --variant s128r8k:split_count=128,rblock=8192 --variant pps1:programs_per_sm=1 \
    --variant s128two:split_count=128,split_last_program_final=False \
    --out "$OUT/nrm2-splits.md" --json "$OUT/nrm2-splits.json" > "$OUT/nrm2-splits.log" 2>&1
python - "$OUT/nrm2-splits.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["rows"]:
    for b, v in r["results"].items():
        print(f"{b:28s} GPU {v['gpu_ms'] * 1000:7.3f} us  latency {v['ms'] * 1000:7.2f} us  host {(v['host_ms'] or 0) * 1000:6.1f} us")
PY
