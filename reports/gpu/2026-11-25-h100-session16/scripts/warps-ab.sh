#!/usr/bin/env bash
# Session 16, calls 4 (H100) and 5 (H200): one-wave kernels (split partials, narrow mixed-order kernels)
# at 32 warps -- a full SM's warp slots at two programs per SM -- against the default 16, in one
# interleaved benchmark run (call 3 on the H200: nrm2 2^28 at 32 warps 0.232 ms of GPU time, Inductor
# 0.232, the default 0.237).  With CAMPAIGN=1 also a 2-minute campaign over the compiler subjects whose
# report counts, per subject, the oracle allowance each pass needed; with SOURCES=1 the generated Triton
# of rms_norm 8192^2 from both compilers.  Run from the repo root on the GPU machine; writes under $OUT.
set -x
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/env.txt"
python -c "import torch, triton, sys; print(torch.__version__, triton.__version__, sys.version.split()[0])" >> "$OUT/env.txt"
timeout 300 python -m compiler.benchmark --only nrm2 layer_norm --budget-s 270 \
    --variant ow128:max_num_warps=32,one_wave_elements_per_warp=128 \
    --out "$OUT/warps.md" --json "$OUT/warps.json" > "$OUT/warps.log" 2>&1
if [ "${SOURCES:-0}" = 1 ]; then
  TRITONDIFF_COMPILER_DUMP=/tmp/rmsdump TORCH_LOGS=output_code timeout 120 python - > "$OUT/rms-norm-inductor-code.txt" 2>&1 <<'PY'
import torch, compiler
from compiler import workloads
x = torch.randn(8192, 8192, device="cuda"); w = torch.randn(8192, device="cuda")
compiler.compile_fresh(workloads.rms_norm)(x, w); torch.compile(workloads.rms_norm)(x, w); torch.cuda.synchronize()
PY
  cat /tmp/rmsdump/*/04_triton.py /tmp/rmsdump/*/05_plan.txt > "$OUT/rms-norm-tritondiff-code.txt"
fi
if [ "${CAMPAIGN:-0}" = 1 ]; then
  timeout 200 python -m harness fuzz 'compiler.*' --budget 2m --workers 12 --seed 1616 --store /tmp/c.db \
      --report "$OUT/campaign" > "$OUT/campaign.log" 2>&1
fi
