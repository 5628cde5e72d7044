#!/usr/bin/env bash
# Session 17, call 2: the long-row workloads of the wide suite with online softmax (codegen.online), against it
# off and against launch shapes that keep fewer rows in flight per SM (more warps, larger / smaller RBLOCK), so
# a two-pass kernel's second read can still find its row in L2; and the configs Inductor's autotuner picked for
# the same programs (its .best_config files).  Run from the repo root on the GPU machine; writes under $OUT.
set -x
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/env.txt"
python -c "import torch, triton, sys; print(torch.__version__, triton.__version__, sys.version.split()[0])" >> "$OUT/env.txt"
timeout 420 python -m compiler.benchmark --suite wide --only softmax rms_norm --budget-s 380 \
    --variant noonline:online_softmax=False \
    --variant w16:num_warps=16 \
    --variant w32:num_warps=32 \
    --variant rb2k:looped_rblock=2048,max_reduction_block_numel=2048 \
    --variant rb8k:looped_rblock=8192,max_reduction_block_numel=8192 \
    --variant rb8k_w32:looped_rblock=8192,max_reduction_block_numel=8192,num_warps=32 \
    --variant st2:loop_stages=2 \
    --out "$OUT/sweep.md" --json "$OUT/sweep.json" > "$OUT/sweep.log" 2>&1
TORCHINDUCTOR_CACHE_DIR=/tmp/ind-cache timeout 120 python - > "$OUT/inductor-configs.txt" 2>&1 <<'PY'
import glob, torch
from compiler import workloads
from compiler.benchmark import wide_workloads
for w in wide_workloads():
    if not any(s in w.name for s in ("softmax", "rms_norm", "layer_norm")):
        continue
    before = set(glob.glob("/tmp/ind-cache/**/*.best_config", recursive=True))
    torch._dynamo.reset()
    torch.manual_seed(0)
    w.build(torch.compile(w.fn))(*w.make())
    torch.cuda.synchronize()
    for path in sorted(set(glob.glob("/tmp/ind-cache/**/*.best_config", recursive=True)) - before):
        print(w.name, open(path).read())
PY
