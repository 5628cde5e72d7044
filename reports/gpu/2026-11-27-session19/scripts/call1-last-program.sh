#!/usr/bin/env bash
# Session 19, call 1: split reductions that finish in their last partial program (split_last_program_final).
# GPU tests of the reduction, runtime and subject code; the stress script; a campaign over the split subjects;
# nrm2 both sizes with the knob on (default) and off.  Run from the repo root on the GPU machine; writes under $OUT.
set -x
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/env.txt"
python -c "import torch, triton, sys; print(torch.__version__, triton.__version__, sys.version.split()[0])" >> "$OUT/env.txt"
git log -1 --format='commit %H %s' >> "$OUT/env.txt" 2>/dev/null
timeout 100 python reports/gpu/2026-11-27-session19/scripts/split_stress.py 2000 > "$OUT/stress.txt" 2>&1
timeout 170 python -m compiler.benchmark --suite seed --only "nrm2" --budget-s 150 \
    --variant twokernels:split_last_program_final=False \
    --out "$OUT/nrm2.md" --json "$OUT/nrm2.json" > "$OUT/nrm2.log" 2>&1
timeout 150 python -m pytest -q -n 8 -p no:randomly tests/compiler/test_reduction.py tests/compiler/test_heuristics.py \
    tests/compiler/test_config.py "tests/compiler/test_subjects.py::test_a_split_that_leaves_its_counters_set_is_caught_on_the_second_call" \
    > "$OUT/tests.txt" 2>&1
tail -3 "$OUT/tests.txt"
timeout 110 python -m harness fuzz compiler.nrm2 compiler.reduce_rows_split compiler.reduce_columns_split \
    --budget 90s --seed 19 --store /tmp/c19.db --report "$OUT/campaign" > "$OUT/campaign.log" 2>&1
tail -5 "$OUT/campaign.log"; cat "$OUT/stress.txt"; grep -E "nrm2" "$OUT/nrm2.md"
