"""mHC rmsnorm_project's dW = (g r)^T @ x on the GPU: the old GEMM on g r rounded to x's dtype against
kernels.mhc.rmsnorm_project.weight_grad (16-bit parts, float32 out), time and error.

  python reports/gpu/2026-11-25-h100-session12/weight_grad_probe.py
"""
import torch
import triton.testing

from kernels.mhc.rmsnorm_project import weight_grad


def main():
    print(torch.cuda.get_device_name(), torch.__version__)
    for dtype in (torch.bfloat16, torch.float16):
        T, K, D = 65536, 4 * 2560, 32
        gen = torch.Generator(device="cuda").manual_seed(0)
        x = torch.randn(T, K, device="cuda", generator=gen).to(dtype)
        scaled = torch.randn(T, D, device="cuda", generator=gen) * 3
        old = lambda: (scaled.to(dtype).T @ x).float()                 # noqa: E731
        new = lambda: weight_grad(scaled, x)                           # noqa: E731
        want = scaled.double().T @ x.double()
        bound = (scaled.double().abs().T @ x.double().abs())
        for name, fn in (("rounded g r (old)", old), ("16-bit parts (new)", new)):
            ms = triton.testing.do_bench(fn, warmup=25, rep=200)
            err = ((fn().double() - want).abs() / bound).max().item()
            print(f"{dtype} T={T} K={K} D={D} {name}: {ms * 1e3:8.1f} us, "
                  f"{x.numel() * x.element_size() / ms / 1e6:6.0f} GB/s of x, max error / sum|terms| {err:.2e}")


if __name__ == "__main__":
    main()
