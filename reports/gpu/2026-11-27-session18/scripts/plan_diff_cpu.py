"""Which kernels of the benchmark's workloads (both suites, at their real shapes) change -- warps or source --
when the looped-reread rule (heuristics.looped_warps) is on, against it off (looped_reread_min_held=99)?  Runs
on the CPU: graphs captured from CPU inputs and generated with the GPU's knob values (config.py), nothing
launched.  TRITON_INTERPRET=1 python reports/gpu/2026-11-27-session18/scripts/plan_diff_cpu.py [NAME ...]
Output: plan-diff-cpu.txt beside the scripts folder (session 18)."""
import torch, compiler
from compiler import benchmark
from compiler.backend import capture_graphs
from compiler.pipeline import compile_graph
for name in ("randn", "rand"):
    orig = getattr(torch, name)
    def patched(*a, _orig=orig, **k):
        k["device"] = "cpu"; return _orig(*a, **k)
    setattr(torch, name, patched)
GPU = dict(persistent_max_rnumel=8192, looped_rblock=4096, max_reduction_block_numel=4096, persistent_wide_max_rnumel=32768,
           outer_reduction_xblock=32, split_min_rnumel=32768, mixed_order_max_xblock=256, programs_per_sm=2,
           split_min_chunk=2048, pointwise_block=1024, pointwise_tile_numel=1024, sm_count=132, mixed_order_max_rnumel=16384)
import sys
for w in benchmark.all_workloads() + benchmark.wide_workloads():
    if sys.argv[1:] and not any(s in w.name for s in sys.argv[1:]):
        continue
    inputs = w.make()
    bwd = w.build is benchmark._fwd_bwd
    args = inputs[:3] if bwd else inputs
    graphs = capture_graphs(w.fn, *args, backward=bwd)
    def specs(**knobs):
        out = {}
        with compiler.config.patch(**GPU, **knobs):
            for i, g in enumerate(graphs):
                exe = compile_graph(g.gm, g.args, f"g{i}")
                for ss in exe.generated.kernels.values():
                    for s in ss:
                        out[s.name] = (s.num_warps, s.source, s.meta.get("strategy"))
        return out
    new, old = specs(), specs(looped_reread_min_held=99)
    changed = [k for k in new if new[k][:2] != old.get(k, (None, None))[:2]]
    print(w.name, "kernels", len(new), "changed:", [(k, old[k][0], "->", new[k][0], new[k][2]) for k in changed], flush=True)
    del inputs, graphs
