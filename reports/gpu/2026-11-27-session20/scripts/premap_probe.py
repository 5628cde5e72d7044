"""Session 20 probe: mHC pre_map (T=65536, C=2560, bf16; out[t, :] = sum_j h[t, j] * x[t, j, :]) sits at
0.999-1.000x of Inductor.  Hand-written forms of the compiler's kernel, timed in interleaved rounds beside
the compiler's and Inductor's compiled pre_map:

- ``gen``: the compiler's kernel as it emits it (1-D, XBLOCK=1024, 4 warps, div/mod by C, the prelude's
  integer bf16 conversions);
- ``native``: the same with Triton's own bf16 conversions (``.to``);
- ``tile RxB wW``: 2-D tiles of R rows x B columns (no div/mod; h loaded once per row), native conversions.

    PYTHONPATH=. python reports/gpu/2026-11-27-session20/scripts/premap_probe.py [ROUNDS]
"""
import sys

import torch

from compiler import workloads
from compiler.codegen.prelude import PRELUDE
from compiler.runtime import load_module
from kernels.benchmarks import _timing

HEAD = "import triton\nimport triton.language as tl\n" + PRELUDE

FLAT = """

@triton.jit
def pre_map(H, X, OUT, C: tl.constexpr, XBLOCK: tl.constexpr):
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    t = xindex // C
    c = xindex % C
    acc = tl.load(H + 4 * t) * CVT_IN(tl.load(X + 4 * C * t + c))
    acc += tl.load(H + 4 * t + 1) * CVT_IN(tl.load(X + 4 * C * t + C + c))
    acc += tl.load(H + 4 * t + 2) * CVT_IN(tl.load(X + 4 * C * t + 2 * C + c))
    acc += tl.load(H + 4 * t + 3) * CVT_IN(tl.load(X + 4 * C * t + 3 * C + c))
    tl.store(OUT + xindex, CVT_OUT(acc))
"""

TILE = """

@triton.jit
def pre_map(H, X, OUT, C: tl.constexpr, R: tl.constexpr, B: tl.constexpr):
    t = tl.program_id(0) * R + tl.arange(0, R)[:, None]
    c = tl.program_id(1) * B + tl.arange(0, B)[None, :]
    acc = tl.load(H + 4 * t) * tl.load(X + 4 * C * t + c).to(tl.float32)
    acc += tl.load(H + 4 * t + 1) * tl.load(X + 4 * C * t + C + c).to(tl.float32)
    acc += tl.load(H + 4 * t + 2) * tl.load(X + 4 * C * t + 2 * C + c).to(tl.float32)
    acc += tl.load(H + 4 * t + 3) * tl.load(X + 4 * C * t + 3 * C + c).to(tl.float32)
    tl.store(OUT + C * t + c, acc.to(tl.bfloat16))
"""


def main(rounds: int) -> None:
    import compiler
    T, C = 65536, 2560
    x = torch.randn(T, 4, C, device="cuda", dtype=torch.bfloat16)
    h = torch.rand(T, 4, device="cuda")
    out = torch.empty(T, C, device="cuda", dtype=torch.bfloat16)
    ref = workloads.mhc_pre_map(x, h)
    gen = load_module(HEAD + FLAT.replace("CVT_IN", "_td_bf16_to_f32").replace("CVT_OUT", "_td_to_bf16"),
                      "premap_gen")[0].pre_map
    native = load_module(HEAD + FLAT.replace("CVT_IN(", "(").replace("CVT_OUT(acc)", "acc.to(tl.bfloat16)"),
                         "premap_native")[0].pre_map
    tile = load_module(HEAD + TILE, "premap_tile")[0].pre_map
    cases = {
        "gen": lambda: gen[(T * C // 1024,)](h, x, out, C=C, XBLOCK=1024, num_warps=4),
        "native": lambda: native[(T * C // 1024,)](h, x, out, C=C, XBLOCK=1024, num_warps=4),
        "native 2048 w8": lambda: native[(T * C // 2048,)](h, x, out, C=C, XBLOCK=2048, num_warps=8),
    }
    for r, b, w in ((1, 512, 4), (2, 512, 4), (4, 512, 4), (4, 512, 8), (8, 512, 8), (1, 2560 // 5, 2)):
        if C % b:
            continue
        cases[f"tile {r}x{b} w{w}"] = (lambda r=r, b=b, w=w:
                                       tile[(T // r, C // b)](h, x, out, C=C, R=r, B=b, num_warps=w))
    verdict = {}
    for k, fn in cases.items():
        out.zero_()
        fn()
        torch.cuda.synchronize()
        verdict[k] = "ok" if torch.equal(out, ref) else f"differs ({(out.float() - ref.float()).abs().max().item():.3g})"
    ours = compiler.compile_fresh(workloads.mhc_pre_map)
    inductor = torch.compile(workloads.mhc_pre_map)
    verdict["compiler"] = "ok" if torch.equal(ours(x, h), ref) else "differs"
    verdict["inductor"] = "ok" if torch.equal(inductor(x, h), ref) else "differs"
    cases["compiler"] = lambda: ours(x, h)
    cases["inductor"] = lambda: inductor(x, h)
    copy = _timing.copy_bandwidth_gbps()
    _timing.print_header("mHC pre_map T=65536 C=2560 bf16: kernel forms")
    times = _timing.interleaved_us(cases, rounds)
    nbytes = T * 4 * C * 2 + T * 4 * 4 + T * C * 2
    print(_timing.interleaved_report(times, base="inductor", nbytes=nbytes, copy_gbps=copy, checks=verdict, digits=1,
                                     check_header="bit-equal to eager"))


if __name__ == "__main__":
    if _timing.require_gpu("premap_probe"):
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 7)
