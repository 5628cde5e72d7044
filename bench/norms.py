"""Benchmark nrm2 and layer norm: our kernels vs eager torch vs torch.compile (Inductor), one run.

    python -m bench.norms [--out reports/norms-h100.md] [--sweep]

Prints a Markdown report: the environment header, the measured device copy
bandwidth, then per case and implementation the median latency, the achieved
bandwidth (minimum bytes the operation must move / time) and its share of the
copy bandwidth, and the targets of issue #4 with a met / missed verdict.
``--sweep`` adds a grid search over the launch parameters of both kernels
(through ``kernels.config.launch_overrides``) so the tables in
``kernels/nrm2.py`` and ``kernels/layer_norm.py`` can be re-tuned for a device.
On a machine without a GPU it prints a notice and exits 0.
"""
from __future__ import annotations

import argparse
import itertools
import os
import sys
from dataclasses import dataclass
from typing import Callable

import torch

from tritondiff import kernels
from tritondiff.base import timing as _timing
from tritondiff.kernels.config import config

# Issue #4 targets: ours must be at least as fast as this implementation.
TARGETS = {
    ("nrm2", "N=2^28 float32"): "eager",
    ("layer_norm fwd+bwd", "1152000x16 float32"): "inductor",
    ("layer_norm fwd+bwd", "1152000x16 float16"): "inductor",
}


@dataclass
class Row:
    op: str
    case: str
    impl: str
    ms: float
    nbytes: int
    max_err: float


def _nrm2_cases(dev: torch.device) -> list[tuple[str, torch.Tensor]]:
    return [(f"N=2^{p} float32", torch.randn(2**p, device=dev)) for p in (20, 28)]


def _layer_norm_cases(dev: torch.device) -> list[tuple[str, tuple[int, int], torch.dtype]]:
    return [("1152000x16 float32", (1_152_000, 16), torch.float32),
            ("1152000x16 float16", (1_152_000, 16), torch.float16),
            ("4096x10240 float16", (4096, 10240), torch.float16)]


def bench_nrm2(dev: torch.device) -> list[Row]:
    rows = []
    inductor = torch.compile(_vector_norm, dynamic=False)
    for case, x in _nrm2_cases(dev):
        ref = torch.linalg.vector_norm(x.double()).item()
        impls: dict[str, Callable[[], torch.Tensor]] = {
            "ours": lambda: kernels.nrm2(x),
            "eager": lambda: torch.linalg.vector_norm(x),
            "inductor": lambda: inductor(x),
        }
        for impl, fn in impls.items():
            err = abs(fn().item() - ref) / ref
            rows.append(Row("nrm2", case, impl, _timing.bench(fn).median_ms, x.numel() * x.element_size(), err))
    return rows


def _fwd_bwd(fn: Callable, x, w, b, dy) -> Callable[[], tuple]:
    def run():
        y = fn(x, (x.shape[-1],), w, b)
        return (y,) + torch.autograd.grad(y, (x, w, b), dy)
    return run


def bench_layer_norm(dev: torch.device) -> list[Row]:
    rows = []
    inductor = torch.compile(_layer_norm, dynamic=False)
    for case, (m, n), dtype in _layer_norm_cases(dev):
        x = torch.randn(m, n, device=dev, dtype=dtype, requires_grad=True)
        w = torch.randn(n, device=dev, dtype=dtype, requires_grad=True)
        b = torch.randn(n, device=dev, dtype=dtype, requires_grad=True)
        dy = torch.randn(m, n, device=dev, dtype=dtype)
        # Minimum traffic: forward reads x, writes y; backward reads x and dy,
        # writes dx; plus mean/rstd (8 bytes a row out, 4 back in).
        nbytes = 5 * m * n * x.element_size() + 12 * m
        ref = [t.detach() for t in _fwd_bwd(_layer_norm, *_double(x, w, b), dy.double())()]
        impls = {
            "ours": _fwd_bwd(kernels.layer_norm, x, w, b, dy),
            "eager": _fwd_bwd(_layer_norm, x, w, b, dy),
            "inductor": _fwd_bwd(inductor, x, w, b, dy),
        }
        for impl, fn in impls.items():
            out = fn()
            err = max(((o.double() - r).abs().max() / r.abs().max().clamp_min(1e-30)).item() for o, r in zip(out, ref))
            rows.append(Row("layer_norm fwd+bwd", case, impl, _timing.bench(fn).median_ms, nbytes, err))
        # Our two ops alone (no autograd or Python wrapper): GPU time vs host overhead.
        xd, wd, bd = x.detach(), w.detach(), b.detach()
        _, _, rstd = torch.ops.tritondiff.layer_norm(xd, [n], wd, bd, 1e-5)
        fwd = lambda: torch.ops.tritondiff.layer_norm(xd, [n], wd, bd, 1e-5)  # noqa: E731
        bwd = lambda: torch.ops.tritondiff.layer_norm_backward(dy, xd, wd, rstd, dtype, dtype)  # noqa: E731
        rows.append(Row("layer_norm fwd op", case, "ours", _timing.bench(fwd).median_ms,
                        2 * m * n * x.element_size() + 8 * m, float("nan")))
        rows.append(Row("layer_norm bwd op", case, "ours", _timing.bench(bwd).median_ms,
                        3 * m * n * x.element_size() + 4 * m, float("nan")))
        del x, w, b, dy
        torch.cuda.empty_cache()
    return rows


