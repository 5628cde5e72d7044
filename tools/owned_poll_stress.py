"""Stress of split reductions whose last program polls tagged partials, one thread to a slot
(``compiler.config.split_last_program_sync="tagged"``, the default), on a GPU.

For nrm2 at 2^20 (256 partials at 8 warps, an unpadded 256-slot poll), 2^20 at one program per SM (128 partials
at 16 warps, the poll padded to 512), 2^20 at forced 16 warps (256 partials, padded to 512), 2^24, 2^26 and 2^28
(streaming partials at 32 warps, padded), and a 48-row split row sum (XBLOCK > 1):
1. CALLS calls back to back, alternating two inputs A and B, so that a slot left from the call before would hold
   the other input's partial: every output must equal the first output for its input bit for bit, and the
   float64 result within 1e-5 (relative to the largest).  Equality with the fence form
   (split_last_program_sync="fence", split alike) is printed, not required: where the warps or the poll's width
   differ, Triton's reduction tree differs too.
2. Two streams at once, the same alternation on each, without waiting (each stream has its own slots).
3. After all calls, every counter and slot is zero (runtime.semaphores_left_set).
The runtime checks each compiled poll's layout on its first launch (compiler.layouts) and raises if a slot is
shared; the script reports how many kernels it checked.

    TRITONDIFF_DEVICE=cuda python -m tools.owned_poll_stress [CALLS]     # exit 1 on any difference

On a machine without a GPU it prints a notice and exits 0.
"""
import sys

import torch

from tritondiff import compiler
from tritondiff.base import timing
from tritondiff.compiler import runtime, workloads


def row_sums(x):
    return x.sum(-1) * 0.5


def main(calls: int) -> int:
    bad = 0
    mark = runtime.semaphores_mark()
    checked = []
    original = runtime.Executable._check_owned

    def counting(self, spec, *args, **kwargs):      # (spec, launched) in call 2; (spec, key, launched, required)
        seen = self._owned_binaries if hasattr(self, "_owned_binaries") else self._owned_checked
        before = len(seen)
        original(self, spec, *args, **kwargs)
        if len(seen) > before:
            checked.append((spec.name, spec.num_warps, spec.meta.get("splits"), spec.meta.get("max_warps")))
    runtime.Executable._check_owned = counting
    cases = [("2^20", workloads.nrm2, (1 << 20,), {}),
             ("2^20 pps1", workloads.nrm2, (1 << 20,), dict(split_short_tagged_programs_per_sm=1)),
             ("2^20 w16", workloads.nrm2, (1 << 20,), dict(num_warps=16)),
             ("2^24", workloads.nrm2, (1 << 24,), {}), ("2^26", workloads.nrm2, (1 << 26,), {}),
             ("2^28", workloads.nrm2, (1 << 28,), {}), ("rows 48", row_sums, (48, 200_003), {})]
    for label, fn, shape, knobs in cases:
        inputs = [torch.randn(*shape, device="cuda"), torch.rand(*shape, device="cuda") * 3]
        with compiler.config.patch(split_last_program_sync="fence", **knobs):
            f = compiler.compile_fresh(fn)
            fence = [f(x).clone() for x in inputs]
        with compiler.config.patch(split_last_program_sync="tagged", **knobs):
            compiled = compiler.compile_fresh(fn)
            first = [compiled(x).clone() for x in inputs]
            outs = [(i % 2, compiled(inputs[i % 2])) for i in range(calls)]
            torch.cuda.synchronize()
            differ = sum(not torch.equal(o, first[i]) for i, o in outs)
            truth = [fn(x.double()) for x in inputs]
            err = max(float((f.double() - t).abs().max() / t.abs().max()) for f, t in zip(first, truth))
            same = all(torch.equal(a, b) for a, b in zip(first, fence))
            print(f"{label} {shape}: {calls} calls alternating 2 inputs, {differ} differ from the first for their "
                  f"input; vs float64 {err:.3g} (relative to the largest); bit-equal to fence {same}")
            bad += differ + (err > 1e-5)
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
        del inputs, outs, got
        torch._dynamo.reset()
    left = runtime.semaphores_left_set(mark)
    print(f"state left non-zero: {left or 'none'}")
    print(f"polls whose compiled layout was checked (kernel, warps, splits, max_warps): {checked}")
    bad += len(left) + (len(checked) < len(cases))
    print("FAIL" if bad else "OK", bad)
    return 1 if bad else 0


if __name__ == "__main__":
    if not timing.require_gpu("tools.owned_poll_stress"):
        sys.exit(0)
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000))
