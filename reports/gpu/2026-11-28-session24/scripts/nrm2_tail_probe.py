"""Session 24 probe: where do nrm2 2^20's 2.9 us of GPU time go on an H200, and which single-launch form is shortest?

The compiler runs nrm2 2^20 as one split-reduction launch: 128 programs each sum the squares of 8192 elements
(two 4096-element steps, 16 warps), store a partial, pass a barrier and count themselves in with an ``acq_rel``
atomic; the last to arrive reads the 128 partials (``.cg``), sums them and stores the square root.  Inductor runs
two kernels.  On the H200 ours took 0.976x Inductor's GPU time (session 23 call 2), on the H100 1.059x.

Hand-written forms, each changing one thing, timed as the benchmark times GPU time (the kernels' summed
durations under torch.profiler, back to back, L2 not flushed), in interleaved rounds beside the compiler's
compiled nrm2 and Inductor's:

- ``last p{P} b{RBLOCK} w{W}``: the compiler's form at P programs, RBLOCK, W warps;
- ``body ...``: the partial pass alone (no count, no final sum): a lower bound, not a result;
- ``relaxed ...`` / ``acq_rel ...``: the partial pass and the count, relaxed or acq_rel, no final sum;
- ``groups{G} ...``: G arrival counters (one per group of P/G programs, each on its own 128-byte line); a group's
  last program sums its group's partials and counts in on a second counter; the last of those finishes.  If
  P same-address atomics queue at one L2 slice, this shortens the queue;
- ``fadd ...``: each program adds its partial into one float with a relaxed atomic (order-dependent, so not
  bit-reproducible: a reference for the cost of the partials' store and read, not a candidate).

Every form is checked against torch first (sqrt of the float64 sum of squares, rtol 1e-5) and twice in a row
(the counters must be left zeroed).  Inductor's kernels are printed with their per-kernel times.

    PYTHONPATH=. python reports/gpu/2026-11-28-session24/scripts/nrm2_tail_probe.py [ROUNDS]
"""
import statistics
import sys

import torch
import triton

from compiler.runtime import load_module
from kernels.benchmarks import _timing

