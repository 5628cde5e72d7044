#!/usr/bin/env bash
# Session 22, call 1: LN 4096x10240's backward partial in held-chunk and next-row-prefetch shapes (hand-written),
# the compiled kernels under mixed_order_loop_stages, and nrm2 2^20's split shapes against Inductor.
set -x
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > "$OUT/env.txt"
python -c "import torch, triton, sys; print(torch.__version__, triton.__version__, sys.version.split()[0])" >> "$OUT/env.txt"
cat "$OUT/env.txt"
timeout 240 python -m kernels.benchmarks.mixed_order_probe --cases session22 > "$OUT/call1-mixed-order.txt" 2>&1
grep "^|\|copy" "$OUT/call1-mixed-order.txt"
timeout 150 python -m kernels.benchmarks.ln_dx_probe --variant mixed_order_loop_stages=2 --variant mixed_order_loop_stages=3 \
    --variant persistent_max_rnumel=16384 > "$OUT/call1-ln-probe.txt" 2>&1
grep -v "Warning\|warn\|return isinstance" "$OUT/call1-ln-probe.txt"
timeout 150 python -m compiler.benchmark --suite seed --only "nrm2 2^20" --variant one_step:rblock=8192 \
    --variant s256:split_count=256 --variant s64:split_count=64 --variant two_kernels:split_last_program_final=False \
    --variant w8:num_warps=8 --variant w32:num_warps=32 --budget-s 120 --out "$OUT/call1-nrm2.md" --json "$OUT/call1-nrm2.json" \
    > "$OUT/call1-nrm2.log" 2>&1
python - "$OUT/call1-nrm2.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["rows"]:
    for k, v in r["results"].items():
        if v.get("gpu_ms"):
            print(f"{r['workload'][:30]:30s} {k:24s} GPU {v['gpu_ms'] * 1000:8.3f} us")
PY
TORCH_LOGS=output_code timeout 60 python -c "
import torch
x = torch.randn(1 << 20, device='cuda')
f = torch.compile(lambda x: torch.sqrt((x * x).sum()))
f(x)" > "$OUT/call1-inductor-nrm2.txt" 2>&1
grep -n "def triton\|tl.sum\|XBLOCK\|R0_BLOCK\|grid\|num_warps" "$OUT/call1-inductor-nrm2.txt" | head -30
