#!/usr/bin/env bash
# Session 18, call 5 (H100): the session's final compiler -- GPU tests of the touched code, then the wide suite
# against Inductor (layer norm 2048x32768's dx kernel now at 16 warps: heuristics.looped_warps).  Run from the
# repo root on the GPU machine; writes under $OUT.
set -x
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/env.txt"
python -c "import torch, triton, sys; print(torch.__version__, triton.__version__, sys.version.split()[0])" >> "$OUT/env.txt"
git log -1 --format='commit %H %s' >> "$OUT/env.txt" 2>/dev/null
timeout 60 python -m pytest -n 16 -q -p no:cacheprovider tests/compiler/test_reduction.py tests/compiler/test_heuristics.py \
    tests/compiler/test_config.py tests/compiler/test_layer_norm.py > "$OUT/tests.txt" 2>&1
# the row the change moves first (the device time left is short), then the rest of the suite
timeout 60 python -m compiler.benchmark --suite wide --only layer_norm --budget-s 50 \
    --out "$OUT/wide-ln.md" --json "$OUT/wide-ln.json" > "$OUT/wide-ln.log" 2>&1
timeout 110 python -m compiler.benchmark --suite wide --only softmax rms_norm "column sum" --budget-s 100 \
    --out "$OUT/wide.md" --json "$OUT/wide.json" > "$OUT/wide.log" 2>&1
