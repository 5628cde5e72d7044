"""Ways to run weight_grad's GEMM over 16-bit parts with a float32 result, timed on the GPU.

  python reports/gpu/2026-11-25-h100-session12/weight_grad_variants.py [--breakdown]
"""
import torch
import triton.testing


def main():
    print(torch.cuda.get_device_name(), torch.__version__)
    T, K, D = 65536, 4 * 2560, 32
    for dtype, parts in ((torch.bfloat16, 3), (torch.float16, 2)):
        x = torch.randn(T, K, device="cuda").to(dtype)
        ps = [torch.randn(T, D, device="cuda").to(dtype) for _ in range(parts)]
        s = torch.cat(ps, 1)
        st = s.T.contiguous()
        variants = {
            "old: one part, 16-bit result": lambda: ps[0].T @ x,
            "cat, .T, mm out_dtype": lambda: torch.mm(s.T, x, out_dtype=torch.float32),
            "cat, .T contiguous, mm out_dtype": lambda: torch.mm(st, x, out_dtype=torch.float32),
            "x.T @ cat, out_dtype": lambda: torch.mm(x.T, s, out_dtype=torch.float32),
            "per part mm out_dtype": lambda: sum(torch.mm(p.T, x, out_dtype=torch.float32) for p in ps),
            "upcast in chunks of 8192 rows": lambda: sum(torch.mm(s[i:i + 8192].T.float(), x[i:i + 8192].float())
                                                        for i in range(0, T, 8192)),
        }
        for name, fn in variants.items():
            ms = triton.testing.do_bench(fn, warmup=25, rep=200)
            print(f"{dtype} parts={parts} {name}: {ms * 1e3:8.1f} us", flush=True)


if __name__ == "__main__" and __import__("sys").argv[1:] != ["--breakdown"]:
    main()


def breakdown():
    """weight_grad's steps one by one (bf16, fp16), each timed alone."""
    T, K, D = 65536, 4 * 2560, 32
    for dtype, n in ((torch.bfloat16, 3), (torch.float16, 2)):
        x = torch.randn(T, K, device="cuda").to(dtype)
        scaled = torch.randn(T, D, device="cuda") * 3
        finite = torch.where(torch.isfinite(scaled), scaled.abs(), 0.0)
        shift = (14 - torch.frexp(finite.amax(0))[1]).clamp(-126, 127)
        rest = torch.ldexp(scaled, shift)
        parts = []
        for _ in range(n):
            part = rest.to(dtype)
            parts.append(part)
            rest = torch.where(torch.isfinite(part), rest - part.float(), 0.0)
        stacked = torch.cat(parts, 1)
        out = torch.mm(stacked.T, x, out_dtype=torch.float32).view(n, -1, K)
        steps = {
            "finite": lambda: torch.where(torch.isfinite(scaled), scaled.abs(), 0.0),
            "shift": lambda: (14 - torch.frexp(finite.amax(0))[1]).clamp(-126, 127),
            "ldexp scaled": lambda: torch.ldexp(scaled, shift),
            "one part": lambda: torch.where(torch.isfinite(rest.to(dtype)), rest - rest.to(dtype).float(), 0.0),
            "cat": lambda: torch.cat(parts, 1),
            "mm": lambda: torch.mm(stacked.T, x, out_dtype=torch.float32),
            "sum parts": lambda: out[0] + (out[1] + out[-1]),
            "ldexp result": lambda: torch.ldexp(out[0], -shift[:, None]),
        }
        for name, fn in steps.items():
            print(f"{dtype} {name}: {triton.testing.do_bench(fn, warmup=25, rep=100) * 1e3:8.1f} us", flush=True)


if __name__ == "__main__" and __import__("sys").argv[1:] == ["--breakdown"]:
    breakdown()
