"""Session 20 probe: does the NaN flag reduction of a float max cost softmax 8192x8192 its last 0.2%?

The compiler's float max is two block reductions: ``tl.max`` of the values and ``tl.max`` of an isnan
flag (the NaN wins, as in eager).  Inductor's is one (``tl.reduce`` with a NaN-propagating maximum).
This times softmax rows (XBLOCK=1, RBLOCK=8192, 16 warps, as the compiler emits them) with the max as:

- ``flags``: the compiler's form today (max, then the isnan flag's max);
- ``key``: one integer max over an order-preserving int32 key of the value, NaN made the largest key
  (``where(v != v, nan, v)``, bits ^ ((bits >> 31) & 0x7fffffff)), mapped back after;
- ``prop``: ``tl.reduce`` with ``tl.maximum(a, b, propagate_nan=ALL)``, Inductor's form;
- ``none``: ``tl.max`` alone, NaN not propagated (a lower bound, not a candidate);

beside the compiler's compiled softmax and Inductor's, in interleaved rounds.  Each variant is checked
against torch.softmax on rows holding NaN, +-inf and -0.0 first.

    PYTHONPATH=. python reports/gpu/2026-11-27-session20/scripts/nan_max_probe.py [ROUNDS]
"""
import sys

import torch

from compiler.runtime import load_module
from kernels.benchmarks import _timing

HEAD = """import triton
import triton.language as tl


@triton.jit
def _max_nan(a, b):
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def softmax(X, Y, N: tl.constexpr, RBLOCK: tl.constexpr):
    row = tl.program_id(0)
    r = tl.arange(0, RBLOCK)[None, :]
    m = r < N
    x = tl.load(X + row * N + r, m, other=float('-inf'))
"""

MAX = {
    "flags": """    mx = tl.max(x, 1)[:, None]
    has_nan = tl.max((x != x).to(tl.int32), 1)[:, None] > 0
    mx = tl.where(has_nan, float('nan'), mx)
""",
    "key": """    c = tl.where(x != x, float('nan'), x)
    bits = c.to(tl.int32, bitcast=True)
    key = bits ^ ((bits >> 31) & 0x7FFFFFFF)
    kmax = tl.max(key, 1)[:, None]
    mx = (kmax ^ ((kmax >> 31) & 0x7FFFFFFF)).to(tl.float32, bitcast=True)
""",
    "prop": """    mx = tl.reduce(x, 1, _max_nan)[:, None]
""",
    "none": """    mx = tl.max(x, 1)[:, None]
""",
}

TAIL = """    e = tl.exp(x - mx)
    s = tl.sum(tl.where(m, e, 0.0), 1)[:, None]
    tl.store(Y + row * N + r, e / s, m)
"""


def kernels():
    return {name: load_module(HEAD + body + TAIL, f"nan_max_{name}")[0].softmax for name, body in MAX.items()}


def check(fns) -> dict:
    import triton
    x = torch.randn(8, 8192, device="cuda")
    x[1, 17] = float("nan")
    x[2, 100] = float("inf")
    x[3, :] = float("-inf")
    x[4, 5] = float("nan"); x[4, 6] = float("inf")
    x[5, :] = -0.0
    x[6, 4000] = -torch.tensor(float("nan"))          # a NaN with the sign bit set
    ref = torch.softmax(x, 1)
    out = {}
    for name, fn in fns.items():
        y = torch.empty_like(x)
        fn[(8,)](x, y, N=8192, RBLOCK=triton.next_power_of_2(8192), num_warps=16)
        ok = torch.allclose(y, ref, rtol=1e-5, atol=1e-7, equal_nan=True)
        out[name] = "ok" if ok else f"WRONG rows {[(i) for i in range(8) if not torch.allclose(y[i], ref[i], 1e-5, 1e-7, equal_nan=True)]}"
    return out


def main(rounds: int) -> None:
    import compiler
    fns = kernels()
    verdict = check(fns)
    m = n = 8192
    x = torch.randn(m, n, device="cuda")
    y = torch.empty_like(x)
    ours = compiler.compile_fresh(lambda t: torch.softmax(t, -1))
    inductor = torch.compile(lambda t: torch.softmax(t, -1))
    ref = torch.softmax(x, -1)
    assert torch.allclose(ours(x), ref, 1e-5, 1e-7) and torch.allclose(inductor(x), ref, 1e-5, 1e-7)
    cases = {f"hand {k}": (lambda f=f: f[(m,)](x, y, N=n, RBLOCK=n, num_warps=16)) for k, f in fns.items()}
    cases["compiler"] = lambda: ours(x)
    cases["inductor"] = lambda: inductor(x)
    copy = _timing.copy_bandwidth_gbps()
    _timing.print_header("softmax 8192x8192 fp32: the float max's NaN handling")
    times = _timing.interleaved_us(cases, rounds)
    nbytes = 2 * m * n * 4
    checks = {f"hand {k}": v for k, v in verdict.items()}
    print(_timing.interleaved_report(times, base="inductor", nbytes=nbytes, copy_gbps=copy, checks=checks))
    for k, f in fns.items():
        print(f"{k}: {_timing.registers(f)}")


if __name__ == "__main__":
    if _timing.require_gpu("nan_max_probe"):
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 7)
