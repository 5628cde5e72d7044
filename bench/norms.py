"""Benchmark nrm2 and layer norm: the hand kernels vs eager torch vs Inductor vs this project's compiler.

    python -m bench.norms [--out reports/kernels.md] [--only nrm2 layer_norm] [--sweep]

Prints a Markdown report: the environment header, the measured device copy bandwidth, then per case and
implementation the median latency (``do_bench``, L2 flushed), the GPU time (the call's kernels' summed
durations, torch.profiler), the host time to enqueue one call, the kernels per call, the achieved bandwidth
(minimum bytes the operation must move / GPU time) and its share of the copy bandwidth; the slowest kernels of
each hand-kernel call; the hand kernels against the compiler's generated code on the same op; and issue #39's
targets with a met / missed verdict.  ``--sweep`` runs a grid search over the launch parameters of both kernels
(through ``kernels.config.launch_overrides``), ranked by GPU time, instead of the cases, so the tables in
``kernels/nrm2.py`` and ``kernels/layer_norm.py`` can be re-tuned for a device.  On a machine without a GPU it prints a notice and exits 0.
"""
from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
from dataclasses import dataclass
from functools import partial
from typing import Callable, Sequence

import torch
import triton

from bench import tritondiff_compile
from tritondiff import kernels
from tritondiff.base import timing as _timing
from tritondiff.kernels.config import config

#: Issue #39's targets: (op, case) -> what ours must meet: ("latency", rival) -- at or below the rival's latency --
#: or ("gpu_copy", fraction) -- at least that share of the copy bandwidth in GPU time.
TARGETS = {
    ("nrm2", "N=2^20 float32"): ("latency", "eager"),
    ("nrm2", "N=2^28 float32"): ("latency", "eager"),
    ("layer_norm fwd op", "1152000x16 float32"): ("gpu_copy", 0.85),
    ("layer_norm fwd op", "1152000x16 float16"): ("gpu_copy", 0.85),
    ("layer_norm bwd op", "1152000x16 float32"): ("gpu_copy", 0.85),
    ("layer_norm bwd op", "1152000x16 float16"): ("gpu_copy", 0.85),
    ("layer_norm fwd+bwd", "4096x10240 float16"): ("latency", "eager"),
    ("layer_norm fwd+bwd", "4096x10240 bfloat16"): ("latency", "eager"),
    ("layer_norm fwd+bwd", "4096x10240 float32"): ("latency", "eager"),
}


@dataclass
class Row:
    op: str
    case: str
    impl: str
    ms: float                 # median latency
    nbytes: int
    max_err: float
    gpu_ms: float = float("nan")
    host_ms: float = float("nan")
    launches: float = float("nan")
    kernels: tuple = ()


#: Implementations that go through torch.compile: measured after every other one (``run``).
COMPILED = ("inductor", "compiler")
#: Rounds of a case's latencies (its implementations taking turns in each; the median of the rounds' medians).
ROUNDS = 5


@dataclass
class Job:
    """One op and case: its implementations, the bytes it must move, and the error of a result against the
    float64 truth (``check(result)``)."""

    op: str
    case: str
    impls: dict
    nbytes: int
    check: Callable[[object], float]


def run(jobs: list[Job]) -> list[Row]:
    """Every job's rows: the latencies first -- every implementation that does not go through torch.compile,
    then those that do, each case's taking turns over ``ROUNDS`` rounds -- and the GPU times (torch.profiler)
    last.  In one process, a torch.compile'd call or a profiler session leaves later Python-side launches
    slower, which would inflate the latencies measured after them."""
    rows: dict[tuple, Row] = {}
    for compiled in (False, True):
        for job in jobs:
            impls = {k: fn for k, fn in job.impls.items() if (k in COMPILED) == compiled}
            if not impls:
                continue
            errs = {k: job.check(fn()) for k, fn in impls.items()}
            times = _timing.interleaved_us(impls, ROUNDS, rep_ms=40)
            for k, fn in impls.items():
                rows[(job.op, job.case, k)] = Row(job.op, job.case, k, statistics.median(times[k]) / 1e3, job.nbytes,
                                                  errs[k], host_ms=_timing.host_ms(fn))
    for job in jobs:
        for k, fn in job.impls.items():
            row, kernels_ = rows[(job.op, job.case, k)], _timing.kernel_times(fn)
            row.gpu_ms, row.launches, row.kernels = (sum(t[2] for t in kernels_), sum(t[1] for t in kernels_),
                                                     tuple(kernels_))
    return [rows[(job.op, job.case, k)] for job in jobs for k in job.impls]


