"""Every kernel the compiler benchmark's workloads (both suites, at their real shapes) generate with a
GPU's knob values, hashed, without a GPU: run it in two trees and compare, to show which kernels a change
moves (a refactor must move none).  Graphs are captured from CPU inputs; nothing is launched.

    TRITON_INTERPRET=1 python -m tools.plan_snapshot OUT.json [--only NAME ...]
    python -m tools.plan_snapshot --diff A.json B.json       # exit 1 when a kernel differs

The snapshot is {workload: {kernel: [warps, grid, sha256 of the source (16 hex digits)]}}.
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import sys
from typing import Iterator

#: The knobs a GPU sets from its properties (an H200's SM count), so the plan is a GPU's plan.
GPU = dict(persistent_max_rnumel=8192, looped_rblock=4096, max_reduction_block_numel=4096,
           persistent_wide_max_rnumel=32768, outer_reduction_xblock=32, split_min_rnumel=32768,
           mixed_order_max_xblock=256, programs_per_sm=2, split_min_chunk=2048, pointwise_block=1024,
           pointwise_tile_numel=1024, sm_count=132, mixed_order_max_rnumel=16384)


@contextlib.contextmanager
def _inputs_on_cpu() -> Iterator[None]:
    """The workloads make their inputs on "cuda": make them on the CPU instead."""
    import torch

    saved = {name: getattr(torch, name) for name in ("randn", "rand")}

    def on_cpu(orig):
        return lambda *args, **kwargs: orig(*args, **{**kwargs, "device": "cpu"})
    try:
        for name, orig in saved.items():
            setattr(torch, name, on_cpu(orig))
        yield
    finally:
        for name, orig in saved.items():
            setattr(torch, name, orig)


def snapshot(only: list[str] | None = None) -> dict:
    """The snapshot of the workloads named in ``only`` (all of both suites when None)."""
    from bench import compiler as benchmark
    from tritondiff import compiler
    from tritondiff.compiler.backend import capture_graphs
    from tritondiff.compiler.pipeline import compile_graph

    out = {}
    workloads = benchmark.all_workloads() + benchmark.wide_workloads()
    unknown = sorted(set(only or ()) - {w.name for w in workloads})
    if unknown:
        raise SystemExit(f"plan_snapshot: unknown workload(s) {unknown}; known: {sorted(w.name for w in workloads)}")
    with _inputs_on_cpu():
        for w in workloads:
            if only and w.name not in only:
                continue
            bwd = w.build is benchmark._fwd_bwd
            inputs = w.make()
            kernels = {}
            for i, g in enumerate(capture_graphs(w.fn, *(inputs[:3] if bwd else inputs), backward=bwd)):
                with compiler.config.patch(**GPU):
                    exe = compile_graph(g.gm, g.args, f"g{i}")
                for specs in exe.generated.kernels.values():
                    for s in specs:
                        kernels[s.name] = [s.num_warps, list(s.grid), hashlib.sha256(s.source.encode()).hexdigest()[:16]]
            out[w.name] = kernels
            print(w.name, len(kernels), "kernels", flush=True)
    return out


def diff(a: dict, b: dict) -> list[str]:
    """One line per workload or kernel that is in one snapshot only, or differs between them."""
    lines = []
    for name in sorted(set(a) | set(b)):
        if name not in a or name not in b:
            lines.append(f"{name}: only in {'B' if name not in a else 'A'}")
            continue
        for kernel in sorted(set(a[name]) | set(b[name])):
            ka, kb = a[name].get(kernel), b[name].get(kernel)
            if ka != kb:
                lines.append(f"{name} {kernel}: {ka} -> {kb}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.plan_snapshot", description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", help="where to write the snapshot (JSON)")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="these workloads only")
    parser.add_argument("--diff", nargs=2, metavar=("A", "B"), help="compare two snapshots instead")
    args = parser.parse_args(argv)
    if args.diff:
        a, b = (json.load(open(p)) for p in args.diff)
        lines = diff(a, b)
        print("\n".join(lines) if lines else f"identical: {sum(len(k) for k in a.values())} kernels")
        return 1 if lines else 0
    if not args.out:
        parser.error("give OUT.json, or --diff A.json B.json")
    with open(args.out, "w") as f:
        json.dump(snapshot(args.only), f, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
