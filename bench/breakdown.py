"""Where the time goes: host enqueue time vs GPU kernel time, per implementation, one run.

    python -m bench.breakdown [--only NAME ...] [--suite seed|wide|models|all] [--variant NAME:KNOB=VALUE,...]
                              [--kernels N] [--out FILE.md] [--profile-host N]

For every workload of ``bench.compiler`` (tritondiff-compiled, Inductor, eager) and the
hand-written kernels' entry points (layer norm fwd+bwd through autograd, each op alone, the
mHC-lite K1 backward dx), prints: the latency a caller waits for (do_bench median, L2
flushed), the host time to enqueue one call (wall time of back-to-back calls, no sync), the
sum of the GPU kernels' durations per call (torch.profiler), kernels per call, and the N
slowest kernels.  Latency near host time means the call is launch-bound: the fix is on the
host; latency near GPU time means the kernels are.  On a machine without a GPU it prints a
notice and exits 0.
"""
from __future__ import annotations

import argparse
import sys
from typing import Callable

import torch

from tritondiff.base import timing as _timing


def _kernel_cases() -> list[tuple[str, Callable[[], Callable[[], object]]]]:
    """(name, factory of the timed callable) for the hand-written kernels."""
    from tritondiff import kernels
    from tritondiff.kernels.mhc import rmsnorm_project as rp

    def layer_norm(m: int, n: int, dtype: torch.dtype, part: str) -> Callable[[], object]:
        x = torch.randn(m, n, device="cuda", dtype=dtype, requires_grad=True)
        w = torch.randn(n, device="cuda", dtype=dtype, requires_grad=True)
        b = torch.randn(n, device="cuda", dtype=dtype, requires_grad=True)
        dy = torch.randn(m, n, device="cuda", dtype=dtype)
        if part == "fwd+bwd":
            def run():
                y = kernels.layer_norm(x, (n,), w, b)
                return torch.autograd.grad(y, (x, w, b), dy)
            return run
        xd, wd, bd = x.detach(), w.detach(), b.detach()
        if part == "fwd op":
            return lambda: torch.ops.tritondiff.layer_norm(xd, [n], wd, bd, 1e-5)
        _, _, rstd = torch.ops.tritondiff.layer_norm(xd, [n], wd, bd, 1e-5)
        return lambda: torch.ops.tritondiff.layer_norm_backward(dy, xd, wd, rstd, dtype, dtype)

    def k1_bwd_dx(t: int, c: int) -> Callable[[], object]:
        x = torch.randn(t, 4 * c, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(32, 4 * c, device="cuda", dtype=torch.bfloat16) * 0.02
        y, inv_rms = rp.rmsnorm_project_fwd(x, w, 1e-6)
        gy = torch.randn(t, 32, device="cuda", dtype=torch.bfloat16)
        return lambda: rp.rmsnorm_project_bwd_dx(x, w, gy, y, inv_rms, None, 1e-6)

    cases = []
    for m, n, dt in ((1_152_000, 16, torch.float32), (1_152_000, 16, torch.float16), (4096, 10240, torch.float16)):
        for part in ("fwd+bwd", "fwd op", "bwd op"):
            cases.append((f"kernels.layer_norm {part} {m}x{n} {str(dt)[6:]}",
                          lambda m=m, n=n, dt=dt, part=part: layer_norm(m, n, dt, part)))
    cases.append(("kernels.mhc K1 bwd dx T=65536 C=2560 bf16", lambda: k1_bwd_dx(65536, 2560)))
    return cases


def _micro_cases() -> list[tuple[str, Callable[[], Callable[[], object]]]]:
    """Fixed host costs: one Triton launch (JIT path and the compiled kernel's own launcher), a
    no-op custom op, a no-op autograd.Function forward + backward."""
    import triton
    import triton.language as tl

    @triton.jit
    def _axpy(x_ptr, y_ptr, out_ptr, a, n, s0, s1, s2, s3, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out_ptr + offs, a * tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)

    x = torch.randn(4096, device="cuda")
    y, out = torch.randn_like(x), torch.empty_like(x)

    def jit_launch():
        return lambda: _axpy[(4,)](x, y, out, 2.0, 4096, 1, 2, 3, 4, BLOCK=1024)

    def direct_launch():
        kernel = _axpy[(4,)](x, y, out, 2.0, 4096, 1, 2, 3, 4, BLOCK=1024)
        stream = torch.cuda.current_stream().cuda_stream
        args = (x, y, out, 2.0, 4096, 1, 2, 3, 4, 1024)
        meta = kernel.launch_metadata((4, 1, 1), stream, *args)
        return lambda: kernel.run(4, 1, 1, stream, kernel.function, kernel.packed_metadata, meta, None, None, *args)

    @torch.library.custom_op("tritondiff_bench::noop", mutates_args=())
    def _noop(t: torch.Tensor) -> torch.Tensor:
        return t.new_empty(0)

    class _Fn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t.view_as(t)

        @staticmethod
        def backward(ctx, g):
            return g

    leaf = torch.randn(4, device="cuda", requires_grad=True)
    g = torch.ones(4, device="cuda")
    return [("micro: triton launch, JIT path (10 args)", jit_launch),
            ("micro: triton launch, CompiledKernel.run", direct_launch),
            ("micro: custom op (no-op body)", lambda: (lambda: _noop(x))),
            ("micro: autograd.Function fwd + grad", lambda: (lambda: torch.autograd.grad(_Fn.apply(leaf), leaf, g)))]


def _compiler_cases(suite: str, variants: list[tuple[str, dict]]
                    ) -> list[tuple[str, Callable[[], Callable[[], object]]]]:
    """Every workload of ``bench.compiler``'s ``suite`` under eager, Inductor, tritondiff and its variants."""
    from bench import compiler as benchmark
    cases = []
    for w in benchmark.SUITES[suite]():
        for backend, wrap in benchmark._backends(variants=variants).items():
            def factory(w=w, wrap=wrap):
                torch._dynamo.reset()
                inputs = w.make()
                fn = benchmark.build(w, wrap)
                return lambda: fn(*inputs)
            cases.append((f"{w.name} [{backend}]", factory))
    return cases


def _profile_host(name: str, call: Callable[[], object], top: int, calls: int = 300) -> None:
    """cProfile of ``calls`` back-to-back calls: where the host time of one call goes (stderr)."""
    import cProfile
    import io
    import pstats
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(calls):
        call()
    profile.disable()
    torch.cuda.synchronize()
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(top)
    print(f"--- host profile of {name} ({calls} calls; seconds are totals)\n{text.getvalue()}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    from bench import compiler as benchmark
    parser = argparse.ArgumentParser(prog="python -m bench.breakdown", description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="run only cases whose name contains one of these")
    parser.add_argument("--kernels", type=int, default=4, help="list this many slowest kernels per case")
    parser.add_argument("--out", help="also write the Markdown table here")
    parser.add_argument("--profile-host", type=int, default=0, metavar="N",
                        help="also print the N Python functions with the most own host time per case (cProfile)")
    parser.add_argument("--suite", choices=sorted(benchmark.SUITES), default="seed",
                        help="the bench.compiler suite whose workloads to break down")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME:KNOB=VALUE[,KNOB=VALUE]",
                        help="also break down tritondiff with these compiler.config knobs (as bench.compiler)")
    args = parser.parse_args(argv)
    variants = benchmark.parse_variants(parser, args.variant)
    if not _timing.require_gpu("bench.breakdown"):
        return 0
    _timing.print_header("host vs GPU time per call")
    rows = []
    for name, factory in _micro_cases() + _kernel_cases() + _compiler_cases(args.suite, variants):
        if args.only and not any(o in name for o in args.only):
            continue
        try:
            call = factory()
            b = _timing.breakdown(call)
            if args.profile_host:
                _profile_host(name, call, args.profile_host)
        except Exception as e:  # noqa: BLE001  (reported per case; the run goes on)
            rows.append((name, "failed", f"{type(e).__name__}: {str(e)[:120]}", "", "", ""))
            continue
        finally:
            torch.cuda.empty_cache()
        rows.append((name, b.latency_ms, b.host_ms, b.gpu_ms, round(b.launches, 1),
                     "; ".join(f"{k[0][:60]} x{k[1]:.0f} {k[2] * 1e3:.1f}us" for k in b.kernels[:args.kernels])))
        print(f"{name}: latency {b.latency_ms:.3f} ms, host {b.host_ms:.3f} ms, gpu {b.gpu_ms:.3f} ms, "
              f"{b.launches:.1f} kernels", file=sys.stderr, flush=True)
    text = _timing.markdown_table(("case", "latency ms", "host ms/call", "GPU ms/call", "kernels/call",
                                   "slowest kernels (per call)"), rows)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
