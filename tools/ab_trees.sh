#!/usr/bin/env bash
# A/B of two source trees on one machine: run one benchmark command in each tree, alternating A B B A,
# so drift of the host's speed over the run falls on both sides alike.
#
#   tools/ab_trees.sh OUTDIR TREE_A TREE_B -- python -m bench.compiler --only layer_norm
#
# TREE_B is typically the working tree (.) and TREE_A an older commit unpacked beside it
# (git archive REV | tar -x -C ab_base).  Each run's stdout / stderr go to
# OUTDIR/<round>-<A|B>.log; a command that writes a report is given --out OUTDIR/<round>-<A|B>.md
# when it takes --out (pass --no-out to leave the command line alone).
set -euo pipefail
if [[ $# -lt 5 ]]; then
    echo "usage: $0 OUTDIR TREE_A TREE_B [--no-out] -- COMMAND..." >&2
    exit 2
fi
out=$(realpath -m "$1"); a=$(realpath "$2"); b=$(realpath "$3"); shift 3
add_out=1
if [[ "$1" == "--no-out" ]]; then add_out=0; shift; fi
if [[ "$1" != "--" ]]; then echo "$0: expected -- before the command" >&2; exit 2; fi
shift
mkdir -p "$out"
round=0
for side in A B B A; do
    round=$((round + 1))
    tree=$a; [[ $side == B ]] && tree=$b
    extra=(); [[ $add_out == 1 ]] && extra=(--out "$out/$round-$side.md")
    echo "== round $round: $side ($tree)" >&2
    (cd "$tree" && PYTHONPATH="$tree" "$@" "${extra[@]}") > "$out/$round-$side.log" 2>&1 || \
        echo "round $round ($side) exited $?" >&2
done
