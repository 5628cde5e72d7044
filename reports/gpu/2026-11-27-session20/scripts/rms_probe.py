"""Session 20 probe: rms_norm 8192x8192 fp32 on the H200 is 1.5% behind Inductor with the compiler's persistent
kernel (x held in registers across the row's sum, then w loaded), and level with it in Inductor's form (a
looped kernel of one 8192-element step per pass: x read again in the second pass beside w; call 5).  Which
part matters?  Hand-written forms, 16 warps, interleaved rounds beside the compiler's and Inductor's:

- ``persistent``: the compiler's kernel (w loaded after the sum);
- ``persistent w first``: w loaded beside x, before the sum;
- ``reread``: Inductor's form, x loaded again (evict_last, then evict_first) beside w after the sum;

    PYTHONPATH=. python reports/gpu/2026-11-27-session20/scripts/rms_probe.py [ROUNDS]
"""
import sys

import torch

from compiler import workloads
from compiler.runtime import load_module
from kernels.benchmarks import _timing

SRC = """import triton
import triton.language as tl


@triton.jit
def persistent(X, W, Y, N: tl.constexpr):
    r = tl.arange(0, N)[None, :]
    row = tl.program_id(0)
    x = tl.load(X + row * N + r)
    s = tl.sum(x * x, 1)[:, None]
    rs = tl.rsqrt(s / N + 1e-6)
    w = tl.load(W + r)
    tl.store(Y + row * N + r, x * rs * w)


@triton.jit
def persistent_w_first(X, W, Y, N: tl.constexpr):
    r = tl.arange(0, N)[None, :]
    row = tl.program_id(0)
    x = tl.load(X + row * N + r)
    w = tl.load(W + r)
    s = tl.sum(x * x, 1)[:, None]
    rs = tl.rsqrt(s / N + 1e-6)
    tl.store(Y + row * N + r, x * rs * w)


@triton.jit
def reread(X, W, Y, N: tl.constexpr):
    r = tl.arange(0, N)[None, :]
    row = tl.program_id(0)
    x = tl.load(X + row * N + r, eviction_policy='evict_last')
    s = tl.sum(x * x, 1)[:, None]
    rs = tl.rsqrt(s / N + 1e-6)
    x2 = tl.load(X + row * N + r, eviction_policy='evict_first')
    w = tl.load(W + r, eviction_policy='evict_last')
    tl.store(Y + row * N + r, x2 * rs * w)


@triton.jit
def reread_nohint(X, W, Y, N: tl.constexpr):
    r = tl.arange(0, N)[None, :]
    row = tl.program_id(0)
    x = tl.load(X + row * N + r)
    s = tl.sum(x * x, 1)[:, None]
    rs = tl.rsqrt(s / N + 1e-6)
    x2 = tl.load(X + row * N + r)
    w = tl.load(W + r)
    tl.store(Y + row * N + r, x2 * rs * w)
"""

NAMES = ("persistent", "persistent_w_first", "reread", "reread_nohint")


def main(rounds: int) -> None:
    import compiler
    mod = load_module(SRC, "rms_probe")[0]
    m = n = 8192
    x = torch.randn(m, n, device="cuda")
    w = torch.randn(n, device="cuda")
    y = torch.empty_like(x)
    ref = workloads.rms_norm(x, w)
    cases, verdict = {}, {}
    for name in NAMES:
        fn = getattr(mod, name)
        cases[name] = lambda fn=fn: fn[(m,)](x, w, y, N=n, num_warps=16)
        y.zero_()
        cases[name]()
        torch.cuda.synchronize()
        verdict[name] = "ok" if torch.allclose(y, ref, 1e-5, 1e-6) else "WRONG"
    ours = compiler.compile_fresh(workloads.rms_norm)
    inductor = torch.compile(workloads.rms_norm)
    for name, f in (("compiler", ours), ("inductor", inductor)):
        verdict[name] = "ok" if torch.allclose(f(x, w), ref, 1e-5, 1e-6) else "WRONG"
        cases[name] = lambda f=f: f(x, w)
    copy = _timing.copy_bandwidth_gbps()
    _timing.print_header("rms_norm 8192x8192 fp32: where the weight load goes")
    times = _timing.interleaved_us(cases, rounds)
    nbytes = 2 * m * n * 4 + n * 4
    print(_timing.interleaved_report(times, base="inductor", nbytes=nbytes, copy_gbps=copy, checks=verdict))
    for name in NAMES:
        print(f"{name}: {_timing.registers(getattr(mod, name))}")


if __name__ == "__main__":
    if _timing.require_gpu("rms_probe"):
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 7)
