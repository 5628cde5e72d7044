"""Time hand-written shapes of layer norm backward's mixed-order partial kernel (4096 x 10240 fp16).

Issue #8: the compiler's mixed-order kernel (dx per row, dW / dB per column, one pass over x and dy)
reads at about half of copy bandwidth there.  Its tile is one whole row padded to a power of two
(16384 lanes for 10240 columns), so each thread holds 2 x 32 column accumulators plus the row's x, dy
and w: 128 registers and spills at 16 warps; two programs per SM do not fit and run as two waves.

This probe writes the kernel in other shapes, checks each against PyTorch, and prints its GPU time:

- ``whole``: the compiler's shape (one padded block per row, values reused from registers);
- ``chunked``: the row in ``NCH`` static chunks of ``CH`` columns (10240 = 5 x 2048: no padding),
  two sweeps per row -- the row sums over the chunks into lane accumulators, then dx and the column
  terms chunk by chunk, re-reading x, dy and w (from L1 / L2) -- and one pair of column accumulators
  per chunk, so registers hold 2 x 10240 / threads accumulators and one chunk of inputs;

- ``grouped``: ``G`` rows at a time over ``CH``-column chunks, two sweeps per group (the row sums, then
  dx and the column terms, re-reading the group's x and dy from L2), the column sums added into the
  program's own row of DWP / DBP in memory (L2-resident) instead of registers -- few registers, so
  several programs fit an SM and more loads are in flight;

- ``sliced S``: ``S`` programs share a band of rows, each owning ``1 / S`` of the columns: each reads the
  whole row for its sums (the row's other readers find it in L2), then computes dx and the column terms of
  its own columns only, so it holds ``1 / S`` of the column accumulators and several programs fit an SM
  (``held``: its own columns' values kept in registers from the first sweep; ``reread``: loaded again);

- ``held``: the row in static chunks whose values stay in registers (one sweep, no padding), with
  ``prefetch`` the next row's x and dy loaded at the top of each step (in flight through the row's
  reductions), with ``w-out`` the weight loaded once above the row loop: the shape the compiler took in
  session 22 (75.0 us against 91.4 for ``whole`` on an H200);

at several warps, programs per SM, register caps (``maxnreg``) and pipeline stages of the row loop.
``python -m kernels.benchmarks.mixed_order_probe [--rows M --cols N] [--cases session9|session21|session22]``;
without a GPU it says so and exits 0.
"""
from __future__ import annotations

import sys

import torch

from kernels.benchmarks import _timing

# Every shape's kernel takes the same arguments (``main`` launches them alike).
_HEADER = [
    "import triton", "import triton.language as tl", "",
    "@triton.jit",
    "def partial(X, DY, W, MEAN, RSTD, DX, DWP, DBP, M, ROWS: tl.constexpr, N: tl.constexpr, CH: tl.constexpr):",
    "    pid = tl.program_id(0)",
]


