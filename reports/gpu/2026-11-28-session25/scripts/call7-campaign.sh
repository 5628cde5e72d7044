#!/usr/bin/env bash
# Session 25 call 7 (H200): a CAMPAIGN-second campaign, 4 workers, over the graph fuzzers (split reductions drawn
# in the tagged and fence forms; automatic ones tagged by default) and the split subjects, at the final code.
# Outputs: $OUT/call7-*.
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
mkdir -p "$OUT"
git log -1 --format=%h > "$OUT/call7-env.txt"; git status --short | head -20 >> "$OUT/call7-env.txt"
timeout $((${CAMPAIGN:-240} + 90)) python -m harness fuzz compiler.graph_fuzz compiler.graph_fuzz_backward \
    compiler.nrm2 compiler.reduce_rows_split compiler.reduce_columns_split --workers 4 --budget ${CAMPAIGN:-240}s \
    --seed 257 --store $OUT/call7-campaign.db --report $OUT/call7-campaign > $OUT/call7-campaign.log 2>&1
tail -6 $OUT/call7-campaign.log
