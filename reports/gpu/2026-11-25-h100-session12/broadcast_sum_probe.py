"""Does Triton sum a row held as a broadcast [X, 1] value in order, or one thread per row?

  python reports/gpu/2026-11-25-h100-session12/broadcast_sum_probe.py

Each kernel sums RNUMEL copies of one value per row, in the shape tritondiff's persistent reduction
emits for an input expanded (stride 0) along the reduced dim: a [XBLOCK, 1] load, tl.where with the
row mask, tl.sum.  Variants differ only in how the per-row value reaches [XBLOCK, RBLOCK].  A fully
sequential fp32 sum of N copies is hundreds of ulp off; a tree is within a few.  Also prints the
reduce's layout from the TTGIR and the kernel's time.
"""
import re
import sys

import torch
import triton
import triton.language as tl


@triton.jit
def row_sum(x_ptr, out_ptr, rnumel, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr, VARIANT: tl.constexpr):
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    rbase = tl.arange(0, RBLOCK)[None, :]
    rmask = rbase < rnumel
    if VARIANT == 0:      # as generated: a [XBLOCK, 1] load, broadcast by tl.where
        v = tl.load(x_ptr + xindex)
    elif VARIANT == 1:    # the load's index spans the block: [XBLOCK, RBLOCK] loads of one address per row
        v = tl.load(x_ptr + xindex + 0 * rbase)
    elif VARIANT == 2:    # [XBLOCK, 1] load, then added to a zero block built from rbase
        v = tl.load(x_ptr + xindex) + tl.zeros_like(rbase).to(tl.float32)
    else:                 # [XBLOCK, 1] load, explicit tl.broadcast_to
        v = tl.broadcast_to(tl.load(x_ptr + xindex), [XBLOCK, RBLOCK])
    t = tl.where(rmask, v, 0.0)
    tl.store(out_ptr + xindex, tl.sum(t, 1)[:, None])


def main():
    dev = "cuda"
    print(f"triton {triton.__version__}, torch {torch.__version__}, {torch.cuda.get_device_name()}")
    for m, xblock, n, rblock, warps in ((1, 1, 4093, 4096, 8), (64, 1, 4093, 4096, 8), (64, 2, 4093, 4096, 8),
                                        (64, 8, 1021, 1024, 8), (64, 32, 125, 128, 4)):
        vals = (torch.rand(m, 1, device=dev) + 0.1).float()
        truth = vals.double() * n
        for variant in range(4):
            out = torch.empty(m, 1, device=dev)
            k = row_sum[(m // xblock,)](vals, out, n, XBLOCK=xblock, RBLOCK=rblock, VARIANT=variant, num_warps=warps)
            ulp = (out.double() - truth).abs() / (torch.finfo(torch.float32).eps * truth.abs())
            ttgir = k.asm["ttgir"]
            red = [l for l in ttgir.splitlines() if '"tt.reduce"' in l or "tt.reduce" in l][:1]
            enc = re.findall(r"#blocked\d*|#linear\d*|#slice<[^>]*>", red[0]) if red else []
            layouts = {name: body for name, body in re.findall(r"^(#\w+) = (.*)$", ttgir, re.M)}
            ms = triton.testing.do_bench(lambda: row_sum[(m // xblock,)](vals, out, n, XBLOCK=xblock, RBLOCK=rblock,
                                                                         VARIANT=variant, num_warps=warps), rep=50)
            print(f"M {m:3d} XBLOCK {xblock:2d} N {n} warps {warps} variant {variant}: max {float(ulp.max()):6.1f} ulp, "
                  f"{ms * 1e3:7.2f} us, regs {k.n_regs} spills {k.n_spills}; reduce over "
                  f"{[layouts.get(e, e) for e in enc][:1]}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
