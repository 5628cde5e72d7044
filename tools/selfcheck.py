"""Unattended end-to-end check of the compiler on whatever device the harness picked.

    python -m tools.selfcheck [--full] [--fuzz 50] [--sweep]

Prints the device, versions and date, then one table row per workload: compiled vs eager
judged by the harness oracle (float64 truth), with wall times of the compiled call (after
a warm-up call) and of eager.  ``--full`` uses the seed shapes (layer norm at 1,152,000 x 16,
reductions past 2^20; slow in the interpreter, meant for a GPU); ``--fuzz N`` runs N graph
fuzzer programs; ``--sweep`` adds the OpInfo pre-merge subset.  Exit status 1 on any failure.
"""
from __future__ import annotations

import argparse
import datetime
import platform
import sys
import time
from typing import Any, Callable, Optional, Sequence

import torch

from tritondiff.base import device
from tritondiff.harness.oracle import compare

from tritondiff.harness import graph_fuzz as fuzz
from tritondiff.compiler import workloads
from tritondiff.compiler.backend import compile_fresh
from tritondiff.compiler.config import config
from tritondiff.compiler.counters import counters
from tritondiff.compiler.codegen.reduction import FORCIBLE
from tritondiff.compiler.exc import ReductionTooLarge


def _sync() -> None:
    if torch.cuda.is_available() and device.torch_device().type == "cuda":
        torch.cuda.synchronize()


def _timed(fn: Callable, *args: Any) -> tuple[Any, float]:
    _sync()
    start = time.perf_counter()
    out = fn(*args)
    _sync()
    return out, time.perf_counter() - start


def _randn(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g, device="cpu").to(dtype).to(device.torch_device())


class _FwdBwd:
    """(y, grads) of ``fn`` for a cotangent given as the last argument; only ``fn`` is compiled."""

    def __init__(self, fn: Callable):
        self.fn = fn

    def __call__(self, *args):
        return self.run(self.fn, *args)

    @staticmethod
    def run(fn: Callable, *args):
        leaves = [a.detach().requires_grad_() for a in args[:-1]]
        out = fn(*leaves)
        return (out.detach(),) + torch.autograd.grad(out, leaves, args[-1])

    def compiled(self, **kwargs: Any) -> Callable:
        compiled_fn = compile_fresh(self.fn, **kwargs)
        return lambda *args: self.run(compiled_fn, *args)


def _fwd_bwd(fn: Callable) -> _FwdBwd:
    return _FwdBwd(fn)


def cases(full: bool) -> list[tuple[str, Callable, list, dict]]:
    m = 1_152_000 if full else 4231
    big = 2**21 + 7 if full else 2**15 + 7
    perm = workloads.mhc_permutations().to(device.torch_device())
    out = []
    for strategy in ("auto",) + FORCIBLE:
        ln = [_randn(m, 16, seed=1), _randn(16, seed=2), _randn(16, seed=3), _randn(m, 16, seed=4)]
        out.append((f"layer_norm fwd+bwd {m}x16 [{strategy}]", _fwd_bwd(workloads.layer_norm), ln,
                    {"reduction_strategy": strategy}))
    for strategy in [s for s in ("auto",) + FORCIBLE if s != "persistent"]:     # 2^21 elements: no one block
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            x = _randn(big, dtype=dtype, seed=5)
            out.append((f"sum/amax/argmax over {big} {str(dtype)[6:]} [{strategy}]",
                        lambda x: (x.float().sum(), x.amax(), x.argmax()), [x], {"reduction_strategy": strategy}))
    out.append(("softmax 4096x1000", workloads.softmax, [_randn(4096, 1000, seed=6)], {}))
    out.append(("rms_norm 4096x1024 bf16", workloads.rms_norm,
                [_randn(4096, 1024, dtype=torch.bfloat16, seed=7), _randn(1024, dtype=torch.bfloat16, seed=8)], {}))
    out.append((f"nrm2 {big}", workloads.nrm2, [_randn(big, seed=9)], {}))
    t = 8192 if full else 256
    xs, w = _randn(t, 4, 64, seed=10), _randn(32, 256, seed=11) * 0.1
    out.append((f"mhc_lite layer fwd+bwd T={t}", _fwd_bwd(lambda xs, w: workloads.mhc_layer(xs, w, perm)),
                [xs, w, _randn(t, 4, 64, seed=12)], {}))
    return out


