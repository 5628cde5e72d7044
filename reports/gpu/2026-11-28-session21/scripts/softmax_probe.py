"""Session 21 probe: where could softmax 8192x8192 fp32 find the last 0.2% it trails Inductor by on an H100?

Both compilers run it at copy bandwidth.  This times hand-written forms of the compiler's kernel (one row per
program, RBLOCK 8192, the float max as max + isnan flag) that change one thing each:

- ``w4`` / ``w8`` / ``w16`` / ``w32``: warps per program (the compiler emits 16);
- ``x2``: two rows per program (XBLOCK 2, 16 warps);
- ``grid k``: a persistent grid of k programs per SM, each looping over rows ``pid, pid + G, ...``;
- ``hints``: the load hinted ``evict_first`` and the store ``.cs`` (streaming);
- ``recip``: ``e * (1 / s)`` instead of ``e / s`` (not bit-exact; a lower bound on the division's cost);

beside the compiler's compiled softmax and Inductor's, in interleaved rounds.  Each form is checked against
torch.softmax first (rows with NaN, +-inf included).

    PYTHONPATH=. python reports/gpu/2026-11-28-session21/scripts/softmax_probe.py [ROUNDS]
"""
import sys

import torch

from compiler.runtime import load_module
from kernels.benchmarks import _timing

SRC = """import triton
import triton.language as tl


@triton.jit
def _row(X, Y, row, M, N: tl.constexpr, XB: tl.constexpr, RBLOCK: tl.constexpr, HINTS: tl.constexpr,
         RECIP: tl.constexpr):
    rows = row + tl.arange(0, XB)[:, None]
    r = tl.arange(0, RBLOCK)[None, :]
    m = (r < N) & (rows < M)
    if HINTS:
        x = tl.load(X + rows * N + r, m, other=float('-inf'), eviction_policy='evict_first')
    else:
        x = tl.load(X + rows * N + r, m, other=float('-inf'))
    mx = tl.max(x, 1)[:, None]
    has_nan = tl.max((x != x).to(tl.int32), 1)[:, None] > 0
    mx = tl.where(has_nan, float('nan'), mx)
    e = tl.exp(x - mx)
    s = tl.sum(tl.where(m, e, 0.0), 1)[:, None]
    if RECIP:
        y = e * (1.0 / s)
    else:
        y = e / s
    if HINTS:
        tl.store(Y + rows * N + r, y, m, cache_modifier='.cs')
    else:
        tl.store(Y + rows * N + r, y, m)


@triton.jit
def softmax(X, Y, M, N: tl.constexpr, XB: tl.constexpr, RBLOCK: tl.constexpr, HINTS: tl.constexpr,
            RECIP: tl.constexpr, GRID_STRIDE: tl.constexpr):
    if GRID_STRIDE:
        for row in range(tl.program_id(0), M, tl.num_programs(0)):
            _row(X, Y, row, M, N, 1, RBLOCK, HINTS, RECIP)
    else:
        _row(X, Y, tl.program_id(0) * XB, M, N, XB, RBLOCK, HINTS, RECIP)
"""


def forms(sms: int) -> dict:
    """name -> (grid(M), launch keyword arguments)"""
    base = dict(XB=1, HINTS=False, RECIP=False, GRID_STRIDE=False, num_warps=16)
    out = {f"w{w}": (lambda m: (m,), {**base, "num_warps": w}) for w in (4, 8, 16, 32)}
    out["x2"] = (lambda m: (-(-m // 2),), {**base, "XB": 2})
    for k in (2, 4):
        out[f"grid {k}"] = (lambda m, k=k: (min(m, sms * k),), {**base, "GRID_STRIDE": True})
    out["hints"] = (lambda m: (m,), {**base, "HINTS": True})
    out["recip"] = (lambda m: (m,), {**base, "RECIP": True})
    return out


def main(rounds: int) -> None:
    import compiler
    fn = load_module(SRC, "softmax_probe")[0].softmax
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    variants = forms(sms)
    x = torch.randn(8, 8192, device="cuda")
    x[1, 17] = float("nan"); x[2, 100] = float("inf"); x[3, :] = float("-inf"); x[5, :] = -0.0
    ref = torch.softmax(x, 1)
    verdict = {}
    for name, (grid, kw) in variants.items():
        y = torch.empty_like(x)
        fn[grid(8)](x, y, 8, N=8192, RBLOCK=8192, **kw)
        verdict[name] = "ok" if torch.allclose(y, ref, 1e-5, 1e-7, equal_nan=True) else "WRONG"
    m = n = 8192
    x = torch.randn(m, n, device="cuda")
    y = torch.empty_like(x)
    ours = compiler.compile_fresh(lambda t: torch.softmax(t, -1))
    inductor = torch.compile(lambda t: torch.softmax(t, -1))
    ref = torch.softmax(x, -1)
    assert torch.allclose(ours(x), ref, 1e-5, 1e-7) and torch.allclose(inductor(x), ref, 1e-5, 1e-7)
    cases = {f"hand {k}": (lambda g=g, kw=kw: fn[g(m)](x, y, m, N=n, RBLOCK=n, **kw)) for k, (g, kw) in variants.items()}
    cases["compiler"] = lambda: ours(x)
    cases["inductor"] = lambda: inductor(x)
    copy = _timing.copy_bandwidth_gbps()
    _timing.print_header("softmax 8192x8192 fp32: hand-written forms of the compiler's kernel")
    times = _timing.interleaved_us(cases, rounds)
    nbytes = 2 * m * n * 4
    checks = {f"hand {k}": v for k, v in verdict.items()}
    print(_timing.interleaved_report(times, base="inductor", nbytes=nbytes, copy_gbps=copy, checks=checks))
    print("registers:", _timing.registers(fn))


if __name__ == "__main__":
    if _timing.require_gpu("softmax_probe"):
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 7)