def _nrm2_cases(dev: torch.device) -> list[tuple[str, torch.Tensor]]:
    return [(f"N=2^{p} float32", torch.randn(2**p, device=dev)) for p in (16, 20, 24, 28)]


def _layer_norm_cases(dev: torch.device) -> list[tuple[str, tuple[int, int], torch.dtype]]:
    short = [(f"1152000x16 {_name(d)}", (1_152_000, 16), d) for d in (torch.float32, torch.float16, torch.bfloat16)]
    mid = [(f"65536x64 {_name(d)}", (65536, 64), d) for d in (torch.float32, torch.bfloat16)]
    wide = [(f"4096x{n} {_name(d)}", (4096, n), d) for n in (4096, 10240)
            for d in (torch.float16, torch.bfloat16, torch.float32)]
    return short + mid + wide


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def nrm2_jobs(dev: torch.device) -> list[Job]:
    jobs = []
    for case, x in _nrm2_cases(dev):
        # each case compiled on its own (a code object of its own: no shared recompile limit, no dynamic shapes)
        inductor, ours_compiled = torch.compile(_fresh(_vector_norm), dynamic=False), tritondiff_compile(_fresh(_vector_norm))
        ref = torch.linalg.vector_norm(x.double()).item()
        impls: dict[str, Callable[[], torch.Tensor]] = {
            "ours": partial(kernels.nrm2, x),           # partials, not lambdas: each job keeps its own case's
            "ours (op)": partial(torch.ops.tritondiff.nrm2, x),
            "eager": partial(torch.linalg.vector_norm, x),
            "inductor": partial(inductor, x),
            "compiler": partial(ours_compiled, x),
        }
        jobs.append(Job("nrm2", case, impls, x.numel() * x.element_size(), partial(_scalar_err, ref=ref)))
    return jobs


def _scalar_err(out: torch.Tensor, ref: float) -> float:
    return abs(out.item() - ref) / ref


def _fwd_bwd(fn: Callable, x, w, b, dy) -> Callable[[], tuple]:
    def run():
        y = fn(x, (x.shape[-1],), w, b)
        return (y,) + torch.autograd.grad(y, (x, w, b), dy)
    return run


def _max_rel_err(out, ref) -> float:
    """The largest error of ``out``'s tensors against ``ref``'s, relative to each reference's largest value."""
    return max(((o.double() - r).abs().max() / r.abs().max().clamp_min(1e-30)).item() for o, r in zip(out, ref))


def layer_norm_jobs(dev: torch.device) -> list[Job]:
    jobs = []
    for case, (m, n), dtype in _layer_norm_cases(dev):
        inductor, compiled = torch.compile(_fresh(_layer_norm), dynamic=False), tritondiff_compile(_fresh(_layer_norm))
        x = torch.randn(m, n, device=dev, dtype=dtype, requires_grad=True)
        w = torch.randn(n, device=dev, dtype=dtype, requires_grad=True)
        b = torch.randn(n, device=dev, dtype=dtype, requires_grad=True)
        dy = torch.randn(m, n, device=dev, dtype=dtype)
        # Minimum traffic: forward reads x, writes y; backward reads x and dy, writes dx; plus mean/rstd (8 bytes
        # a row out, 4 back in).
        nbytes = 5 * m * n * x.element_size() + 12 * m
        ref = [t.detach() for t in _fwd_bwd(_layer_norm, *_double(x, w, b), dy.double())()]
        impls = {
            "ours": _fwd_bwd(kernels.layer_norm, x, w, b, dy),
            "eager": _fwd_bwd(_layer_norm, x, w, b, dy),
            "inductor": _fwd_bwd(inductor, x, w, b, dy),
            "compiler": _fwd_bwd(compiled, x, w, b, dy),
        }
        jobs.append(Job("layer_norm fwd+bwd", case, impls, nbytes, partial(_max_rel_err, ref=ref)))
        # The two ops alone (no autograd or Python wrapper), and the forward alone through each rival.
        xd, wd, bd = x.detach(), w.detach(), b.detach()
        _, _, rstd = torch.ops.tritondiff.layer_norm(xd, [n], wd, bd, 1e-5)
        fwd_bytes, bwd_bytes = 2 * m * n * x.element_size() + 8 * m, 3 * m * n * x.element_size() + 4 * m
        y_ref = [_layer_norm(xd.double(), (n,), wd.double(), bd.double())]
        forwards = {
            "ours": partial(_op_forward, xd, n, wd, bd),
            "eager": partial(_layer_norm, xd, (n,), wd, bd),
            "inductor": partial(inductor, xd, (n,), wd, bd),
            "compiler": partial(compiled, xd, (n,), wd, bd),
        }
        jobs.append(Job("layer_norm fwd op", case, forwards, fwd_bytes, lambda y, ref=y_ref: _max_rel_err([y], ref)))
        bwd = partial(torch.ops.tritondiff.layer_norm_backward, dy, xd, wd, rstd, dtype, dtype)
        jobs.append(Job("layer_norm bwd op", case, {"ours": bwd}, bwd_bytes, lambda out: float("nan")))
    return jobs


