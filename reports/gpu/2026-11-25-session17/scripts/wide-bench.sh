#!/usr/bin/env bash
# Session 17, call 1: the wide suite (compiler.benchmark --suite wide: rows past the seeds' shapes, so the looped
# and non-mixed-order paths run) against Inductor, and both compilers' Triton for the long-row softmax and
# log_softmax.  Run from the repo root on the GPU machine; writes under $OUT.
set -x
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/env.txt"
python -c "import torch, triton, sys; print(torch.__version__, triton.__version__, sys.version.split()[0])" >> "$OUT/env.txt"
timeout 330 python -m compiler.benchmark --suite wide --budget-s 300 \
    --out "$OUT/wide.md" --json "$OUT/wide.json" > "$OUT/wide.log" 2>&1
TRITONDIFF_COMPILER_DUMP=/tmp/smdump TORCH_LOGS=output_code timeout 150 python - > "$OUT/inductor-code.txt" 2>&1 <<'PY'
import torch, compiler
x = torch.randn(4096, 32768, device="cuda")
for fn in (lambda t: torch.softmax(t, -1), lambda t: torch.log_softmax(t, -1)):
    compiler.compile_fresh(fn)(x); torch._dynamo.reset(); torch.compile(fn)(x); torch.cuda.synchronize()
PY
cat /tmp/smdump/*/04_triton.py /tmp/smdump/*/05_plan.txt > "$OUT/tritondiff-code.txt"
