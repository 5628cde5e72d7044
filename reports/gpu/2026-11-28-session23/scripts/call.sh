#!/usr/bin/env bash
# Session 23.  PART=checks: GPU tests of the session's subjects (the chunked mixed-order subject, never yet run
# compiled; the fuzz programs' cast-rounding truth) and a CAMPAIGN-second campaign over compiler.mixed_order_chunked
# and compiler.graph_fuzz_backward.  PART=table: the seed table with GPU time taken in ROUNDS interleaved rounds
# (default 7), then `compiler.benchmark --summary` with each row's range of per-round ratios.  Outputs: $OUT/$CALL-*.
set -x
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
C=${CALL:-call1}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > "$OUT/$C-env.txt"
python -c "import torch, triton, sys; print(torch.__version__, triton.__version__, sys.version.split()[0])" >> "$OUT/$C-env.txt"
git log -1 --format=%h >> "$OUT/$C-env.txt"; git status --short | head >> "$OUT/$C-env.txt"
cat "$OUT/$C-env.txt"
if [ "${PART:-checks}" = checks ]; then
  timeout ${TESTS_S:-200} python -m pytest -q tests/compiler/test_subjects.py tests/compiler/test_row_reductions.py \
      tests/compiler/test_reduction.py -k "chunk or prefetch or cast or half or rounds or fuzz" -p no:cacheprovider \
      > "$OUT/$C-tests.txt" 2>&1
  tail -3 "$OUT/$C-tests.txt"
  timeout $((${CAMPAIGN:-90} + 60)) python -m harness fuzz compiler.mixed_order_chunked compiler.graph_fuzz_backward \
      --budget ${CAMPAIGN:-90}s --seed 23 --store "$OUT/$C-campaign.db" --report "$OUT/$C-campaign" \
      > "$OUT/$C-campaign.log" 2>&1
  tail -4 "$OUT/$C-campaign.log"
else
  timeout ${TABLE_S:-540} python -m compiler.benchmark --suite seed --rounds ${ROUNDS:-7} --budget-s ${BUDGET:-440} \
      --out "$OUT/$C-seed.md" --json "$OUT/$C-seed.json" > "$OUT/$C-seed.log" 2>&1
  grep -i "geometric\|copy bandwidth" "$OUT/$C-seed.md"
  python -m compiler.benchmark --summary "$OUT/$C-seed.json"
fi
