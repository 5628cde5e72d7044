#!/usr/bin/env bash
# Session 16, call 1: does a wide row's first element (the variance's shift) cost a block reduction?
# Per-kernel GPU times of the layer-norm graph with the row element taken from registers (a tl.sum over
# the row, the default) and reloaded (row_elements_from_registers=False), at 4096x10240 and 1152000x16
# fp16; plus the generated Triton source of the 4096x10240 graph (tarred).  Run from the repo root on the
# GPU machine; writes under $OUT.
set -x
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/env.txt"
python -c "import torch, triton, sys; print(torch.__version__, triton.__version__, sys.version.split()[0])" >> "$OUT/env.txt"
for shape in "4096 10240" "1152000 16"; do
  timeout 150 python -m kernels.benchmarks.ln_dx_probe --shape $shape --variant row_elements_from_registers=False \
      --variant row_elements_from_registers=True
done > "$OUT/row-elements.txt" 2>&1
TRITONDIFF_COMPILER_DUMP=/tmp/lndump timeout 100 python -m kernels.benchmarks.ln_dx_probe > /dev/null 2>&1
tar -C /tmp -czf "$OUT/ln4096-source.tgz" lndump