_COPIES = iter(range(1 << 30))


def _fresh(fn: Callable) -> Callable:
    """A copy of ``fn`` with a code object of its own: dynamo caches compiled graphs, and counts recompiles
    against its limit, per code object, so each case's copy compiles once for its shapes."""
    import types
    return types.FunctionType(fn.__code__.replace(), fn.__globals__, f"{fn.__name__}_{next(_COPIES)}")


def _op_forward(x, n, w, b):
    return torch.ops.tritondiff.layer_norm(x, [n], w, b, 1e-5)[0]


def _vector_norm(x):
    return torch.linalg.vector_norm(x)


def _layer_norm(x, normalized_shape, w, b):
    return torch.nn.functional.layer_norm(x, normalized_shape, w, b)


def _double(x, w, b):
    return [t.detach().double().requires_grad_() for t in (x, w, b)]


def _report_rows(rows: list[Row], copy_gbps: float) -> str:
    def share(ms: float) -> str:
        return f"{100 * _timing.gbps(r.nbytes, ms) / copy_gbps:.1f}" if ms == ms else "-"

    table = []
    for r in rows:
        table.append((r.op, r.case, r.impl, f"{r.ms:.4f}", f"{r.gpu_ms:.4f}" if r.gpu_ms == r.gpu_ms else "-",
                      f"{r.host_ms:.4f}" if r.host_ms == r.host_ms else "-",
                      f"{r.launches:.0f}" if r.launches == r.launches else "-", share(r.gpu_ms), share(r.ms),
                      "-" if r.max_err != r.max_err else f"{r.max_err:.1e}"))
    return _timing.markdown_table(("op", "case", "impl", "latency ms", "GPU ms", "host ms", "kernels",
                                   "% copy BW (GPU)", "% copy BW (latency)", "max rel err"), table)


def _kernel_rows(rows: list[Row]) -> str:
    """The hand kernels' calls, kernel by kernel (GPU ms per call)."""
    table = [(r.op, r.case, name, f"{n:.0f}", f"{ms:.4f}") for r in rows if r.impl == "ours" for name, n, ms in r.kernels]
    return _timing.markdown_table(("op", "case", "kernel", "launches", "GPU ms"), table)


def _versus_compiler(rows: list[Row]) -> str:
    """Each op and case the hand kernels and the compiler both ran: GPU time and latency side by side."""
    by = {(r.op, r.case, r.impl): r for r in rows}
    table = []
    for (op, case, impl), ours in by.items():
        gen = by.get((op, case, "compiler"))
        if impl != "ours" or gen is None:
            continue
        table.append((op, case, f"{ours.gpu_ms:.4f}", f"{gen.gpu_ms:.4f}", f"{gen.gpu_ms / ours.gpu_ms:.2f}x",
                      f"{ours.ms:.4f}", f"{gen.ms:.4f}", f"{gen.ms / ours.ms:.2f}x"))
    return _timing.markdown_table(("op", "case", "hand GPU ms", "compiler GPU ms", "hand speedup (GPU)",
                                   "hand latency ms", "compiler latency ms", "hand speedup (latency)"), table)


