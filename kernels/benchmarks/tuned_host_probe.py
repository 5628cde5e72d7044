"""Why a tuned compiled function shows more host time than the default one (session 8's open question).

    python -m kernels.benchmarks.tuned_host_probe

For nrm2 2^20 and softmax 8192 x 8192 it times, in interleaved rounds, the host time to enqueue one call
(``_timing.host_ms``) of: the default compiled function; the same under ``config.patch`` of a knob to the
value it already has (the cost of a benchmark variant's wrapper alone); and a function compiled and run
with ``autotune=True`` patched around each call (the ``tuned`` variant).  It then lists each tuned
executable's fast-loop steps and how each of its kernels relaunches (``fire.via``: torch's static
launcher or Triton's).  Without a GPU it says so and exits 0.
"""
from __future__ import annotations

import statistics
import sys

import torch

from kernels.benchmarks import _timing


def main() -> int:
    if not _timing.require_gpu("kernels.benchmarks.tuned_host_probe"):
        return 0
    import compiler
    from compiler import runtime, workloads
    made: list = []
    real = runtime.Executable._make_fast
    runtime.Executable._make_fast = lambda self: made.append(self) or real(self)
    cases = {"nrm2 2^20": (workloads.nrm2, (torch.randn(2 ** 20, device="cuda"),)),
             "softmax 8192^2": (workloads.softmax, (torch.randn(8192, 8192, device="cuda"),))}
    for name, (fn, args) in cases.items():
        plain = compiler.compile_fresh(fn)
        tuned_fn = compiler.compile_fresh(fn)
        knob = compiler.config.fp_fusion

        def same_knob(*a):
            with compiler.config.patch(fp_fusion=knob):
                return plain(*a)

        def tuned(*a):
            with compiler.config.patch(autotune=True):
                return tuned_fn(*a)
        calls = {"default": plain, "default under patch": same_knob, "tuned under patch": tuned}
        start = len(made)
        for f in calls.values():
            for _ in range(3):
                f(*args)
        torch.cuda.synchronize()
        times: dict[str, list[float]] = {k: [] for k in calls}
        for _ in range(7):
            for k, f in calls.items():
                times[k].append(_timing.host_ms(lambda: f(*args), iters=50) * 1e3)
        print(f"{name}: " + "; ".join(f"{k} {statistics.median(v):.1f} us" for k, v in times.items()))
        for exe in made[start:]:
            fast = exe._fast
            steps = [op[0] for op in fast.ops] if fast else ["(no fast loop)"]
            vias = [f"{op[3]}: " + ",".join(getattr(f, "via", "?") for f in op[1]._compiled.values())
                    for op in (fast.ops if fast else []) if op[0] == "launch"]
            print(f"   {exe.generated.name}: steps {steps}; relaunch via {vias}")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
