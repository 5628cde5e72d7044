#!/usr/bin/env bash
# Session 20, call 10: config.native_bf16_casts (Triton's own bf16 casts on a GPU instead of the prelude's
# integer helpers).  GPU tests of the cast and template code; a campaign over the compiler subjects that draw
# bf16; RMSNorm widths (rms_widths.py, where bf16 rows were 0.79-0.96x of Inductor in call 9); the seed
# table's bf16 rows (mHC) and rms_norm / softmax, with the helpers (native_bf16_casts=False) beside.
set -x
export PYTHONPATH=$PWD TRITONDIFF_DEVICE=cuda PYTHONUNBUFFERED=1
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/env.txt"
python -c "import torch, triton, sys; print(torch.__version__, triton.__version__, sys.version.split()[0])" >> "$OUT/env.txt"
timeout 150 python -m pytest -q -n 12 -p no:randomly tests/compiler/test_kernel.py tests/compiler/test_matmul_operands.py \
    tests/compiler/test_templates.py tests/compiler/test_workloads.py tests/compiler/test_pointwise.py \
    tests/compiler/test_ops.py > "$OUT/tests.txt" 2>&1
tail -3 "$OUT/tests.txt"
timeout 90 python -m harness fuzz compiler.rms_norm compiler.mhc_pre_map compiler.mhc_post_res compiler.mhc_coefficients \
    compiler.graph_fuzz compiler.gemm_template.rmsnorm_project_hoisted --budget 60s --workers 4 --seed 20 \
    --store "$OUT/campaign.db" --report "$OUT/campaign" > "$OUT/campaign.log" 2>&1
echo "campaign exit $?"; tail -5 "$OUT/campaign.log"
timeout 120 python reports/gpu/2026-11-27-session20/scripts/rms_widths.py 3 > "$OUT/widths.txt" 2>&1
tail -9 "$OUT/widths.txt"
timeout 200 python -m compiler.benchmark --suite seed --only "mHC" "rms_norm 8192" --budget-s 180 \
    --variant helpers:native_bf16_casts=False \
    --out "$OUT/seed.md" --json "$OUT/seed.json" > "$OUT/seed.log" 2>&1
python - "$OUT/seed.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["rows"]:
    for b, v in r["results"].items():
        print(f"{r['workload'][:24]:24s} {b:22s} GPU {(v['gpu_ms'] or 0) * 1000:9.2f} us  latency {(v['ms'] or 0) * 1000:9.2f} us {v.get('matches_eager')}")
PY
