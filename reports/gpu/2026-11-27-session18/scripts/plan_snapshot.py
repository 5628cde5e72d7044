"""Every kernel the benchmark's workloads (both suites, at their real shapes) generate with the GPU's knob
values, as {workload: {kernel: [warps, grid, sha256 of the source]}}, written as JSON: run in two trees and
compare, to show which kernels a change moves without a GPU.  CPU only (graphs captured from CPU inputs,
nothing launched).  Session 18: the final tree against 3ad12d8, the code of calls 4-5 (plan-snapshot-diff.txt).

    TRITON_INTERPRET=1 PYTHONPATH=. python reports/gpu/2026-11-27-session18/scripts/plan_snapshot.py OUT.json
"""
import hashlib
import json
import sys

import torch

import compiler
from compiler import benchmark
from compiler.backend import capture_graphs
from compiler.pipeline import compile_graph

GPU = dict(persistent_max_rnumel=8192, looped_rblock=4096, max_reduction_block_numel=4096,
           persistent_wide_max_rnumel=32768, outer_reduction_xblock=32, split_min_rnumel=32768,
           mixed_order_max_xblock=256, programs_per_sm=2, split_min_chunk=2048, pointwise_block=1024,
           pointwise_tile_numel=1024, sm_count=132, mixed_order_max_rnumel=16384)


def _on_cpu(name):
    orig = getattr(torch, name)

    def make(*args, **kwargs):
        kwargs["device"] = "cpu"
        return orig(*args, **kwargs)
    setattr(torch, name, make)


def main(out: str) -> None:
    for name in ("randn", "rand"):          # the workloads make their inputs on "cuda"
        _on_cpu(name)
    snapshot = {}
    for w in benchmark.all_workloads() + benchmark.wide_workloads():
        bwd = w.build is benchmark._fwd_bwd
        inputs = w.make()
        kernels = {}
        for i, g in enumerate(capture_graphs(w.fn, *(inputs[:3] if bwd else inputs), backward=bwd)):
            with compiler.config.patch(**GPU):
                exe = compile_graph(g.gm, g.args, f"g{i}")
            for specs in exe.generated.kernels.values():
                for s in specs:
                    kernels[s.name] = [s.num_warps, list(s.grid), hashlib.sha256(s.source.encode()).hexdigest()[:16]]
        snapshot[w.name] = kernels
        print(w.name, len(kernels), "kernels", flush=True)
    with open(out, "w") as f:
        json.dump(snapshot, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main(sys.argv[1])
