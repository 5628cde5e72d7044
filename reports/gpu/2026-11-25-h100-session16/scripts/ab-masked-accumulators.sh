#!/usr/bin/env bash
# Session 16, call 9 (H100): a mixed-order kernel's padded column lanes held at the identity
# (masked-column-accumulators.patch, applied in the working tree) against the update without it, A B A:
# per-kernel GPU times of the layer-norm graph at 4096x10240 and 1,152,000x16 fp16.  Run from the repo root
# on the GPU machine with the patch applied; writes under $OUT.
set -x
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/env.txt"
python -c "import torch, triton, sys; print(torch.__version__, triton.__version__, sys.version.split()[0])" >> "$OUT/env.txt"
P=reports/gpu/2026-11-25-h100-session16/scripts/masked-column-accumulators.patch
probe() { for shape in "4096 10240" "1152000 16"; do
  timeout 100 python -m kernels.benchmarks.ln_dx_probe --shape $shape --variant row_elements_from_registers=True; done; }
{ echo "== A (masked)"; probe; } > "$OUT/ab.txt" 2>&1
patch -R -p1 < $P && { echo "== B (unmasked)"; probe; } >> "$OUT/ab.txt" 2>&1
patch -p1 < $P && { echo "== A again (masked)"; probe; } >> "$OUT/ab.txt" 2>&1
grep -v "Warning\|warn\|isinstance" "$OUT/ab.txt" > "$OUT/ab-clean.txt"