SRC = """import triton
import triton.language as tl


@triton.jit
def nrm2(X, P, Q, C, A, Y, N, P_: tl.constexpr, CHUNK: tl.constexpr, RBLOCK: tl.constexpr, MODE: tl.constexpr,
         G: tl.constexpr, PP: tl.constexpr):
    pid = tl.program_id(0)
    rbase = tl.arange(0, RBLOCK)[None, :]
    acc = tl.zeros([1, RBLOCK], tl.float32)
    for off in range(0, CHUNK, RBLOCK):
        idx = pid * CHUNK + off + rbase
        x = tl.load(X + idx, idx < N, other=0.0, eviction_policy='evict_first')
        acc = acc + x * x
    part = tl.sum(acc, 1)[:, None]
    one = tl.arange(0, 1)[:, None]
    if MODE == 3:                     # fadd: one float accumulator
        tl.atomic_add(A + one, part, sem='relaxed')
        tl.debug_barrier()
        n = tl.atomic_add(C, 1, sem='acq_rel')
        if n == P_ - 1:
            tl.debug_barrier()
            s = tl.load(A + one, cache_modifier='.cg')
            tl.store(Y + one, tl.sqrt(s))
            tl.store(A + one, tl.zeros([1, 1], tl.float32))
            tl.store(C, 0)
    else:
        tl.store(P + pid + one, part)
        if MODE == 1:                 # relaxed count, no final sum
            tl.debug_barrier()
            tl.atomic_add(C, 1, sem='relaxed')
        if MODE == 2:                 # acq_rel count, no final sum
            tl.debug_barrier()
            tl.atomic_add(C, 1, sem='acq_rel')
        if MODE == 4:                 # the compiler's last program
            tl.debug_barrier()
            n = tl.atomic_add(C, 1, sem='acq_rel')
            if n == P_ - 1:
                tl.debug_barrier()
                k = tl.arange(0, PP)[None, :]
                s = tl.load(P + k, k < P_, other=0.0, cache_modifier='.cg')
                tl.store(Y + one, tl.sqrt(tl.sum(s, 1)[:, None]))
                tl.store(C, 0)
        if MODE == 5:                 # G group counters, then one counter over the groups
            GS: tl.constexpr = P_ // G
            g = pid // GS
            tl.debug_barrier()
            n = tl.atomic_add(C + 32 * (1 + g), 1, sem='acq_rel')
            if n == GS - 1:
                tl.debug_barrier()
                s = tl.load(P + g * GS + tl.arange(0, GS)[None, :], cache_modifier='.cg')
                tl.store(Q + g + one, tl.sum(s, 1)[:, None])
                tl.store(C + 32 * (1 + g), 0)
                tl.debug_barrier()
                m = tl.atomic_add(C, 1, sem='acq_rel')
                if m == G - 1:
                    tl.debug_barrier()
                    q = tl.load(Q + tl.arange(0, G)[None, :], cache_modifier='.cg')
                    tl.store(Y + one, tl.sqrt(tl.sum(q, 1)[:, None]))
                    tl.store(C, 0)


@triton.jit
def nrm2_tagged(X, S, C, Y, N, P_: tl.constexpr, CHUNK: tl.constexpr, RBLOCK: tl.constexpr, PP: tl.constexpr,
                XCHG: tl.constexpr, LATE: tl.constexpr, VEC: tl.constexpr = False):
    # tagged partials: a 64-bit ticket counter that is never reset gives each launch an epoch (ticket // P_ + 1);
    # each program stores (epoch << 32 | partial bits) in its slot with no fence, and the holder of the launch's
    # last ticket polls the slots (volatile loads) until every one carries the epoch, then sums them.
    pid = tl.program_id(0)
    rbase = tl.arange(0, RBLOCK)[None, :]
    if VEC:       # the ticket as one lane of a block-wide atomic: no broadcast, so no barrier waits for it here
        lane0 = rbase == 0
        tickets = tl.atomic_add(C + rbase * 0, lane0.to(tl.int64), mask=lane0, sem='relaxed')
    elif not LATE:
        ticket = tl.atomic_add(C, 1, sem='relaxed')
    acc = tl.zeros([1, RBLOCK], tl.float32)
    for off in range(0, CHUNK, RBLOCK):
        idx = pid * CHUNK + off + rbase
        x = tl.load(X + idx, idx < N, other=0.0, eviction_policy='evict_first')
        acc = acc + x * x
    part = tl.sum(acc, 1)[:, None]
    one = tl.arange(0, 1)[:, None]
    if VEC:
        ticket = tl.sum(tl.where(lane0, tickets, 0))
    elif LATE:
        ticket = tl.atomic_add(C, 1, sem='relaxed')
    tag = (ticket // P_ + 1) & 0xFFFFFFFF
    word = (tag << 32) | (part.to(tl.int32, bitcast=True).to(tl.int64) & 0xFFFFFFFF)
    if XCHG:
        tl.atomic_xchg(S + pid + one, word, sem='relaxed')
    else:
        tl.store(S + pid + one, word)
    if ticket % P_ == P_ - 1:
        k = tl.arange(0, PP)[None, :]
        v = tl.load(S + k, k < P_, other=0, volatile=True)
        missing = tl.sum(tl.where((((v >> 32) & 0xFFFFFFFF) != tag) & (k < P_), 1, 0))
        while missing > 0:
            v = tl.load(S + k, k < P_, other=0, volatile=True)
            missing = tl.sum(tl.where((((v >> 32) & 0xFFFFFFFF) != tag) & (k < P_), 1, 0))
        parts = (v & 0xFFFFFFFF).to(tl.int32).to(tl.float32, bitcast=True)
        parts = tl.where(k < P_, parts, 0.0)
        tl.store(Y + one, tl.sqrt(tl.sum(parts, 1)[:, None]))
"""

MODES = {"body": 0, "relaxed": 1, "acq_rel": 2, "fadd": 3, "last": 4, "groups": 5}


def forms() -> dict:
    """name -> (mode, programs, RBLOCK, warps, groups or tagged-form options)"""
    out = {"last p128 b4096 w16": ("last", 128, 4096, 16, 1)}
    for b, w in ((8192, 16), (4096, 8), (2048, 8), (2048, 4), (1024, 4), (4096, 4), (1024, 2)):
        out[f"body p128 b{b} w{w}"] = ("body", 128, b, w, 1)
    early, late, vec = dict(XCHG=True, LATE=False), dict(XCHG=True, LATE=True), dict(XCHG=True, LATE=False, VEC=True)
    out["tagged p128 b8192 w16"] = ("tagged", 128, 8192, 16, early)
    out["tagged-late p128 b8192 w16"] = ("tagged", 128, 8192, 16, late)
    for p, b, w in ((128, 8192, 16), (128, 4096, 8), (128, 2048, 8), (128, 2048, 4), (128, 1024, 4), (128, 4096, 4),
                    (132, 8192, 16), (132, 2048, 4), (256, 4096, 8), (256, 2048, 4)):
        out[f"tagged-vec p{p} b{b} w{w}"] = ("tagged", p, b, w, vec)
    return out


