#!/usr/bin/env bash
# The third-party subject packs on a CUDA machine: install the `wild` extra (from WHEELS, a folder of wheels, on a
# machine without the package index: liger-kernel, flag-gems and flag-gems' PyYAML / SQLAlchemy / greenlet; no
# dependency resolution, so the machine's torch and numpy stay), list the packs, and run one campaign per pack in
# PACKS (default: both) at once, each BUDGET_S seconds with WORKERS lanes, all sharing the GPU.  HUGE_S > 0 adds a
# `--huge` campaign over the liger pack (inputs past 2^31 elements, one lane).  Then every finding's standalone.py
# is replayed where tritondiff cannot be imported (its exit status and table go to standalone.txt), and the dumps
# (inputs.pt over 4 MiB left out) are packed into dumps.tgz.  Outputs under $OUT (reports/wild.md).
set -uo pipefail
OUT=${OUT:-/tmp/gpu-wild}
WORK=${WORK:-/tmp/gpu-wild-work}
mkdir -p "$OUT" "$WORK"
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
python -m tritondiff.harness fuzz --list 'wild.*' > "$OUT/list.txt" 2> "$WORK/list.err"
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
    --store "$WORK/$pack/findings.db" --report "$WORK/$pack/report" > "$OUT/$pack.log" 2>&1 &
done
wait
for pack in ${PACKS:-liger gems}; do
  echo "== $pack"; grep -v "Warning\|warn(" "$OUT/$pack.log" | tail -40
done
if [ "${HUGE_S:-0}" -gt 0 ]; then
  python -m tritondiff.harness fuzz 'wild.liger.*' --huge --budget "$HUGE_S" --workers 1 --seed 1 \
    --store "$WORK/huge/findings.db" --report "$WORK/huge/report" > "$OUT/huge.log" 2>&1
  echo "== huge"; grep -v "Warning\|warn(" "$OUT/huge.log" | tail -40
fi
# standalone repros, with tritondiff blocked from import
mkdir -p "$WORK/blocker/tritondiff"
echo 'raise ImportError("tritondiff is not installed here")' > "$WORK/blocker/tritondiff/__init__.py"
find "$WORK" -name standalone.py -path '*-dumps/*' | sort > "$WORK/repros.txt"
replay() {
  local dir; dir=$(dirname "$1")
  (cd "$dir" && PYTHONPATH="$WORK/blocker" timeout 240 python -W ignore::UserWarning standalone.py \
     > standalone.out 2>&1; echo $? > standalone.rc)
}
export -f replay; export WORK
xargs -a "$WORK/repros.txt" -P "${REPLAY_JOBS:-8}" -I{} bash -c 'replay "$@"' _ {}
while read -r repro; do
  dir=$(dirname "$repro")
  printf '### %s rc=%s\n' "${dir#"$WORK"/}" "$(cat "$dir/standalone.rc")"; tail -14 "$dir/standalone.out"; echo
done < "$WORK/repros.txt" > "$OUT/standalone.txt"
count() { grep -c "^### .* rc=$1\$" "$OUT/standalone.txt"; }
echo "standalone repros replayed: $(grep -c '^### ' "$OUT/standalone.txt"); exit status 1 (an output off or an" \
  "input modified): $(count 1), 3 (the call raised): $(count 3), 0 (not reproduced): $(count 0)"
find "$WORK" -name inputs.pt -size +4M -delete
(cd "$WORK" && tar czf "$OUT/dumps.tgz" --exclude='*.db' --exclude='list.err' .)
ls -la "$OUT"