def run_case(name: str, fn: Callable, args: Sequence[torch.Tensor], knobs: dict) -> dict:
    eager, t_eager = _timed(fn, *args)
    truth = fn(*[a.double() if a.dtype.is_floating_point else a for a in args])
    counters.clear()
    row = {"name": name, "eager_s": t_eager}
    try:
        with config.patch(**knobs):
            compiled = fn.compiled(dynamic=False) if isinstance(fn, _FwdBwd) else compile_fresh(fn, dynamic=False)
            got, t_first = _timed(compiled, *args)
            got, t_compiled = _timed(compiled, *args)
    except ReductionTooLarge as e:
        # A forced persistent reduction past the block limit must be refused with this error.
        expected = knobs.get("reduction_strategy") == "persistent"
        row.update(status="ok" if expected else "ERROR", message=("refused as designed: " if expected else "")
                   + f"{type(e).__name__}: {str(e).splitlines()[0][:200]}")
        return row
    except Exception as e:  # noqa: BLE001  (reported in the table)
        row.update(status="ERROR", message=f"{type(e).__name__}: {str(e).splitlines()[0][:200]}")
        return row
    verdict = compare(got, eager, truth)
    row.update(status="ok" if verdict.passed else "FAIL", message=verdict.message if not verdict.passed else "",
               first_s=t_first, compiled_s=t_compiled, kernels=counters["kernels_generated"],
               strategies=",".join(k.split(".")[1] for k in counters.with_prefix("reduction_strategy")))
    return row


def run_fuzz(n: int) -> list[dict]:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
    rows = []

    @settings(max_examples=n, deadline=None, suppress_health_check=list(HealthCheck), derandomize=False)
    @given(fuzz.programs(), st.integers(0, 2**16))
    def one(program, seed):
        result = fuzz.check_program(program, seed)
        if not result.passed:
            rows.append({"program": repr(program), "seed": seed, "message": result.message})
    try:
        one()
    except Exception as e:  # noqa: BLE001
        rows.append({"program": "?", "seed": None, "message": f"{type(e).__name__}: {e}"})
    return rows


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.selfcheck", description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="the seed shapes (layer norm at 1,152,000 x 16)")
    parser.add_argument("--fuzz", type=int, default=0, help="graph fuzzer programs to run")
    parser.add_argument("--sweep", action="store_true", help="also the OpInfo pre-merge subset")
    args = parser.parse_args(argv)
    import triton
    print(f"tritondiff compiler selfcheck, {datetime.datetime.now().isoformat(timespec='seconds')}")
    print(f"device: {device.describe()}; torch {torch.__version__}; triton {triton.__version__}; "
          f"python {platform.python_version()}")
    failures = 0
    print(f"\n| workload | status | eager s | compiled s (1st) | kernels | strategies | message |")
    print("|---|---|---:|---:|---:|---|---|")
    for name, fn, fargs, knobs in cases(args.full):
        row = run_case(name, fn, fargs, knobs)
        failures += row["status"] != "ok"
        print(f"| {row['name']} | {row['status']} | {row['eager_s']:.4f} | "
              f"{row.get('compiled_s', float('nan')):.4f} ({row.get('first_s', float('nan')):.1f}) | "
              f"{row.get('kernels', '')} | {row.get('strategies', '')} | {row.get('message', '')} |", flush=True)
    if args.fuzz:
        bad = run_fuzz(args.fuzz)
        print(f"\ngraph fuzzer: {args.fuzz} programs, {len(bad)} failing")
        for b in bad[:10]:
            print(f"seed {b['seed']}: {b['message']}\n{b['program']}")
        failures += len(bad)
    if args.sweep:
        from tools import opinfo_sweep
        results = opinfo_sweep.sweep(opinfo_sweep.PREMERGE_OPS, max_samples=3, log=None)
        t = opinfo_sweep.totals(results)
        print("\nOpInfo pre-merge subset: " + ", ".join(f"{k}: {v}" for k, v in t["samples"].items()))
        for r in results:
            for s in r.samples:
                if s.status in ("mismatched", "failed to compile"):
                    print(f"  {r.name}: {s.status}: {s.detail}")
                    failures += 1
    print(f"\n{'FAILED' if failures else 'all passed'} ({failures} failure(s))")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
