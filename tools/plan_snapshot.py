"""Every kernel the compiler benchmark's workloads (at their real shapes) generate with a GPU's knob values,
hashed, without a GPU: run it in two trees and compare, to show which kernels a change moves (a refactor must
move none).  Graphs are captured from CPU inputs; nothing is launched.  ``--suite bench``: the seed and wide
suites; ``models``: the models suite's blocks forward and backward in each mode (graphs as traced on the CPU,
whose attention and convolution calls differ from a GPU's; the kernels around them are the plan's).

    TRITON_INTERPRET=1 python -m tools.plan_snapshot OUT.json [--suite bench|models|all] [--only NAME ...]
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


def _hashed(graphs) -> dict:
    """{kernel: [warps, grid, source hash]} of ``graphs`` (captured) compiled under the GPU's knobs."""
    from tritondiff import compiler
    from tritondiff.compiler.pipeline import compile_graph

    kernels = {}
    for i, g in enumerate(graphs):
        with compiler.config.patch(**GPU):
            exe = compile_graph(g.gm, g.args, f"g{i}")
        for specs in exe.generated.kernels.values():
            for s in specs:
                kernels[s.name] = [s.num_warps, list(s.grid), hashlib.sha256(s.source.encode()).hexdigest()[:16]]
    return kernels


def _bench_cases() -> dict:
    """Workload name -> a function capturing its graphs: the seed and wide suites."""
    from bench import compiler as benchmark
    from tritondiff.compiler.backend import capture_graphs

    def capture(w):
        bwd = w.build is benchmark._fwd_bwd
        inputs = w.make()
        return capture_graphs(w.fn, *(inputs[:3] if bwd else inputs), backward=bwd)
    return {w.name: (lambda w=w: capture(w)) for w in benchmark.all_workloads() + benchmark.wide_workloads()}


def _model_cases() -> dict:
    """Workload name -> a function capturing its graphs: the models suite's rows (bench.compiler's names), each
    block at its benchmark sizes on the CPU, forward and the backward of every floating output."""
    import torch

    from bench import compiler as benchmark
    from tritondiff.compiler import models
    from tritondiff.compiler.backend import capture_graphs

    def capture(model, mode):
        sizes = dict(model.bench)
        g = torch.Generator().manual_seed(0)
        inputs = [torch.randint(0, sizes[i.ids_below], models.concrete(i.shape, sizes), generator=g) if i.ids_below
                  else torch.randn(models.concrete(i.shape, sizes), generator=g) for i in model.inputs.values()]
        dtype = models.compute_dtype(mode, torch.float32)
        mod = models.module(model, sizes, 0, mode, dtype, "cpu")
        leaves = [models.cast_input(t, mode) for t in inputs]
        leaves = [t.requires_grad_() if t.is_floating_point() else t for t in leaves]
        with torch.autocast("cpu", dtype=models.AUTOCAST_DTYPE, enabled=mode == "autocast"):
            return capture_graphs(lambda *xs: models.call_module(mod, *xs), *leaves, backward=True)
    return {f"{m.name} fwd+bwd {mode}": (lambda m=m, mode=mode: capture(m, mode)) for m in models.SUITE
            for mode in benchmark.MODEL_MODES + (("autocast",) if m.name in benchmark.AUTOCAST_MODELS else ())}


SUITES = {"bench": _bench_cases, "models": _model_cases}


def snapshot(only: list[str] | None = None, suite: str = "bench") -> dict:
    """The snapshot of the workloads named in ``only`` (all of ``suite`` when None; "all": both suites)."""
    cases = {}
    for name in (SUITES if suite == "all" else [suite]):
        cases.update(SUITES[name]())
    unknown = sorted(set(only or ()) - set(cases))
    if unknown:
        raise SystemExit(f"plan_snapshot: unknown workload(s) {unknown}; known: {sorted(cases)}")
    out = {}
    with _inputs_on_cpu():
        for name, capture in cases.items():
            if only and name not in only:
                continue
            out[name] = _hashed(capture())
            print(name, len(out[name]), "kernels", flush=True)
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
    parser.add_argument("--suite", choices=sorted(SUITES) + ["all"], default="bench",
                        help="bench: the seed and wide suites (the default); models: the models suite; all: both")
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
        json.dump(snapshot(args.only, args.suite), f, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
