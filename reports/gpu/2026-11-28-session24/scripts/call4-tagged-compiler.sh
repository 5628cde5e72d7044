#!/usr/bin/env bash
# Session 24 call 4 (H200): the compiler's tagged last-program form.  GPU tests of the split reductions and the
# planted-state subjects; tagged_stress.py; nrm2 2^20 and 2^28 with the tagged form (default) against the fence
# form and the split's programs per SM / warps; a campaign over the split subjects.  Outputs: $OUT/call4-*.
set -x
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
C=${CALL:-call4}
D=reports/gpu/2026-11-28-session24/scripts
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > "$OUT/$C-env.txt"
python -c "import torch, triton, sys; print(torch.__version__, triton.__version__, sys.version.split()[0])" >> "$OUT/$C-env.txt"
git log -1 --format=%h >> "$OUT/$C-env.txt"; git status --short | head -20 >> "$OUT/$C-env.txt"
cat "$OUT/$C-env.txt"
timeout 150 python -m pytest -q -n 8 -p no:randomly -p harness.pytest_plugin tests/compiler/test_reduction.py \
    tests/compiler/test_runtime.py -k "split or tagged or fence or last_program or stream or fast_loop" \
    "tests/compiler/test_subjects.py::test_a_split_that_leaves_its_state_set_is_caught" \
    "tests/compiler/test_subjects.py::test_the_second_call_is_compared_bit_for_bit" > "$OUT/$C-tests.txt" 2>&1
tail -3 "$OUT/$C-tests.txt"
timeout 90 python $D/tagged_stress.py ${CALLS:-1000} > "$OUT/$C-stress.txt" 2>&1
cat "$OUT/$C-stress.txt" | tail -15
timeout 240 python -m compiler.benchmark --only "nrm2" --rounds ${ROUNDS:-9} --budget-s 200 \
    --variant "fence:split_last_program_sync='fence'" --variant "pps2:split_short_programs_per_sm=2" \
    --variant "pps2w8:split_short_programs_per_sm=2,num_warps=8" --variant "w8:num_warps=8" \
    --out "$OUT/$C-nrm2.md" --json "$OUT/$C-nrm2.json" > "$OUT/$C-nrm2.log" 2>&1
python -m compiler.benchmark --summary "$OUT/$C-nrm2.json"
timeout 100 python -m harness fuzz compiler.nrm2 compiler.reduce_rows_split compiler.reduce_columns_split \
    --budget ${CAMPAIGN:-60}s --seed 24 --store "$OUT/$C-campaign.db" --report "$OUT/$C-campaign" > "$OUT/$C-campaign.log" 2>&1
tail -4 "$OUT/$C-campaign.log"