def source(n: int, ch: int, whole: bool, stages: int = 1) -> str:
    """The partial kernel's Triton source: ``whole`` one padded block per row, else ceil(n / ch) chunks;
    ``stages`` > 1 software-pipelines the row loop (``tl.range(..., num_stages=stages)``)."""
    nch = 1 if whole else -(-n // ch)
    lines = _HEADER + [
        "    r = tl.arange(0, CH)[None, :]",
    ]
    for c in range(nch):
        lines += [f"    dw{c} = tl.zeros([1, CH], tl.float32)", f"    db{c} = tl.zeros([1, CH], tl.float32)"]
    lines += [
        f"    for step in tl.range(0, ROWS, num_stages={stages}):" if stages > 1 else "    for step in range(0, ROWS):",
        "        row = pid * ROWS + step",
        "        ok = row < M",
        "        mean = tl.load(MEAN + row, ok, other=0.0)",
        "        rstd = tl.load(RSTD + row, ok, other=0.0)",
        "        s1 = tl.zeros([1, CH], tl.float32)",
        "        s2 = tl.zeros([1, CH], tl.float32)",
    ]

    def loads(c: int, policy: str) -> list[str]:
        return [
            f"        cols = {c * ch} + r",
            "        m = (cols < N) & (row + 0 * cols < M)",
            f"        x = tl.load(X + row * N + cols, m, other=0.0, eviction_policy='{policy}').to(tl.float32)",
            f"        dy = tl.load(DY + row * N + cols, m, other=0.0, eviction_policy='{policy}').to(tl.float32)",
            "        w = tl.load(W + cols, cols < N, other=0.0, eviction_policy='evict_last').to(tl.float32)",
            "        xhat = (x - mean) * rstd",
            "        wdy = w * dy",
        ]

    def column_part(c: int) -> list[str]:
        return [
            "        dx = (wdy - (xhat * c1 + c2)) * rstd",
            "        tl.store(DX + row * N + cols, dx.to(DX.dtype.element_ty), m)",
            f"        dw{c} += tl.where(m, dy * xhat, 0.0)",
            f"        db{c} += tl.where(m, dy, 0.0)",
        ]

    for c in range(nch):
        lines += loads(c, "evict_last" if not whole else "evict_first")
        lines += ["        s1 += tl.where(m, xhat * wdy, 0.0)", "        s2 += tl.where(m, wdy, 0.0)"]
    lines += ["        c1 = tl.sum(s1, 1)[:, None] / N", "        c2 = tl.sum(s2, 1)[:, None] / N"]
    for c in range(nch):
        if not whole:
            lines += loads(c, "evict_first")
        lines += column_part(c)
    for c in range(nch):
        lines += [f"    cols = {c * ch} + r",
                  f"    tl.store(DWP + pid * N + cols, dw{c}, cols < N)",
                  f"    tl.store(DBP + pid * N + cols, db{c}, cols < N)"]
    return "\n".join(lines) + "\n"


def grouped_source(group: int) -> str:
    """The partial kernel with ``group`` rows per step and its column sums kept in DWP / DBP (same
    arguments as ``source``'s kernel): program ``pid`` owns rows [pid * ROWS, (pid + 1) * ROWS)."""
    return f"""import triton
import triton.language as tl


@triton.jit
def _chunk(X, DY, W, row, cols, m, mean, rstd, N: tl.constexpr, POLICY: tl.constexpr):
    # xhat, dy and w (fp32) of one chunk of the group's rows
    x = tl.load(X + row * N + cols, m, other=0.0, eviction_policy=POLICY).to(tl.float32)
    dy = tl.load(DY + row * N + cols, m, other=0.0, eviction_policy=POLICY).to(tl.float32)
    w = tl.load(W + cols, cols < N, other=0.0, eviction_policy='evict_last').to(tl.float32)
    return (x - mean) * rstd, dy, w


@triton.jit
def partial(X, DY, W, MEAN, RSTD, DX, DWP, DBP, M, ROWS: tl.constexpr, N: tl.constexpr, CH: tl.constexpr):
    pid = tl.program_id(0)
    first = pid * ROWS
    end = tl.minimum(first + ROWS, M)
    g = tl.arange(0, {group})[:, None]
    r = tl.arange(0, CH)[None, :]
    lane = tl.arange(0, CH)
    for start in range(first, end, {group}):
        row = start + g
        ok = row < end
        mean = tl.load(MEAN + row, ok, other=0.0)
        rstd = tl.load(RSTD + row, ok, other=0.0)
        s1 = tl.zeros([{group}, CH], tl.float32)
        s2 = tl.zeros([{group}, CH], tl.float32)
        for c in range(0, N, CH):
            cols = c + r
            m = ok & (cols < N)
            xhat, dy, w = _chunk(X, DY, W, row, cols, m, mean, rstd, N, 'evict_last')   # read again below
            wdy = w * dy
            s1 += tl.where(m, xhat * wdy, 0.0)
            s2 += tl.where(m, wdy, 0.0)
        c1 = tl.sum(s1, 1)[:, None] / N
        c2 = tl.sum(s2, 1)[:, None] / N
        for c in range(0, N, CH):
            cols = c + r
            m = ok & (cols < N)
            xhat, dy, w = _chunk(X, DY, W, row, cols, m, mean, rstd, N, 'evict_first')
            dx = (w * dy - (xhat * c1 + c2)) * rstd
            tl.store(DX + row * N + cols, dx.to(DX.dtype.element_ty), m)
            pw = tl.sum(tl.where(m, dy * xhat, 0.0), 0)
            pb = tl.sum(tl.where(m, dy, 0.0), 0)
            col = c + lane
            cm = col < N
            if start != first:
                pw += tl.load(DWP + pid * N + col, cm, other=0.0)
                pb += tl.load(DBP + pid * N + col, cm, other=0.0)
            tl.store(DWP + pid * N + col, pw, cm)
            tl.store(DBP + pid * N + col, pb, cm)
"""


def sliced_source(n: int, ch: int, slices: int, held: bool) -> str:
    """The partial kernel with ``slices`` programs per band of rows (same arguments as ``source``'s kernel):
    program ``pid`` takes band ``pid // slices`` and owns columns ``[s * n / slices, (s + 1) * n / slices)``
    of it, ``s = pid % slices``; its partial row of DWP / DBP is the band's, in its own columns.  Needs
    ``n`` a multiple of ``ch * slices``."""
    if n % (ch * slices):
        raise ValueError(f"sliced shape: {n} columns are not a multiple of {slices} slices of {ch}-column chunks")
    own = n // ch // slices
    lines = _HEADER + [
        f"    band = pid // {slices}",
        f"    sl = pid % {slices}",
        "    r = tl.arange(0, CH)[None, :]",
    ]
    for j in range(own):
        lines += [f"    dw{j} = tl.zeros([1, CH], tl.float32)", f"    db{j} = tl.zeros([1, CH], tl.float32)"]
    lines += [
        "    for step in range(0, ROWS):",
        "        row = band * ROWS + step",
        "        mean = tl.load(MEAN + row, row < M, other=0.0)",
        "        rstd = tl.load(RSTD + row, row < M, other=0.0)",
        "        s1 = tl.zeros([1, CH], tl.float32)",
        "        s2 = tl.zeros([1, CH], tl.float32)",
    ]

    def loads(j: int, chunk: str, policy: str) -> list[str]:
        return [
            f"        cols{j} = ({chunk}) * CH + r",
            f"        m{j} = row + 0 * cols{j} < M",
            f"        x{j} = tl.load(X + row * N + cols{j}, m{j}, other=0.0, eviction_policy='{policy}').to(tl.float32)",
            f"        dy{j} = tl.load(DY + row * N + cols{j}, m{j}, other=0.0, eviction_policy='{policy}').to(tl.float32)",
            f"        w{j} = tl.load(W + cols{j}, eviction_policy='evict_last').to(tl.float32)",
            f"        xh{j} = (x{j} - mean) * rstd",
            f"        wdy{j} = w{j} * dy{j}",
        ]

    for j in range(own):                       # own columns first: held ones stay in registers
        lines += loads(j, f"sl * {own} + {j}", "evict_last")
        lines += [f"        s1 += xh{j} * wdy{j}", f"        s2 += wdy{j}"]
    for o in range(1, slices):
        for j in range(own):
            lines += loads(own + j, f"((sl + {o}) % {slices}) * {own} + {j}", "evict_last")
            lines += [f"        s1 += xh{own + j} * wdy{own + j}", f"        s2 += wdy{own + j}"]
    lines += ["        c1 = tl.sum(s1, 1)[:, None] / N", "        c2 = tl.sum(s2, 1)[:, None] / N"]
    for j in range(own):
        if not held:
            lines += loads(j, f"sl * {own} + {j}", "evict_first")
        lines += [
            f"        dx = (wdy{j} - (xh{j} * c1 + c2)) * rstd",
            f"        tl.store(DX + row * N + cols{j}, dx.to(DX.dtype.element_ty), m{j})",
            f"        dw{j} += tl.where(m{j}, dy{j} * xh{j}, 0.0)",
            f"        db{j} += tl.where(m{j}, dy{j}, 0.0)",
        ]
    for j in range(own):
        lines += [f"    cols = (sl * {own} + {j}) * CH + r",
                  f"    tl.store(DWP + band * N + cols, dw{j})",
                  f"    tl.store(DBP + band * N + cols, db{j})"]
    return "\n".join(lines) + "\n"


def held_source(n: int, ch: int, prefetch: bool, w_outside: bool) -> str:
    """The partial kernel with the row in ceil(n / ch) static chunks whose values stay in registers (one sweep,
    no padding when ``ch`` divides ``n``; same arguments as ``source``'s kernel).  ``prefetch``: each step
    loads the next row's x and dy before it reduces the current one (kept in registers across the step, so the
    loads are in flight through the row's reductions and stores); ``w_outside``: w loaded once above the row
    loop, else once per row."""
    nch = -(-n // ch)
    lines = _HEADER + [
        "    r = tl.arange(0, CH)[None, :]",
        "    first = pid * ROWS",
        "    end = tl.minimum(first + ROWS, M)",
    ]
    for c in range(nch):
        lines += [f"    cols{c} = {c * ch} + r", f"    cm{c} = cols{c} < N",
                  f"    dw{c} = tl.zeros([1, CH], tl.float32)", f"    db{c} = tl.zeros([1, CH], tl.float32)"]
        if w_outside:
            lines.append(f"    w{c} = tl.load(W + cols{c}, cm{c}, other=0.0).to(tl.float32)")

    def row_loads(prefix: str, row: str, indent: str) -> list[str]:     # rows at or past ``end`` read nothing
        return [ln for c in range(nch) for ln in (
            f"{indent}{prefix}x{c} = tl.load(X + {row} * N + cols{c}, cm{c} & ({row} + 0 * cols{c} < end), other=0.0)",
            f"{indent}{prefix}dy{c} = tl.load(DY + {row} * N + cols{c}, cm{c} & ({row} + 0 * cols{c} < end), other=0.0)")]

    if prefetch:
        lines += row_loads("n", "first", "    ")
    lines += ["    for step in range(0, ROWS):",
              "        row = first + step",
              "        ok = row < M"]
    if prefetch:
        lines += [f"        x{c}, dy{c} = nx{c}, ndy{c}" for c in range(nch)]
        lines += row_loads("n", "(row + 1)", "        ")
    else:
        lines += row_loads("", "row", "        ")
    lines += ["        mean = tl.load(MEAN + row, ok, other=0.0)",
              "        rstd = tl.load(RSTD + row, ok, other=0.0)"]
    lines += [f"        m{c} = cm{c} & (row + 0 * cols{c} < M)" for c in range(nch)]
    for c in range(nch):
        if not w_outside:
            lines.append(f"        w{c} = tl.load(W + cols{c}, cm{c}, other=0.0).to(tl.float32)")
        lines += [f"        xh{c} = (x{c}.to(tl.float32) - mean) * rstd",
                  f"        wdy{c} = w{c} * dy{c}.to(tl.float32)"]
    lines += ["        s1 = " + " + ".join(f"tl.where(cm{c}, xh{c} * wdy{c}, 0.0)" for c in range(nch)),
              "        s2 = " + " + ".join(f"tl.where(cm{c}, wdy{c}, 0.0)" for c in range(nch)),
              "        c1 = tl.sum(s1, 1)[:, None] / N",
              "        c2 = tl.sum(s2, 1)[:, None] / N"]
    for c in range(nch):
        lines += [f"        dx = (wdy{c} - (xh{c} * c1 + c2)) * rstd",
                  f"        tl.store(DX + row * N + cols{c}, dx.to(DX.dtype.element_ty), m{c})",
                  f"        dw{c} += tl.where(m{c}, dy{c}.to(tl.float32) * xh{c}, 0.0)",
                  f"        db{c} += tl.where(m{c}, dy{c}.to(tl.float32), 0.0)"]
    for c in range(nch):
        lines += [f"    tl.store(DWP + pid * N + cols{c}, dw{c}, cm{c})",
                  f"    tl.store(DBP + pid * N + cols{c}, db{c}, cm{c})"]
    return "\n".join(lines) + "\n"


def load(src: str):
    """The probe kernel of ``src``, imported as the compiler imports its generated modules."""
    from compiler.runtime import load_module
    return load_module(src, "mixed_order_probe")[0].partial


def main(argv=None) -> int:
    import argparse

    import triton
    parser = argparse.ArgumentParser(prog="python -m kernels.benchmarks.mixed_order_probe")
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--cols", type=int, default=10240)
    parser.add_argument("--cases", choices=("session9", "session21", "session22"), default="session22",
                        help="session 9's shapes (whole / chunked / grouped), session 21's (register caps, sliced) or "
                             "session 22's (held chunks, next-row prefetch)")
    args = parser.parse_args(argv)
    if not _timing.require_gpu("kernels.benchmarks.mixed_order_probe"):
        return 0
    m, n = args.rows, args.cols
    torch.manual_seed(0)
    x = torch.randn(m, n, device="cuda", dtype=torch.float16)
    dy = torch.randn(m, n, device="cuda", dtype=torch.float16)
    w = torch.randn(n, device="cuda", dtype=torch.float16)
    xf = x.float()
    mean = xf.mean(1)
    rstd = torch.rsqrt(xf.var(1, unbiased=False) + 1e-5)
    xhat = (xf - mean[:, None]) * rstd[:, None]
    wdy = w.float() * dy.float()
    ref_dx = (wdy - (xhat * (xhat * wdy).mean(1, keepdim=True) + wdy.mean(1, keepdim=True))) * rstd[:, None]
    ref_dw, ref_db = (dy.float() * xhat).sum(0), dy.float().sum(0)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    copy = _timing.copy_bandwidth_gbps()
    nbytes = 3 * m * n * 2
    _timing.print_header(f"mixed-order partial kernel shapes, layer norm backward {m} x {n} fp16")
    print(f"copy bandwidth {copy:.0f} GB/s; minimal traffic {nbytes / 1e6:.0f} MB (x, dy read, dx written); "
          f"ideal {nbytes / copy / 1e3:.1f} us\n")
    whole_block = triton.next_power_of_2(n)
    if args.cases == "session9":
        cases = [("whole", whole_block, w_, p, s, None) for w_ in (8, 16) for p in (1, 2) for s in (1, 2)]
        cases += [("chunked", ch, w_, p, 1, None) for ch in (2048, 1024) for w_ in (8, 16) for p in (1, 2)]
        cases += [(f"grouped G={g}", ch, w_, p, 1, None) for g in (2, 4, 8) for ch in (512, 1024, 2048)
                  for w_ in (4, 8) for p in (1, 2, 4) if g * ch <= 8192]
    elif args.cases == "session22":   # chunks held in registers, the next row prefetched
        cases = [("whole", whole_block, 8, 1, 1, None), ("whole", whole_block, 8, 1, 2, None)]
        cases += [(f"held{' prefetch' if pf else ''}{' w-out' if wo else ''}", ch, w_, 1, 1, None)
                  for ch in (2048, 1024) for w_ in (8, 16) for pf in (False, True) for wo in (False, True)
                  if ch == 2048 or pf]
        cases += [("held prefetch w-out", whole_block, 8, 1, 1, None)]      # the compiler's shape, prefetching
    else:   # session 21: several programs per SM, by register caps or by slicing the columns
        cases = [("whole", whole_block, 8, 1, 1, None)]
        cases += [("chunked", ch, w_, p, 1, cap) for ch in (2048, 1024) for w_, p, cap in
                  ((8, 2, 128), (4, 2, 255), (4, 4, 128), (16, 1, None))]
        cases += [(f"sliced {sl} {mode}", ch, w_, p, 1, cap)
                  for sl, ch in ((2, 1024), (2, 512), (5, 2048), (5, 1024))
                  for mode in ("held", "reread")
                  for w_, p, cap in ((8, 1, None), (8, 2, None), (8, 2, 128), (4, 2, None), (4, 4, 128), (16, 1, None))
                  if n % (ch * sl) == 0]
    rows = []
    for shape, ch, warps, per_sm, stages, cap in cases:
        slices = int(shape.split()[1]) if shape.startswith("sliced") else 1
        if shape.startswith("held"):
            kernel = load(held_source(n, ch, "prefetch" in shape, "w-out" in shape))
        elif shape.startswith("grouped"):
            kernel = load(grouped_source(int(shape.split("=")[1])))
        elif slices > 1:
            kernel = load(sliced_source(n, ch, slices, shape.endswith("held")))
        else:
            kernel = load(source(n, ch, shape == "whole", stages))
        bands = max(1, min(m, sms * per_sm // slices))
        rows_per = -(-m // bands)
        bands = -(-m // rows_per)
        programs = bands * slices
        dx = torch.empty_like(x)
        dwp = torch.empty(bands, n, device="cuda")
        dbp = torch.empty(bands, n, device="cuda")
        extra = {} if cap is None else {"maxnreg": cap}

        def run():
            kernel[(programs,)](x, dy, w, mean, rstd, dx, dwp, dbp, m, ROWS=rows_per, N=n, CH=ch, num_warps=warps,
                                **extra)
        known = {id(c) for c in _timing.compiled_of(kernel)}     # a module loaded again keeps its variants
        try:
            run()
            torch.cuda.synchronize()
        except Exception as e:    # out of resources: say so, go on
            rows.append((shape, ch, warps, per_sm, stages, cap or "-", "-", "-", "-", f"failed: {type(e).__name__}"))
            continue
        err = max((dx.float() - ref_dx).abs().max().item() / 8,
                  (dwp.sum(0) - ref_dw).abs().max().item() / m ** 0.5,
                  (dbp.sum(0) - ref_db).abs().max().item() / m ** 0.5)
        ms = _timing.bench(run).median_ms
        info = _timing.registers(kernel, known) or "?"
        rows.append((shape, ch, warps, per_sm, stages, cap or "-", f"{ms * 1e3:.1f}",
                     f"{nbytes / (ms * 1e-3) / 1e9 / copy:.0%}", info, "ok" if err < 0.05 else f"WRONG ({err:.3g})"))
    print(_timing.markdown_table(["shape", "CH", "warps", "programs/SM", "stages", "maxnreg", "us", "% copy BW", "registers",
                                  "check"],
                                 rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