def _verdicts(rows: list[Row], copy_gbps: float) -> str:
    by = {(r.op, r.case, r.impl): r for r in rows}
    lines = []
    for (op, case), (kind, want) in TARGETS.items():
        ours = by.get((op, case, "ours"))
        if ours is None:
            continue
        if kind == "gpu_copy":
            got = _timing.gbps(ours.nbytes, ours.gpu_ms) / copy_gbps
            lines.append(f"- {op} {case}: {100 * got:.1f}% of copy bandwidth in GPU time (goal {100 * want:.0f}%): "
                         f"{'met' if got >= want else 'MISSED'}")
            continue
        rivals = [want] + (["inductor"] if want == "eager" and op != "nrm2" else [])
        for rival in rivals:
            theirs = by.get((op, case, rival))
            if theirs is None:
                continue
            lines.append(f"- {op} {case}: ours {ours.ms:.4f} ms vs {rival} {theirs.ms:.4f} ms latency: "
                         f"{'met' if ours.ms <= theirs.ms else 'MISSED'} ({theirs.ms / ours.ms:.2f}x)")
    return "\n".join(lines)


def _ranked(title: str, grid: list, keep: int) -> str:
    grid.sort(key=lambda t: t[0])
    return f"\n### {title}\n\n" + _timing.markdown_table(("GPU ms", "params"), [(f"{ms:.4f}", _fmt(p))
                                                                               for ms, p in grid[:keep]])


def sweep(dev: torch.device, ops: Sequence[str], rows: Sequence[str] = ("short", "wide")) -> str:
    """Grid-search the launch tables by GPU time; returns Markdown tables, fastest first."""
    out = []
    if "nrm2" in ops:
        for p in (20, 28):
            x = torch.randn(2**p, device=dev)
            grid = []
            for block_bytes, vpt, warps_per_sm in itertools.product((4096, 8192, 16384), (8, 16), (16, 32, 64)):
                params = dict(block_bytes=block_bytes, values_per_thread=vpt, warps_per_sm=warps_per_sm)
                with config.patch(launch_overrides={"nrm2": params}):
                    grid.append((_timing.gpu_ms(lambda: kernels.nrm2(x)), params))
            out.append(_ranked(f"nrm2 launch sweep, N=2^{p} float32", grid, 8))
    if "layer_norm" not in ops:
        return "\n".join(out)
    if "short" in rows:
        out.extend(_sweep_short_rows(dev))
    if "wide" in rows:
        out.extend(_sweep_wide_rows(dev))
    return "\n".join(out)


def _layer_norm_sweep_inputs(dev: torch.device, m: int, n: int, dtype: torch.dtype) -> tuple:
    x = torch.randn(m, n, device=dev, dtype=dtype)
    w, b, dy = torch.randn(n, device=dev, dtype=dtype), torch.randn(n, device=dev, dtype=dtype), torch.randn_like(x)
    _, _, rstd = torch.ops.tritondiff.layer_norm(x, [n], w, b, 1e-5)
    return x, w, b, dy, rstd


def _sweep_layer_norm(title: str, grid_params: Sequence[dict], call: Callable[[], object], keep: int) -> str:
    grid, failed = [], []
    for params in grid_params:
        with config.patch(launch_overrides={"layer_norm": params}):
            try:
                grid.append((_timing.gpu_ms(call), params))
            except triton.runtime.errors.OutOfResources as e:     # too many stages for shared memory, say
                failed.append(f"{_fmt(params)}: {str(e).splitlines()[0]}")
    return _ranked(title, grid, keep) + "".join(f"\n- failed: {line}" for line in failed)


