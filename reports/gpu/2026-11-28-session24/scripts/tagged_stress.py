"""Stress of split reductions whose last program finishes through tagged partials (compiler.config.
split_last_program_sync="tagged"), on a GPU: no fence orders a program's partials before its count, so the last
program must never take a stale or missing partial for a fresh one.

For nrm2 at 2^20, 2^24 and 2^26 elements and a 48-row split row sum (several row blocks, XBLOCK > 1):
1. CALLS calls back to back, alternating two inputs A and B, so that a slot left from the call before holds the
   other input's partial: every output is compared bit for bit with the first output for its input, and with
   the fence form (split_last_program_sync="fence"), which sums the partials in the same order on the same
   tile when it splits alike (its short splits are aimed at split_short_tagged_programs_per_sm here too; call 5
   compared nrm2 2^20 at 128 fence partials against 256 tagged ones, which differ in the last bit).  Equality with the two-kernel form (split_last_program_final=False) is printed, not required: its final
   kernel reduces the same partials at other warps, and Triton's reduction tree follows the layout.
2. Two streams at once, the same alternation on each, without waiting: each stream has its own counters and
   slots (runtime.Semaphores).
3. After all calls, every counter and slot is zero (runtime.semaphores_left_set).

    PYTHONPATH=. TRITONDIFF_DEVICE=cuda python reports/gpu/2026-11-28-session24/scripts/tagged_stress.py [CALLS]

Calls 4-6 ran it while the tagged form was the default.  Since 4e6af6b the default is the fence form, so the
script now runs under split_last_program_sync="tagged" itself (added after call 7; nothing else changed).
"""
import sys

import torch

import compiler
from compiler import runtime, workloads


def row_sums(x):
    return x.sum(-1) * 0.5


def main(calls: int) -> int:
    bad = 0
    mark = runtime.semaphores_mark()
    cases = [(workloads.nrm2, (1 << 20,)), (workloads.nrm2, (1 << 24,)), (workloads.nrm2, (1 << 26,)),
             (row_sums, (48, 200_003))]
    for fn, shape in cases:
        inputs = [torch.randn(*shape, device="cuda"), torch.rand(*shape, device="cuda") * 3]
        refs = {}
        same_split = compiler.config.split_short_tagged_programs_per_sm
        for name, knobs in (("fence", dict(split_last_program_sync="fence", split_short_programs_per_sm=same_split)),
                            ("two-kernel", dict(split_last_program_final=False))):
            with compiler.config.patch(**knobs):
                f = compiler.compile_fresh(fn)
                refs[name] = [f(x).clone() for x in inputs]
        case_mark = runtime.semaphores_mark()
        compiled = compiler.compile_fresh(fn)
        first = [compiled(x).clone() for x in inputs]
        tagged = any(t.dtype == torch.int64 for sems in list(runtime._LIVE_SEMAPHORES) if sems.serial >= case_mark
                     for t in sems._made.values())
        same = {name: all(torch.equal(a, b) for a, b in zip(first, ref)) for name, ref in refs.items()}
        outs = [(i % 2, compiled(inputs[i % 2])) for i in range(calls)]
        torch.cuda.synchronize()
        differ = sum(not torch.equal(o, first[i]) for i, o in outs)
        err = max(float((f.double() - fn(x.double())).abs().max() / fn(x.double()).abs().max())
                  for f, x in zip(first, inputs))
        print(f"{fn.__name__} {shape}: tagged={tagged}; {calls} calls alternating 2 inputs, {differ} differ "
              f"from the first for their input; bitwise equal to fence {same['fence']}, two-kernel "
              f"{same['two-kernel']}; vs float64 {err:.3g} (relative to the largest)")
        bad += differ + (not same["fence"]) + (not tagged)
        s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
        torch.cuda.synchronize()
        got = {0: [], 1: []}
        for i in range(calls):
            for j, s in enumerate((s1, s2)):
                with torch.cuda.stream(s):
                    got[j].append(((i + j) % 2, compiled(inputs[(i + j) % 2])))
        torch.cuda.synchronize()
        wrong = sum(not torch.equal(o, first[i]) for j in (0, 1) for i, o in got[j])
        print(f"  two streams: {2 * calls} calls, {wrong} differ")
        bad += wrong
        torch._dynamo.reset()
    left = runtime.semaphores_left_set(mark)
    print(f"state left non-zero: {left or 'none'}")
    bad += len(left)
    print("FAIL" if bad else "OK", bad)
    return 1 if bad else 0


if __name__ == "__main__":
    with compiler.config.patch(split_last_program_sync="tagged"):
        sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000))
