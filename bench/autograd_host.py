"""Where layer norm's fwd+bwd host time goes through the eager fast path (a GPU probe, issue #39).

    python -m bench.autograd_host [--m 8] [--n 10240]

Host time per call (enqueue only; a row of 8 keeps the GPU idle, so the wall time is the host's) of: one
``torch.empty``, one cached Triton launch, the forward and backward launchers called directly, the backward
launcher on another Python thread, ``kernels.layer_norm`` forward and forward+backward (also with autograd's
device threads switched off), ``F.layer_norm`` forward+backward, and a do-nothing ``torch.autograd.Function``
with two ATen ops (the floor any Python autograd path pays).  Best of three runs of 300 calls each.
"""
from __future__ import annotations

import argparse
import importlib
import sys
import threading
import time

import torch
import torch.nn.functional as F

from tritondiff.base import timing as _timing


def host_us(fn, iters: int = 300) -> float:
    """Best of three: microseconds of host time to enqueue one call of ``fn``."""
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        best = min(best, (time.perf_counter() - t0) / iters * 1e6)
        torch.cuda.synchronize()
    return best


def on_thread(fn) -> float:
    out: list[float] = []
    thread = threading.Thread(target=lambda: out.append(host_us(fn)))
    thread.start()
    thread.join()
    return out[0]


class _TwoOps(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 1

    @staticmethod
    def backward(ctx, g):
        return g * 1


def rows(m: int, n: int, dtype: torch.dtype) -> list[tuple[str, float]]:
    import triton
    import triton.language as tl

    from tritondiff import kernels

    ln = importlib.import_module("tritondiff.kernels.layer_norm")
    launch = importlib.import_module("tritondiff.kernels.launch")

    @triton.jit
    def _copy(x_ptr, n_elements, BLOCK: tl.constexpr):
        i = tl.arange(0, BLOCK)
        tl.store(x_ptr + i, tl.load(x_ptr + i, mask=i < n_elements), mask=i < n_elements)

    dev = torch.device("cuda")
    x = torch.randn(m, n, device=dev, dtype=dtype, requires_grad=True)
    w = torch.randn(n, device=dev, dtype=dtype, requires_grad=True)
    b = torch.randn(n, device=dev, dtype=dtype, requires_grad=True)
    dy = torch.randn(m, n, device=dev, dtype=dtype)
    xd, wd, bd = x.detach(), w.detach(), b.detach()
    _, _, rstd = ln._forward(xd, wd, bd, 1e-5)
    small = torch.zeros(16, device=dev)

    def backward_direct():
        return ln._backward(dy, xd, wd, rstd, dtype, dtype)

    def ours():
        return torch.autograd.grad(kernels.layer_norm(x, (n,), w, b), (x, w, b), dy)

    def eager():
        return torch.autograd.grad(F.layer_norm(x, (n,), w, b), (x, w, b), dy)

    def two_ops():
        return torch.autograd.grad(_TwoOps.apply(x), (x,), dy)

    out = [("torch.empty (m, n)", host_us(lambda: torch.empty(m, n, device=dev, dtype=dtype))),
           ("one cached Triton launch", host_us(lambda: launch.launch(_copy, (1,), small, 16, BLOCK=16))),
           ("forward launchers, called directly", host_us(lambda: ln._forward(xd, wd, bd, 1e-5))),
           ("backward launchers, called directly", host_us(backward_direct)),
           ("backward launchers, on another thread", on_thread(backward_direct)),
           ("kernels.layer_norm forward, no grad", host_us(lambda: kernels.layer_norm(xd, (n,), wd, bd))),
           ("kernels.layer_norm fwd+bwd", host_us(ours))]
    with torch.autograd.set_multithreading_enabled(False):
        out.append(("kernels.layer_norm fwd+bwd, autograd threads off", host_us(ours)))
    out += [("F.layer_norm fwd+bwd", host_us(eager)),
            ("autograd.Function with two ATen ops, fwd+bwd", host_us(two_ops))]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.autograd_host", description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=int, default=8, help="rows (default 8: the GPU stays idle)")
    parser.add_argument("--n", type=int, default=10240, help="row length (default 10240)")
    parser.add_argument("--dtype", choices=("float16", "bfloat16", "float32"), default="float16")
    args = parser.parse_args(argv)
    if args.m < 1 or args.n < 1:
        parser.error("--m and --n must be positive")
    if not _timing.require_gpu("bench.autograd_host"):
        return 0
    _timing.print_header(f"layer norm host time, {args.m} x {args.n} {args.dtype}")
    table = rows(args.m, args.n, getattr(torch, args.dtype))
    print(_timing.markdown_table(("what", "host us per call"), [(k, f"{v:.1f}") for k, v in table]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
