#!/usr/bin/env bash
# Session 15, calls 1-2: GPU tests of the touched areas, then the layer-norm workloads with the current
# variance lowering and with the one before acde2b8 (its file given as $1, made on a machine with the
# history:  git show 088ab14:compiler/lowerings/reductions.py > before.py).  Run from the repo root on
# the GPU machine; writes under $OUT.  The working tree's reductions.py is overwritten: run on a copy.
set -x
BEFORE=${1:?usage: ab-variance-ln.sh BEFORE_REDUCTIONS_PY}
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/env.txt"
python -c "import torch, triton, sys; print(torch.__version__, triton.__version__, sys.version.split()[0])" >> "$OUT/env.txt"
timeout 230 python -m pytest -n 8 -q -p no:cacheprovider tests/compiler/test_reduction.py tests/compiler/test_layer_norm.py \
    tests/compiler/test_scheduler.py tests/compiler/test_subjects.py tests/compiler/test_partition.py tests/harness/test_huge.py \
    > "$OUT/tests.txt" 2>&1
timeout 200 python -m compiler.benchmark --only layer_norm --budget-s 180 --out "$OUT/bench-ln-after.md" --json "$OUT/bench-ln-after.json"
cp "$BEFORE" compiler/lowerings/reductions.py
timeout 150 python -m compiler.benchmark --only layer_norm --backends tritondiff --budget-s 130 \
    --out "$OUT/bench-ln-before.md" --json "$OUT/bench-ln-before.json"
