"""Re-launch tritondiff's own kernel for a row reduction of an expanded (stride-0) input, with edits.

  python reports/gpu/2026-11-25-h100-session12/broadcast_row_variants.py {persistent,looped}

persistent: float32 [1, 4093], one value per row; looped: bfloat16 [2, 956086], one value per row.
The compiler's kernel is dumped, then each variant edits one line pattern of its source and is
compiled and launched on its own: compile time, the sum's error in ulp of the float64 sum, the
largest sizePerThread in the TTGIR, registers and spills.
"""
import glob
import importlib.util
import re
import sys
import tempfile
import time

import torch

from compiler import config, tritondiff_backend
from compiler.subjects import row_reductions

VARIANTS = {
    "as generated": [],
    # the per-row load indexed over the whole block: one address per row, RBLOCK lanes
    "load over [X, R]": [(r"tl\.load\((p_arg0 \+ \w+)", r"tl.load(\1 + 0 * rbase")],
    # tl.where's other operand as a Python scalar, not a [X, 1] tl.full
    "scalar others": [(r"tl\.where\(rmask, (\w+), (tmp\d+)\)", r"tl.where(rmask, \1, 0.0)")],
}


def main(which):
    m, n, dtype = {"persistent": (1, 4093, torch.float32), "looped": (2, 956086, torch.bfloat16)}[which]
    torch.manual_seed(0)
    x = (torch.rand(m, 1, device="cuda") + 0.1).to(dtype).expand(m, n)
    truth = x.double().sum(-1)
    out_dir = tempfile.mkdtemp()
    with config.patch(dump_dir=out_dir, reduction_strategy=which):
        t = time.perf_counter()
        ours = torch.compile(row_reductions, backend=tritondiff_backend)(x)
        print(f"{which}: compiled by tritondiff in {time.perf_counter() - t:.1f} s", flush=True)
    src_path = glob.glob(f"{out_dir}/**/04_triton.py", recursive=True)[0]
    src = open(src_path).read()
    plan = open(src_path.replace("04_triton.py", "05_plan.txt")).read()
    print(plan.strip().splitlines()[0])
    name = re.search(r"^def (g\w+_k0)\(", src, re.M).group(1)
    warps = int(re.search(r"warps=(\d+)", plan).group(1))
    eps = torch.finfo(dtype).eps
    print(f"  ours through the compiler: sum error {float(((ours[0].double() - truth).abs() / (eps * truth.abs())).max()):.1f} ulp")
    for label, edits in VARIANTS.items():
        text = src
        for pat, rep in edits:
            text, k = re.subn(pat, rep, text)
            if not k:
                print(f"  {label}: pattern {pat!r} not found")
        path = f"{out_dir}/variant_{len(label)}_{abs(hash(label))}.py"
        open(path, "w").write(text)
        spec = importlib.util.spec_from_file_location(f"v{abs(hash(label))}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        outs = [torch.empty(m, device="cuda", dtype=dtype), torch.empty(m, device="cuda", dtype=dtype),
                torch.empty(m, device="cuda", dtype=torch.int64), torch.empty(m, device="cuda", dtype=dtype)]
        t = time.perf_counter()
        k = getattr(mod, name)[(m,)](x, *outs, num_warps=warps, enable_fp_fusion=False)
        torch.cuda.synchronize()
        secs = time.perf_counter() - t
        err = float(((outs[0].double() - truth).abs() / (eps * truth.abs())).max())
        spt = [tuple(int(v) for v in s.split(",")) for s in re.findall(r"sizePerThread = \[([\d, ]+)\]", k.asm["ttgir"])]
        print(f"  {label}: compile+run {secs:.1f} s, sum error {err:.1f} ulp, argmax {outs[2].tolist()}, "
              f"largest sizePerThread {max(spt, key=lambda s: s[0] * s[-1]) if spt else None}, "
              f"regs {k.n_regs} spills {k.n_spills}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
