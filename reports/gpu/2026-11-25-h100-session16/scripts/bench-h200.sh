#!/usr/bin/env bash
# Session 16, call 2: the full compiler-vs-Inductor table on an H200 (the reference figures are
# from one), plus the layer-norm graph's per-kernel times there.  Run from the repo root on the GPU
# machine; writes under $OUT.
set -x
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/env.txt"
python -c "import torch, triton, sys; print(torch.__version__, triton.__version__, sys.version.split()[0])" >> "$OUT/env.txt"
timeout 420 python -m compiler.benchmark --budget-s 380 --out "$OUT/bench.md" --json "$OUT/bench.json" > "$OUT/bench.log" 2>&1
timeout 120 python -m kernels.benchmarks.ln_dx_probe --variant row_elements_from_registers=True > "$OUT/ln-probe.txt" 2>&1
