#!/usr/bin/env bash
# The models suite on a CUDA machine: the norms' statistics dtypes ATen returns there, the benchmark rows of
# ``python -m bench.compiler --suite models`` (FILTER: one --only substring, e.g. float32) and, with FUZZ_S set, a
# harness campaign over the compiler.models.* subjects.  Outputs under $OUT (reports/compiler.md quotes them).
set -uo pipefail
OUT=${OUT:-/tmp/gpu-models}
mkdir -p "$OUT"
python - <<'PY'
import torch
aten = torch.ops.aten
bf, dev = torch.bfloat16, "cuda"
x = torch.randn(2, 4, 3, 3, dtype=bf, device=dev)
for wdt in (bf, torch.float32):
    w, b = torch.randn(4, device=dev, dtype=wdt), torch.randn(4, device=dev, dtype=wdt)
    print("group_norm w", wdt, [t.dtype for t in aten.native_group_norm(x, w, b, 2, 4, 9, 2, 1e-5)])
    print("layer_norm w", wdt, [t.dtype for t in aten.native_layer_norm(x.view(8, 9), [9], torch.randn(9, device=dev, dtype=wdt), torch.randn(9, device=dev, dtype=wdt), 1e-5)])
    print("batch_norm w", wdt, [t.dtype for t in aten._native_batch_norm_legit(x, w, b, torch.zeros(4, device=dev, dtype=wdt), torch.ones(4, device=dev, dtype=wdt), True, 0.1, 1e-5)])
PY
if [ -n "${FILTER:-}" ]; then
  name=$(echo "$FILTER" | tr -c 'a-z0-9\n' '-')
  python -m bench.compiler --suite models --only "$FILTER" --rounds ${ROUNDS:-3} --budget-s ${BUDGET_S:-420} \
    --out "$OUT/models-$name.md" --json "$OUT/models-$name.json"
fi
if [ -n "${FUZZ_S:-}" ]; then
  python -m tritondiff.harness fuzz 'compiler.models.*' --budget "$FUZZ_S" --workers ${WORKERS:-4} --seed 1 \
    --store "$OUT/fuzz/findings.db" --report "$OUT/fuzz-report" 2>&1 | grep -v "Warning\|warn(" | tail -40
fi
