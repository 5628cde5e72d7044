"""Stress of split reductions that finish in their last partial program (compiler.config.split_last_program_final),
on a GPU: the arrival counters and the memory ordering between the partial programs' stores and the last
program's reads.

1. Back to back: the compiled nrm2 (2^20 and 2^24 elements) and a 48-row split row sum, CALLS calls each, every
   output compared bit for bit with the first call's and with the two-kernel form (knob off).  A lost store or a
   read of a stale partial shows as a different value; a counter left set, as an unwritten output.
2. Two streams at once: the same compiled function launched alternately on two streams without waiting, each
   stream's results checked after; each stream must have its own counters (runtime.Semaphores).

3. Latency of nrm2 2^20 in both forms (``latency``).

    PYTHONPATH=. TRITONDIFF_DEVICE=cuda python reports/gpu/2026-11-27-session19/scripts/split_stress.py [CALLS]
"""
import sys

import torch

import compiler
from compiler import workloads


def row_sums(x):
    return x.sum(-1) * 0.5


def main(calls: int) -> int:
    bad = 0
    cases = [(workloads.nrm2, torch.randn(1 << 20, device="cuda")),
             (workloads.nrm2, torch.randn(1 << 24, device="cuda")),
             (row_sums, torch.randn(48, 200_003, device="cuda"))]
    for fn, x in cases:
        with compiler.config.patch(split_last_program_final=False):
            two = compiler.compile_fresh(fn)(x).clone()
        compiled = compiler.compile_fresh(fn)
        first = compiled(x).clone()
        outs = [compiled(x) for _ in range(calls)]
        torch.cuda.synchronize()
        differ = sum(not torch.equal(o, first) for o in outs)
        err = float((first.double() - fn(x.double()).to(first.device)).abs().max())
        print(f"{fn.__name__} {tuple(x.shape)}: {calls} calls, {differ} differ from the first; "
              f"last-program vs two-kernel max |diff| {float((first - two).abs().max()):.3g}; vs float64 {err:.3g}")
        bad += differ
        # two streams, interleaved without waiting
        s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
        torch.cuda.synchronize()
        got = {0: [], 1: []}
        for i in range(calls):
            for j, s in enumerate((s1, s2)):
                with torch.cuda.stream(s):
                    got[j].append(compiled(x))
        torch.cuda.synchronize()
        wrong = sum(not torch.equal(o, first) for j in (0, 1) for o in got[j])
        print(f"  two streams: {2 * calls} calls, {wrong} differ from the first")
        bad += wrong
        torch._dynamo.reset()
    print("FAIL" if bad else "OK", bad)
    return 1 if bad else 0


def latency(calls: int, rounds: int = 7) -> None:
    """nrm2 2^20 compiled twice, the last-program form (default) and the two-kernel form (knob off), each
    called ``calls`` times back to back per round, rounds interleaved: wall time per call with one synchronize
    at the end (the launch path's cost: the GPU work is 3 us), and the host time to enqueue one call."""
    import time
    x = torch.randn(1 << 20, device="cuda")
    forms = {}
    for name, on in (("last-program", True), ("two-kernel", False)):
        with compiler.config.patch(split_last_program_final=on):
            forms[name] = compiler.compile_fresh(workloads.nrm2)
            forms[name](x)              # compiled under the knob; later calls find the executable by config key
    # the knob is part of each graph's cache key: call each form under the knob it was compiled with
    knobs = {"last-program": True, "two-kernel": False}
    per_call = {name: [] for name in forms}
    for _ in range(rounds):
        for name, fn in forms.items():
            with compiler.config.patch(split_last_program_final=knobs[name]):
                for _ in range(20):
                    fn(x)
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                for _ in range(calls):
                    fn(x)
                host = (time.perf_counter() - t0) / calls
                torch.cuda.synchronize()
                wall = (time.perf_counter() - t0) / calls
            per_call[name].append((wall, host))
    for name, vals in per_call.items():
        walls = sorted(v[0] for v in vals)
        hosts = sorted(v[1] for v in vals)
        print(f"latency {name}: {walls[len(walls) // 2] * 1e6:.1f} us per call back to back (median of {rounds} "
              f"rounds of {calls}; min {walls[0] * 1e6:.1f}), host {hosts[len(hosts) // 2] * 1e6:.1f} us to enqueue")


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    rc = main(n)
    latency(n)
    sys.exit(rc)
