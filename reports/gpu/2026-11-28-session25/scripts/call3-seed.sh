#!/usr/bin/env bash
# Session 25 call 3 (H200): the seed table with the one-thread-a-slot tagged poll as the default, in ROUNDS
# interleaved rounds (default 7), its per-round summary; then a CAMPAIGN-second campaign over the graph fuzzers
# (which draw both last-program forms) and the split subjects.  Outputs: $OUT/call3-*.
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
C=${CALL:-call3}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > "$OUT/$C-env.txt"
python -c "import torch, triton, sys; print(torch.__version__, triton.__version__, sys.version.split()[0])" >> "$OUT/$C-env.txt"
git log -1 --format=%h >> "$OUT/$C-env.txt"; git status --short | head -20 >> "$OUT/$C-env.txt"
cat "$OUT/$C-env.txt"
timeout ${TABLE_S:-400} python -m compiler.benchmark --suite seed --rounds ${ROUNDS:-7} --budget-s ${BUDGET:-330} \
    --out "$OUT/$C-seed.md" --json "$OUT/$C-seed.json" > "$OUT/$C-seed.log" 2>&1
grep -i "geometric\|copy bandwidth" "$OUT/$C-seed.md"
python -m compiler.benchmark --summary "$OUT/$C-seed.json"
timeout $((${CAMPAIGN:-70} + 50)) python -m harness fuzz compiler.graph_fuzz compiler.graph_fuzz_backward compiler.nrm2 \
    compiler.reduce_rows_split --budget ${CAMPAIGN:-70}s --seed 251 --store $OUT/$C-campaign.db \
    --report $OUT/$C-campaign > $OUT/$C-campaign.log 2>&1
tail -4 $OUT/$C-campaign.log
