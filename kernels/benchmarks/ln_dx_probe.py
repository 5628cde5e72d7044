"""Run layer norm forward + backward at 4096 x 10240 fp16 twice under tritondiff and twice under Inductor.

A target for a profiler (issue #8: our backward dx kernel takes ~118 us against Inductor's ~86 us):

    ncu --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,gpu__time_duration.sum \\
        python -m kernels.benchmarks.ln_dx_probe

prints DRAM bytes, L2 hit rate and duration per kernel launch.  Without a GPU it says so and exits 0.
"""
from __future__ import annotations

import sys

import torch

from kernels.benchmarks import _timing


def main() -> int:
    if not _timing.require_gpu("kernels.benchmarks.ln_dx_probe"):
        return 0
    import compiler
    from compiler import workloads

    def fwd_bwd(fn):
        def run(x, w, b, dy):
            return torch.autograd.grad(fn(x, w, b), (x, w, b), dy)
        return run

    m, n = 4096, 10240
    x = torch.randn(m, n, device="cuda", dtype=torch.float16, requires_grad=True)
    w = torch.randn(n, device="cuda", dtype=torch.float16, requires_grad=True)
    b = torch.randn(n, device="cuda", dtype=torch.float16, requires_grad=True)
    dy = torch.randn(m, n, device="cuda", dtype=torch.float16)
    for name, compiled in (("tritondiff", compiler.compile_fresh(workloads.layer_norm)),
                           ("inductor", torch.compile(workloads.layer_norm))):
        run = fwd_bwd(compiled)
        for _ in range(2):
            run(x, w, b, dy)
        torch.cuda.synchronize()
        print(f"ln_dx_probe: {name} ran", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
