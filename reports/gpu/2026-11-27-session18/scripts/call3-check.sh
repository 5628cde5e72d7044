#!/usr/bin/env bash
# Session 18, call 3 (H100): the GPU tests of the touched code (the wide-persistent rule with its fill
# condition), the wide suite against Inductor with the rule off (old) and with one warp per 256 elements
# (e256: call 1 took layer norm 2048x32768 from 0.467 to 0.376 ms on an H100 with it; call 2's H200 run
# skipped that row), and a 90-second campaign over the compiler's softmax and rms_norm subjects, whose rows
# now reach the wide persistent kernel.  Run from the repo root on the GPU machine; writes under $OUT.
set -x
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/env.txt"
python -c "import torch, triton, sys; print(torch.__version__, triton.__version__, sys.version.split()[0])" >> "$OUT/env.txt"
git log -1 --format='commit %H %s' >> "$OUT/env.txt" 2>/dev/null
timeout 170 python -m pytest -n 16 -q -p no:cacheprovider tests/compiler/test_reduction.py tests/compiler/test_heuristics.py \
    tests/compiler/test_config.py tests/compiler/test_subjects.py tests/compiler/test_online.py > "$OUT/tests.txt" 2>&1
timeout 260 python -m compiler.benchmark --suite wide --budget-s 245 \
    --variant old:persistent_wide_max_rnumel=8192 --variant e256:elements_per_warp=256 \
    --out "$OUT/wide.md" --json "$OUT/wide.json" > "$OUT/wide.log" 2>&1
timeout 130 python -m harness fuzz compiler.softmax compiler.rms_norm --budget 90s --seed 18 \
    --store /tmp/findings.db --report /tmp/campaign > "$OUT/campaign.log" 2>&1
ls /tmp/campaign >> "$OUT/campaign.log" 2>&1; cp /tmp/campaign/*.md "$OUT/" 2>/dev/null
