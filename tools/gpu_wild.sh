#!/usr/bin/env bash
# The third-party subject packs on a CUDA machine: install the `wild` extra (from WHEELS, a folder of wheels, on a
# machine without the package index: liger-kernel, flag-gems and flag-gems' PyYAML / SQLAlchemy / greenlet; no
# dependency resolution, so the machine's torch and numpy stay), list the packs, and run a campaign over PACKS
# (default: both) for BUDGET_S seconds with WORKERS lanes sharing the GPU.  Outputs under $OUT (reports/wild.md).
set -uo pipefail
OUT=${OUT:-/tmp/gpu-wild}
mkdir -p "$OUT"
if [ -n "${WHEELS:-}" ]; then
  python -m pip install -q --no-deps "$WHEELS"/*.whl 2>&1 | grep -v "^WARNING" | tail -3
else
  python -m pip install -q 'tritondiff[wild]' 2>&1 | tail -3
fi
python - <<'PY'
import importlib.metadata as md, torch, triton
print("versions:", {p: md.version(p) for p in ("liger-kernel", "flag-gems")}, "torch", torch.__version__,
      "triton", triton.__version__, torch.cuda.get_device_name())
PY
python -m tritondiff.harness fuzz --list 'wild.*' > "$OUT/list.txt" 2> "$OUT/list.err"
python - "$OUT/list.txt" <<'PY'
import sys
text = open(sys.argv[1]).read()
for pack in ("liger", "gems"):
    names = {w.strip(",") for w in text.split() if w.startswith(pack + ".")}
    ops = {n.removesuffix("_backward") for n in names}
    print(f"wild.{pack}: {len(names)} subjects, {len(ops)} ops")
PY
for pack in ${PACKS:-liger gems}; do
  python -m tritondiff.harness fuzz "wild.$pack.*" --budget "${BUDGET_S:-240}" --workers "${WORKERS:-4}" --seed 1 \
    --store "$OUT/$pack/findings.db" --report "$OUT/$pack/report" 2>&1 | grep -v "Warning\|warn(" | tail -60
done
