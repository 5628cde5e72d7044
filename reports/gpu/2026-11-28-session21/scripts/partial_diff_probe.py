"""Session 21 probe: why does the compiler's mixed-order partial of layer norm 4096x10240 fp16 take ~121 us when
session 9's hand-written kernel of the same shape (whole padded row, 8 warps, one program per SM) takes ~112.5?

Compiles the workload's backward graph, takes the partial kernel's source, and times it as generated and with one
change each (text edits of the source), the hand-written kernel beside, in interleaved rounds under the same
do_bench (L2 flushed):

- ``generated``: as emitted, launched with the compiler's options (enable_fp_fusion off);
- ``fma``: the same source with enable_fp_fusion on (Triton's default; the hand-written kernel gets it);
- ``no acc mask``: without ``accN = tl.where(rmask, accN, 0)`` after each column accumulation;
- ``w hoisted``: the weight's load moved above the row loop;
- ``no hints``: the row loads without eviction_policy;
- ``all``: fma + no acc mask + w hoisted;
- ``hand``: kernels.benchmarks.mixed_order_probe's whole-row kernel (fp32 mean / rstd).

Each variant's outputs are compared with the generated kernel's (max abs difference printed).

    PYTHONPATH=. TRITONDIFF_DEVICE=cuda python reports/gpu/2026-11-28-session21/scripts/partial_diff_probe.py [ROUNDS]
"""
import re
import statistics
import sys

import torch

import compiler
from compiler import benchmark
from compiler.backend import capture_graphs
from compiler.pipeline import compile_graph
from compiler.runtime import compile_options, load_module
from kernels.benchmarks import _timing, mixed_order_probe


def _w_above_loop(text: str, w_line: str) -> str:
    """``text`` with the weight's load ``w_line`` moved from the row loop to just above its header."""
    out = []
    for ln in text.split("\n"):
        if ln == w_line:
            continue
        if ln.lstrip().startswith("for xstep"):
            out.append(w_line[4:])
        out.append(ln)
    return "\n".join(out)


def edits(src: str) -> dict:
    lines = src.split("\n")
    w_load = [ln for ln in lines if "tl.load(" in ln and "+ rindex," in ln and ln.startswith(" " * 8)]   # in the loop
    out = {"generated": src}
    out["no acc mask"] = "\n".join(ln for ln in lines if not re.match(r"^\s+acc\d+ = tl\.where\(rmask, acc\d+, tmp\d+\)$", ln))
    if len(w_load) == 1:
        out["w hoisted"] = _w_above_loop(src, w_load[0])
    out["no hints"] = re.sub(r", eviction_policy='evict_first'", "", src)
    out["all"] = _w_above_loop(out["no acc mask"], w_load[0]) if len(w_load) == 1 else out["no acc mask"]
    return out


def main(rounds: int) -> None:
    wl = next(w for w in benchmark.all_workloads() if "4096x10240" in w.name)
    inputs = wl.make()
    graphs = capture_graphs(wl.fn, *inputs[:3], backward=True)
    bwd = [g for g in graphs if g.kind == "backward"][0]
    exe = compile_graph(bwd.gm, bwd.args, "probe")
    (spec,) = [s for specs in exe.generated.kernels.values() for s in specs if s.name.endswith("_partial")]
    src = spec.source
    assert src in exe.generated.source
    params = re.search(r"def " + spec.name + r"\(([^)]*)\)", src).group(1).split(", ")
    torch.manual_seed(0)
    args = []
    for p in params:
        if p.startswith("p_arg"):
            meta = bwd.args[int(p[5:])]
            t = torch.empty_strided(meta.shape, meta.stride(), dtype=meta.dtype, device="cuda")
            args.append(t.uniform_(0.5, 1.5) if t.numel() < 1_000_000 and t.dim() == 2 and t.shape[1] == 1 else t.normal_())
        elif p.endswith("_partials"):
            args.append(torch.zeros(spec.grid[0], 10240, device="cuda"))
        else:
            args.append(torch.empty(4096, 10240, device="cuda", dtype=torch.float16))
    print("params:", [(p, tuple(a.shape), str(a.dtype)) for p, a in zip(params, args)])
    variants = edits(src)
    kernels = {}
    for name, text in variants.items():
        module = exe.generated.source.replace(src, text)      # the module's header and prelude around it
        kernels[name] = getattr(load_module(module, f"pdiff_{len(kernels)}")[0], spec.name)
    opts = compile_options()
    launches = {name: (lambda f=f: f[spec.grid](*args, num_warps=spec.num_warps, **opts)) for name, f in kernels.items()}
    launches["fma"] = lambda f=kernels["generated"]: f[spec.grid](*args, num_warps=spec.num_warps, enable_fp_fusion=True)
    launches["all"] = lambda f=kernels["all"]: f[spec.grid](*args, num_warps=spec.num_warps, enable_fp_fusion=True)
    # outputs against the generated kernel's
    launches["generated"]()
    torch.cuda.synchronize()
    ref = [a.clone() for a in args if a.dtype in (torch.float16, torch.float32) and a.numel() >= 10240 * 128]
    diffs = {}
    for name, run in launches.items():
        run()
        torch.cuda.synchronize()
        got = [a for a in args if a.dtype in (torch.float16, torch.float32) and a.numel() >= 10240 * 128]
        diffs[name] = max((g.float() - r.float()).abs().max().item() for g, r in zip(got, ref))
    # hand-written whole row (session 9), its own fp32 mean / rstd
    x = torch.randn(4096, 10240, device="cuda", dtype=torch.float16)
    dy = torch.randn_like(x)
    w = torch.randn(10240, device="cuda", dtype=torch.float16)
    mean, rstd = x.float().mean(1), torch.rsqrt(x.float().var(1, unbiased=False) + 1e-5)
    hand = mixed_order_probe.load(mixed_order_probe.source(10240, 16384, True))
    dx, dwp, dbp = torch.empty_like(x), torch.empty(128, 10240, device="cuda"), torch.empty(128, 10240, device="cuda")
    launches["hand"] = lambda: hand[(128,)](x, dy, w, mean, rstd, dx, dwp, dbp, 4096, ROWS=32, N=10240, CH=16384, num_warps=8)
    _timing.print_header("layer norm 4096x10240 fp16 backward partial: the generated kernel, edited")
    times = _timing.interleaved_us(launches, rounds)
    base = statistics.median(times["generated"])
    rows = []
    for k, ts in times.items():
        med = statistics.median(ts)
        rows.append((k, f"{med:.1f}", f"{min(ts):.1f}-{max(ts):.1f}", f"{base - med:+.1f}", f"{diffs.get(k, 0):.3g}"))
    print(f"{rounds} interleaved rounds; grid {spec.grid}, {spec.num_warps} warps\n")
    print(_timing.markdown_table(["variant", "us", "range", "saved us", "max |diff| vs generated"], rows))
    for k, f in list(kernels.items()) + [("hand", hand)]:
        print(k, _timing.registers(f))
    print("\n" + src)


if __name__ == "__main__":
    if _timing.require_gpu("partial_diff_probe"):
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
