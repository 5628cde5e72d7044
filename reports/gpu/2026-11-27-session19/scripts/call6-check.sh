#!/usr/bin/env bash
# Session 19, call 6 (H100): the final code after the review follow-ups -- GPU tests of the reduction, heuristics,
# subjects (counter and bit-comparison tests) and fuzz code, the stress script (200 calls), and a 45-s campaign
# over the subjects that now run a stateful program twice (layer norm, backward fuzz) and nrm2.  Run from the repo
# root on the GPU machine; writes under $OUT.
set -x
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/env.txt"
python -c "import torch, triton, sys; print(torch.__version__, triton.__version__, sys.version.split()[0])" >> "$OUT/env.txt"
timeout 100 python -m pytest -q -n 8 -p no:randomly tests/compiler/test_reduction.py tests/compiler/test_heuristics.py \
    tests/compiler/test_fuzz.py -m "not slow" \
    "tests/compiler/test_subjects.py::test_a_split_that_leaves_its_counters_set_is_caught_on_the_second_call" \
    "tests/compiler/test_subjects.py::test_the_second_call_is_compared_bit_for_bit" > "$OUT/tests.txt" 2>&1
timeout 30 python reports/gpu/2026-11-27-session19/scripts/split_stress.py 200 > "$OUT/stress.txt" 2>&1
timeout 60 python -m harness fuzz compiler.nrm2 compiler.layer_norm_fwd_bwd compiler.graph_fuzz_backward \
    --budget 45s --seed 191 --store /tmp/c191.db --report "$OUT/campaign" > "$OUT/campaign.log" 2>&1
tail -2 "$OUT/tests.txt"; grep -E "differ|OK|FAIL|latency" "$OUT/stress.txt"; tail -4 "$OUT/campaign.log"