def _vector_norm(x):
    return torch.linalg.vector_norm(x)


def _layer_norm(x, normalized_shape, w, b):
    return torch.nn.functional.layer_norm(x, normalized_shape, w, b)


def _double(x, w, b):
    return [t.detach().double().requires_grad_() for t in (x, w, b)]


def _report_rows(rows: list[Row], copy_gbps: float) -> str:
    table = [(r.op, r.case, r.impl, r.ms, _timing.gbps(r.nbytes, r.ms), 100 * _timing.gbps(r.nbytes, r.ms) / copy_gbps,
              "-" if r.max_err != r.max_err else f"{r.max_err:.1e}") for r in rows]
    return _timing.markdown_table(("op", "case", "impl", "median ms", "GB/s", "% copy BW", "max rel err"), table)


def _verdicts(rows: list[Row]) -> str:
    by = {(r.op, r.case, r.impl): r.ms for r in rows}
    lines = []
    for (op, case), rival in TARGETS.items():
        ours, theirs = by.get((op, case, "ours")), by.get((op, case, rival))
        if ours is None or theirs is None:
            continue
        verdict = "met" if ours <= theirs else "MISSED"
        lines.append(f"- {op} {case}: ours {ours:.3f} ms vs {rival} {theirs:.3f} ms: {verdict} "
                     f"({theirs / ours:.2f}x)")
    return "\n".join(lines)


def sweep(dev: torch.device) -> str:
    """Grid-search the launch tables; returns Markdown tables, fastest first."""
    out = []
    x = torch.randn(2**28, device=dev)
    grid = []
    for block_bytes, vpt, warps_per_sm in itertools.product((8192, 16384, 32768, 65536), (8, 16, 32), (16, 32, 64)):
        params = dict(block_bytes=block_bytes, values_per_thread=vpt, warps_per_sm=warps_per_sm)
        with config.patch(launch_overrides={"nrm2": params}):
            grid.append((_timing.bench(lambda: kernels.nrm2(x)).median_ms, params))
    grid.sort(key=lambda t: t[0])
    out.append("### nrm2 launch sweep, N=2^28 float32\n")
    out.append(_timing.markdown_table(("median ms", "params"), [(ms, _fmt(p)) for ms, p in grid[:10]]))
    del x
    for dtype in (torch.float32, torch.float16):
        m, n = 1_152_000, 16
        x = torch.randn(m, n, device=dev, dtype=dtype)
        w, b, dy = torch.randn(n, device=dev, dtype=dtype), torch.randn(n, device=dev, dtype=dtype), torch.randn_like(x)
        _, _, rstd = torch.ops.tritondiff.layer_norm(x, [n], w, b, 1e-5)
        grid = []
        for fwd_tile, vpt in itertools.product((4096, 8192, 16384, 32768), (8, 16, 32)):
            params = dict(fwd_tile_bytes=fwd_tile, values_per_thread=vpt)
            with config.patch(launch_overrides={"layer_norm": params}):
                grid.append((_timing.bench(lambda: torch.ops.tritondiff.layer_norm(x, [n], w, b, 1e-5)).median_ms,
                             params))
        grid.sort(key=lambda t: t[0])
        out.append(f"\n### layer_norm forward launch sweep, 1152000x16 {dtype}\n")
        out.append(_timing.markdown_table(("median ms", "params"), [(ms, _fmt(p)) for ms, p in grid[:6]]))
        grid = []
        for bwd_tile, vpt, per_sm in itertools.product((2048, 4096, 8192, 16384), (8, 16, 32), (2, 4, 8)):
            params = dict(bwd_tile_bytes=bwd_tile, values_per_thread=vpt, programs_per_sm=per_sm)
            with config.patch(launch_overrides={"layer_norm": params}):
                grid.append((_timing.bench(lambda: torch.ops.tritondiff.layer_norm_backward(
                    dy, x, w, rstd, dtype, dtype)).median_ms, params))
        grid.sort(key=lambda t: t[0])
        out.append(f"\n### layer_norm backward launch sweep, 1152000x16 {dtype}\n")
        out.append(_timing.markdown_table(("median ms", "params"), [(ms, _fmt(p)) for ms, p in grid[:6]]))
    return "\n".join(out)


def _fmt(params: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.norms", description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="also write the Markdown report to this file")
    parser.add_argument("--sweep", action="store_true", help="grid-search the launch parameters too")
    args = parser.parse_args(argv)
    if not _timing.require_gpu("bench.norms"):
        return 0
    dev = torch.device("cuda")
    _timing.print_header("nrm2 and layer norm: ours vs eager vs Inductor")
    copy = _timing.copy_bandwidth_gbps()
    print(f"measured device copy bandwidth: {copy:.1f} GB/s\n")
    sys.stdout.flush()
    rows = bench_nrm2(dev) + bench_layer_norm(dev)
    body = [_report_rows(rows, copy), "", "Targets (issue #4):", _verdicts(rows)]
    if args.sweep:
        body += ["", sweep(dev)]
    text = "\n".join(body)
    print(text)
    if args.out:
        env = _timing.environment()
        header = ("## nrm2 and layer norm: ours vs eager vs Inductor\n\n"
                  + ", ".join(f"{k}: {v}" for k, v in env.items())
                  + f"\n\nmeasured device copy bandwidth: {copy:.1f} GB/s\n\n")
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            f.write(header + text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