def _sweep_wide_rows(dev: torch.device) -> list[str]:
    """Rows too wide for the row-resident kernels (4096 x 10240): the wide kernels (warps, pipelining, programs
    per SM, the final reduce's column block) against the looped ones (chunk, threads) and the resident forward."""
    out = []
    m, n = 4096, 10240
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        x, w, b, dy, rstd = _layer_norm_sweep_inputs(dev, m, n, dtype)
        fwd = [dict(max_row_wide=1, max_row_fwd=max_row, loop_block=block, values_per_thread=vpt)
               for max_row, block, vpt in itertools.product((8192, 16384), (2048, 4096), (16, 32))
               if max_row == 8192 or block == 4096]
        fwd += [dict(wide_fwd_warps=warps, wide_stages=stages, wide_fwd_programs_per_sm=per_sm)
                for warps, stages, per_sm in itertools.product((4, 8, 16), (1, 2, 3), (1, 2, 4))]
        out.append(_sweep_layer_norm(f"layer_norm forward launch sweep, {m}x{n} {_name(dtype)}", fwd,
                                     lambda: torch.ops.tritondiff.layer_norm(x, [n], w, b, 1e-5), 6))
        looped = [dict(max_row_wide=1, loop_block=block, values_per_thread=vpt)
                  for block, vpt in itertools.product((2048, 4096), (16, 32))]
        wide = [dict(wide_warps=warps, wide_stages=stages, wide_programs_per_sm=per_sm, col_block=col)
                for warps, stages, per_sm, col in itertools.product((4, 8, 16), (1, 2, 3), (1, 2), (64, 256))]
        out.append(_sweep_layer_norm(f"layer_norm backward launch sweep, {m}x{n} {_name(dtype)}", looped + wide,
                                     lambda: torch.ops.tritondiff.layer_norm_backward(dy, x, w, rstd, dtype, dtype),
                                     8))
    return out


def _sweep_short_rows(dev: torch.device) -> list[str]:
    """The seed's rows (1,152,000 x 16): forward tile and threads; backward tile, threads, grid, pipelining."""
    out = []
    m, n = 1_152_000, 16
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        x, w, b, dy, rstd = _layer_norm_sweep_inputs(dev, m, n, dtype)
        fwd = [dict(fwd_tile_bytes=tile, values_per_thread=vpt)
               for tile, vpt in itertools.product((4096, 8192), (16, 32))]
        out.append(_sweep_layer_norm(f"layer_norm forward launch sweep, {m}x{n} {_name(dtype)}", fwd,
                                     lambda: torch.ops.tritondiff.layer_norm(x, [n], w, b, 1e-5), 6))
        bwd = [dict(bwd_tile_bytes=tile, values_per_thread=vpt, programs_per_sm=per_sm, bwd_stages=stages,
                    bwd_stages_fp32=stages)
               for tile, vpt, per_sm, stages in itertools.product((4096, 8192), (16, 32), (2, 4), (2, 3))]
        out.append(_sweep_layer_norm(f"layer_norm backward launch sweep, {m}x{n} {_name(dtype)}", bwd,
                                     lambda: torch.ops.tritondiff.layer_norm_backward(dy, x, w, rstd, dtype, dtype),
                                     8))
    return out


def _fmt(params: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.norms", description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="also write the Markdown report to this file")
    parser.add_argument("--only", nargs="+", choices=("nrm2", "layer_norm"), default=("nrm2", "layer_norm"),
                        help="these ops only")
    parser.add_argument("--sweep", action="store_true",
                        help="grid-search the launch parameters of the --only ops by GPU time instead")
    parser.add_argument("--rows", nargs="+", choices=("short", "wide"), default=("short", "wide"),
                        help="with --sweep: layer norm's short rows (1152000 x 16), wide rows (4096 x 10240)")
    args = parser.parse_args(argv)
    if not _timing.require_gpu("bench.norms"):
        return 0
    dev = torch.device("cuda")
    _timing.print_header("nrm2 and layer norm: hand kernels vs eager vs Inductor vs the compiler")
    copy = _timing.copy_bandwidth_gbps()
    print(f"measured device copy bandwidth: {copy:.1f} GB/s\n")
    sys.stdout.flush()
    if args.sweep:
        text = sweep(dev, args.only, args.rows)
    else:
        rows = run((nrm2_jobs(dev) if "nrm2" in args.only else []) + (layer_norm_jobs(dev) if "layer_norm" in args.only
                                                                     else []))
        text = "\n".join([_report_rows(rows, copy), "", "Hand kernels, kernel by kernel:", "", _kernel_rows(rows), "",
                          "Hand kernels vs the compiler's generated code:", "", _versus_compiler(rows), "",
                          "Targets (issue #39):", _verdicts(rows, copy)])
    print(text)
    if args.out:
        env = _timing.environment()
        header = ("## nrm2 and layer norm: hand kernels vs eager vs Inductor vs the compiler\n\n"
                  + ", ".join(f"{k}: {v}" for k, v in env.items())
                  + f"\n\nmeasured device copy bandwidth: {copy:.1f} GB/s\n\n")
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            f.write(header + text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