def launcher(mod, x: torch.Tensor, name: str, form: tuple):
    """(call, its output tensor, its counter) of one hand-written form over ``x``."""
    mode, p, b, w, g = form
    n = x.numel()
    chunk = -(-n // p)
    chunk = -(-chunk // b) * b
    y = torch.empty(1, device=x.device)
    pp = triton.next_power_of_2(p)
    if mode == "tagged":
        slots = torch.zeros(p, dtype=torch.int64, device=x.device)
        count = torch.zeros(1, dtype=torch.int64, device=x.device)
        return (lambda: mod.nrm2_tagged[(p,)](x, slots, count, y, n, P_=p, CHUNK=chunk, RBLOCK=b, PP=pp, num_warps=w,
                                              **g)), y, count
    parts = torch.empty(p, device=x.device)
    groups = torch.empty(g, device=x.device)
    count = torch.zeros(32 * (g + 1), dtype=torch.int32, device=x.device)
    acc = torch.zeros(1, device=x.device)
    call = (lambda: mod.nrm2[(p,)](x, parts, groups, count, acc, y, n, P_=p, CHUNK=chunk, RBLOCK=b,
                                   MODE=MODES[mode], G=g, PP=pp, num_warps=w))
    return call, (parts if mode == "body" else y), count


def main(rounds: int, iters: int) -> None:
    import compiler
    from compiler.workloads import nrm2 as fn        # the seed workload's function
    mod = load_module(SRC, "nrm2_tail_probe")[0]
    n = 2**20
    x = torch.randn(n, device="cuda")
    want = x.double().square().sum().sqrt().float()
    ours = compiler.compile_fresh(fn)
    torch._logging.set_logs(output_code=True)
    inductor = torch.compile(fn)
    inductor(x)
    torch._logging.set_logs(output_code=False)
    cases, checks, outs = {}, {}, {}
    for name, form in forms().items():
        mode = form[0]
        call, out, count = launcher(mod, x, name, form)
        call()
        if mode == "body":
            got = torch.sqrt(out.double().sum()).float()
            checks[name] = "lower bound " + ("ok" if torch.allclose(got, want, 1e-5) else "WRONG")
        elif mode == "acq_rel":
            checks[name] = "no final sum"
        else:
            first = out.clone()
            call()
            same = torch.equal(first, out)
            ok = torch.allclose(first, want, 1e-5)
            checks[name] = ("ok" if ok else "WRONG") + ("" if same or mode == "fadd" else ", second call differs")
            if mode == "tagged" and int(count[0]) != 2 * form[1]:
                checks[name] += f", ticket count {int(count[0])} after 2 calls"
            if mode in ("last", "tagged"):
                outs[name] = (out, first)
        cases[name] = call
    assert torch.allclose(ours(x), want, 1e-5) and torch.allclose(inductor(x), want, 1e-5)
    cases["compiler"] = lambda: ours(x)
    cases["inductor"] = lambda: inductor(x)
    print("Inductor's kernels:", _timing.kernel_times(lambda: inductor(x), iters=iters))
    import gc
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner
    for o in gc.get_objects():
        try:
            if type(o) is CachingAutotuner:
                print("Inductor's config:", o.fn.__name__, [str(launcher.config) for launcher in o.launchers])
        except ReferenceError:            # a dead weak proxy among the objects
            continue
    print("compiler's kernels:", _timing.kernel_times(lambda: ours(x), iters=iters))
    times = {k: [] for k in cases}
    for r in range(rounds):
        names = list(cases)
        for k in names[r % len(names):] + names[:r % len(names)]:
            times[k].append(sum(t[2] for t in _timing.kernel_times(cases[k], iters=iters)) * 1e3)
    for name, (out, first) in outs.items():     # after rounds * iters launches back to back: still bit-identical
        if not torch.equal(out, first):
            checks[name] += f", differs after {rounds * iters} calls"
    ref = statistics.median(times["inductor"])
    rows = []
    for k, ts in times.items():
        med = statistics.median(ts)
        ratios = sorted(i / t for i, t in zip(times["inductor"], ts))
        rows.append((k, f"{med:.3f}", f"{min(ts):.3f}-{max(ts):.3f}", f"{ref / med:.4f}",
                     f"{ratios[0]:.3f}-{ratios[-1]:.3f}", checks.get(k, "")))
    _timing.print_header("nrm2 2^20 fp32: GPU time (us) of hand-written single-launch forms")
    print(f"{rounds} interleaved rounds of {iters} calls each; median of the rounds\n")
    print(_timing.markdown_table(["form", "GPU us", "range", "vs inductor", "per-round ratio", "check"], rows))
    print("registers:", _timing.registers(mod.nrm2), "|", _timing.registers(mod.nrm2_tagged))


if __name__ == "__main__":
    if _timing.require_gpu("nrm2_tail_probe"):
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 15, int(sys.argv[2]) if len(sys.argv) > 2 else 40)
