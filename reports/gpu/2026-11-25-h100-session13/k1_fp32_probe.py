"""K1 forward and backward dx: time at the block's shape, and float32 error at a large offset.

  python reports/gpu/2026-11-25-h100-session13/k1_fp32_probe.py [--skip-errors] [--skip-time]

Uses only the launchers (``rmsnorm_project_fwd``, ``rmsnorm_project_bwd_dx``), so it runs on any tree since
session 5 (run it in two trees with kernels/benchmarks/ab_trees.sh for a before / after).  Times bf16 and fp32 at
T = 65536, K = 4 x 2560, D = 32 (do_bench, L2 flushed); then at x, W ~ 1000 +- 1 on the shapes of session 12's
findings: y's and r's relative error against float64, and dx's (autograd of the public op) judged by
``harness.oracle.compare`` against eager's (autograd of the reference) and float64's.
"""
import sys

import torch
import triton.testing

from harness import oracle
from kernels import mhc
from kernels.mhc import rmsnorm_project as rp


def timings():
    T, K, D = 65536, 4 * 2560, 32
    for dtype in (torch.bfloat16, torch.float32):
        x = torch.randn(T, K, device="cuda").to(dtype)
        W = (torch.randn(D, K, device="cuda") / K ** 0.5).to(dtype)
        gy = torch.randn(T, D, device="cuda").to(dtype)
        y, r = rp.rmsnorm_project_fwd(x, W, 1e-6)
        calls = {"fwd": lambda: rp.rmsnorm_project_fwd(x, W, 1e-6),
                 "bwd_dx": lambda: rp.rmsnorm_project_bwd_dx(x, W, gy, y, r, None, 1e-6)}
        for name, fn in list(calls.items()) * 2:
            fn()
            ms = triton.testing.do_bench(fn, warmup=25, rep=200)
            moved = x.numel() * x.element_size() * (1 if name == "fwd" else 2)
            print(f"time {str(dtype):15s} {name:7s}: {ms * 1e3:8.1f} us  {moved / ms / 1e6:6.0f} GB/s "
                  f"(x read once{', dx written' if name != 'fwd' else ''})", flush=True)


def dx_of(fn, x, W, g):
    x = x.detach().requires_grad_()
    fn(x, W).backward(g.to(x.dtype))
    return x.grad


def errors(dev):
    gen = torch.Generator(device=dev).manual_seed(0)
    for T, K, D, same_rows in ((6, 16924, 3, False), (1319, 333, 4, True), (64, 262144, 32, False)):
        x = 1000 + torch.randn(T, K, device=dev, generator=gen)
        W = (1000 + torch.randn(1 if same_rows else D, K, device=dev, generator=gen)).expand(D, K)
        g = torch.rand(T, D, device=dev, generator=gen) * 2 + 1e-3
        x64, W64 = x.double(), W.double()
        r64 = torch.rsqrt((x64 ** 2).mean(1) + 1e-6)
        y64 = x64 @ W64.T * r64[:, None]
        y, r = rp.rmsnorm_project_fwd(x, W, 1e-6)
        truth = dx_of(rp.reference_fused_rmsnorm_project, x64, W64, g)
        eager = dx_of(rp.reference_fused_rmsnorm_project, x, W, g)
        ours = dx_of(mhc.fused_rmsnorm_project, x, W, g)
        verdict = oracle.compare(ours, eager, truth)
        print(f"T={T} K={K} D={D}{' (W rows equal)' if same_rows else ''}: "
              f"y rel {((y.double() - y64).abs() / y64.abs()).max():.2e}  r rel {((r.double() - r64).abs() / r64).max():.2e}  "
              f"dx max err {(ours.double() - truth).abs().max():.2e} (eager {(eager.double() - truth).abs().max():.2e}, "
              f"max |dx| {truth.abs().max():.2e})  oracle: {verdict.message[:160]}", flush=True)


def main():
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    print(torch.cuda.get_device_name() if dev == "cuda" else "cpu", torch.__version__, flush=True)
    if dev == "cuda" and "--skip-time" not in sys.argv:
        timings()
    if "--skip-errors" not in sys.argv:
        errors(dev)


if __name__ == "__main__":
    main()
