"""Run layer norm forward + backward (4096 x 10240 fp16; ``--shape M N --dtype D`` for another) twice under
tritondiff and twice under Inductor.

A target for a profiler (issue #8: our backward dx kernel takes ~118 us against Inductor's ~86 us):

    ncu --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,gpu__time_duration.sum \\
        python -m kernels.benchmarks.ln_dx_probe

prints DRAM bytes, L2 hit rate and duration per kernel launch.  ``--variant KNOB=VALUE[,...]`` (repeatable)
instead prints each tritondiff kernel's GPU time (torch.profiler), registers, spills and shared memory under
those ``compiler.config`` knobs, next to the defaults and Inductor's kernels: per-kernel effects that a
whole-workload sweep hides; a variant with
``autotune=True`` also prints every candidate's time of every tuned step.  Without a GPU it says so and
exits 0.
"""
from __future__ import annotations

import sys

import torch

from kernels.benchmarks import _timing


def main(argv=None) -> int:
    import argparse
    parser = argparse.ArgumentParser(prog="python -m kernels.benchmarks.ln_dx_probe")
    parser.add_argument("--variant", action="append", default=[], metavar="KNOB=VALUE[,KNOB=VALUE]")
    parser.add_argument("--shape", type=int, nargs=2, default=(4096, 10240), metavar=("M", "N"))
    parser.add_argument("--dtype", default="float16", choices=("float16", "bfloat16", "float32"))
    parser.add_argument("--flush-l2", action="store_true",
                        help="time each call after a 256 MB fill (cold L2), not back to back: whether a kernel's "
                             "time depends on what the previous call left in L2")
    args = parser.parse_args(argv)
    if not _timing.require_gpu("kernels.benchmarks.ln_dx_probe"):
        return 0
    import compiler
    from compiler import workloads
    from compiler.benchmark import parse_variant

    def fwd_bwd(fn):
        def run(x, w, b, dy):
            return torch.autograd.grad(fn(x, w, b), (x, w, b), dy)
        return run

    (m, n), dtype = args.shape, getattr(torch, args.dtype)
    x = torch.randn(m, n, device="cuda", dtype=dtype, requires_grad=True)
    w = torch.randn(n, device="cuda", dtype=dtype, requires_grad=True)
    b = torch.randn(n, device="cuda", dtype=dtype, requires_grad=True)
    dy = torch.randn(m, n, device="cuda", dtype=dtype)
    print(f"layer norm fwd+bwd {m}x{n} {args.dtype}")
    if not args.variant:
        for name, compiled in (("tritondiff", compiler.compile_fresh(workloads.layer_norm)),
                               ("inductor", torch.compile(workloads.layer_norm))):
            run = fwd_bwd(compiled)
            for _ in range(2):
                run(x, w, b, dy)
            torch.cuda.synchronize()
            print(f"ln_dx_probe: {name} ran", file=sys.stderr)
        return 0
    cases = [("inductor", {}), ("tritondiff", {})] + [parse_variant(f"v:{v}") for v in args.variant]
    seen: set = set()
    for i, (label, knobs) in enumerate(cases):
        compiled = torch.compile(workloads.layer_norm) if label == "inductor" else \
            compiler.compile_fresh(workloads.layer_norm)
        run = fwd_bwd(compiled)
        with compiler.config.patch(**knobs):
            for _ in range(3):
                run(x, w, b, dy)
            kernels = _timing.kernel_times(lambda: run(x, w, b, dy), iters=20)
            if args.flush_l2:
                kernels = _cold_l2_kernel_times(lambda: run(x, w, b, dy))
        name = label if label == "inductor" else f"tritondiff {knobs or 'defaults'}"
        print(f"{name}: " + "; ".join(f"{k[:48]} {ms * 1e3:.1f} us" for k, _, ms in kernels)
              + f"; total {sum(k[2] for k in kernels) * 1e3:.1f} us")
        for kname, regs, spills, shared in _timing.compiled_kernels(seen):
            print(f"   {kname[:60]}: {regs} registers, {spills} spilled, {shared / 1024:.0f} KiB shared")
        if knobs.get("autotune"):
            _print_tuning()
    return 0


def _cold_l2_kernel_times(call) -> list:
    """``_timing.kernel_times`` of ``call`` with L2 emptied before each call (the fill's own kernel left out)."""
    scratch = torch.empty(256 << 20, dtype=torch.int8, device="cuda")

    def cold():
        scratch.zero_()
        call()
    return [k for k in _timing.kernel_times(cold, iters=20) if "FillFunctor" not in k[0]]


def _print_tuning() -> None:
    """Every candidate's time of every step tuned so far (a variant with autotune=True)."""
    from compiler import autotune
    for entry in autotune.get_cache()._memory.values():
        timings = sorted(entry["timings"].items(), key=lambda kv: (kv[1] is None, kv[1] or 0))
        print(f"   tuned step, winner {entry['winner']}: "
              + ", ".join(f"{n} {'failed' if t is None else f'{t * 1e3:.1f} us'}" for n, t in timings))


if __name__ == "__main__":
    sys.exit(main())
