"""mHC K1's dW = (g r)^T @ x for 16-bit x, as the backward calls it: time and error, in any tree.

  python reports/gpu/2026-11-25-h100-session13/weight_grad_ab.py

Session 12's ``weight_grad(scaled, x)`` took g r formed by the caller (and the caller rounded dW to W's dtype);
session 13's ``weight_grad(gy, inv_rms, x, out_dtype)`` does both in its kernels.  This script calls whichever
the tree has, with the caller's work included, so kernels/benchmarks/ab_trees.sh can run it in both trees.
"""
import inspect

import torch
import triton.testing

from kernels.mhc.rmsnorm_project import weight_grad


def main():
    print(torch.cuda.get_device_name(), torch.__version__)
    new = "inv_rms" in inspect.signature(weight_grad).parameters
    T, K, D = 65536, 4 * 2560, 32
    for dtype in (torch.bfloat16, torch.float16):
        gen = torch.Generator(device="cuda").manual_seed(0)
        x = torch.randn(T, K, device="cuda", generator=gen).to(dtype)
        gy = torch.randn(T, D, device="cuda", generator=gen) * 3
        r = torch.rand(T, device="cuda", generator=gen) + 0.5
        if new:
            fn = lambda: weight_grad(gy, r, x, torch.float32)                       # noqa: E731
        else:
            fn = lambda: weight_grad(gy * r[:, None], x).to(torch.float32)         # noqa: E731
        scaled = gy.double() * r.double()[:, None]
        want = scaled.T @ x.double()
        bound = scaled.abs().T @ x.double().abs()
        ms = triton.testing.do_bench(fn, warmup=25, rep=200)
        err = ((fn().double() - want).abs() / bound).max().item()
        gemm = triton.testing.do_bench(lambda: torch.mm(x.T[:3 * D if dtype == torch.bfloat16 else 2 * D],
                                                        x, out_dtype=torch.float32), warmup=25, rep=200)
        print(f"{dtype} T={T} K={K} D={D} {'session 13' if new else 'session 12'} weight_grad: {ms * 1e3:7.1f} us "
              f"(a GEMM of the same shape alone {gemm * 1e3:7.1f} us), max error / sum|terms| {err:.2e}", flush=True)


if __name__ == "__main__":
    main()
