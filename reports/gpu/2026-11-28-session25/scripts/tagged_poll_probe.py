"""Session 25 probe: what the race fix of the tagged last program (4e6af6b) costs, and whether a poll that no two
threads load alike needs it, for nrm2 2^20 on an H200.

Session 24 measured the tagged form (each partial stored with a flag in a 64-bit slot by a relaxed exchange, a
relaxed count, the last program polling the slots) before a review found its race: the poll's tile is smaller
than the program, so Triton gives several warps a copy of each slot, loaded each on its own, and the poll's count
and the sum could each take a different copy.  The fix (the compiler's form now) adds a barrier, a second load
of the slots, and a barrier before they are zeroed.  This probe times, in interleaved rounds beside Inductor and
the compiler's own kernels, hand-written forms that differ in that one place:

- ``racy``: the form before the fix (poll, sum, zero): the time the fix is measured against, not a candidate;
- ``reload``: the compiler's fixed form (poll, barrier, reload, sum, barrier, zero);
- ``wide``: the poll's tile padded to at least 64 x warps words, so that Triton's layout holds each word in one
  thread alone (no copies: at most 2 int64 words a thread in a 16-byte vector, 32 x warps threads) and the poll's
  count and the sum read the same load; no reload, no barrier;
- ``fence``: the fence form, for reference (a barrier, an acq_rel count, the last program's .cg loads);
- ``body``: the partial pass alone, a lower bound;

each at P programs, RBLOCK, warps -- among them Inductor's partial config (R0_BLOCK 2048, 16 warps, 8192 elements
a program) -- and the compiler's nrm2 under its default (fence) and tagged knobs, with Inductor's kernels.  Every
form is checked against float64 (rtol 1e-5), twice in a row bit for bit, and for state left non-zero.

    PYTHONPATH=. python reports/gpu/2026-11-28-session25/scripts/tagged_poll_probe.py [ROUNDS] [ITERS]
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
def nrm2(X, S, C, Y, N, P_: tl.constexpr, CHUNK: tl.constexpr, RBLOCK: tl.constexpr, PP: tl.constexpr,
         FORM: tl.constexpr):
    pid = tl.program_id(0)
    rbase = tl.arange(0, RBLOCK)[None, :]
    acc = tl.zeros([1, RBLOCK], tl.float32)
    for off in range(0, CHUNK, RBLOCK):
        idx = pid * CHUNK + off + rbase
        x = tl.load(X + idx, idx < N, other=0.0, eviction_policy='evict_first')
        acc = acc + x * x
    part = tl.sum(acc, 1)[:, None]
    one = tl.arange(0, 1)[:, None]
    FLAG: tl.constexpr = 1 << 32
    if FORM == 0:                       # body: the partial alone
        tl.store(Y + pid + one, part)
    elif FORM == 4:                     # fence
        tl.store(Y + 1 + pid + one, part)
        tl.debug_barrier()
        n = tl.atomic_add(C, 1, sem='acq_rel')
        if n == P_ - 1:
            tl.debug_barrier()
            k = tl.arange(0, PP)[None, :]
            s = tl.load(Y + 1 + k, k < P_, other=0.0, cache_modifier='.cg')
            tl.store(Y + one, tl.sqrt(tl.sum(s, 1)[:, None]))
            tl.store(C, 0)
    else:                               # tagged: 1 racy, 2 reload, 3 wide
        word = (part.to(tl.int32, bitcast=True).to(tl.int64) & 0xFFFFFFFF) | FLAG
        tl.atomic_xchg(S + pid + one, word, sem='relaxed')
        n = tl.atomic_add(C, 1, sem='relaxed')
        if n == P_ - 1:
            k = tl.arange(0, PP)[None, :]
            m = k < P_
            v = tl.load(S + k, m, other=FLAG, volatile=True)
            pending = tl.sum(tl.where(v < FLAG, 1, 0))
            while pending > 0:
                v = tl.load(S + k, m, other=FLAG, volatile=True)
                pending = tl.sum(tl.where(v < FLAG, 1, 0))
            if FORM == 2:
                tl.debug_barrier()
                v = tl.load(S + k, m, other=FLAG, volatile=True)
            parts = (v & 0xFFFFFFFF).to(tl.int32).to(tl.float32, bitcast=True)
            tl.store(Y + one, tl.sqrt(tl.sum(parts, 1)[:, None]))
            if FORM == 2:
                tl.debug_barrier()
            tl.store(S + k, tl.zeros([1, PP], tl.int64), m)
            tl.store(C, 0)
"""

FORMS = {"body": 0, "racy": 1, "reload": 2, "wide": 3, "fence": 4}


def forms() -> dict:
    """name -> (form, programs, RBLOCK, warps)"""
    out = {}
    for p, b, w in ((128, 2048, 16), (128, 4096, 16), (128, 8192, 16), (256, 4096, 16), (256, 2048, 16),
                    (256, 4096, 8)):
        for form in ("body", "fence", "racy", "reload", "wide"):
            out[f"{form} p{p} b{b} w{w}"] = (form, p, b, w)
    return out


def launcher(mod, x: torch.Tensor, form: tuple):
    """(call, output tensor, state tensors) of one hand-written form over ``x``."""
    kind, p, b, w = form
    n = x.numel()
    chunk = -(-n // p)
    chunk = -(-chunk // b) * b
    pp = triton.next_power_of_2(p)
    if kind == "wide":
        pp = max(pp, 64 * w)
    y = torch.zeros(p + 1, device=x.device)
    slots = torch.zeros(p, dtype=torch.int64, device=x.device)
    count = torch.zeros(1, dtype=torch.int32, device=x.device)
    call = (lambda: mod.nrm2[(p,)](x, slots, count, y, n, P_=p, CHUNK=chunk, RBLOCK=b, PP=pp,
                                   FORM=FORMS[kind], num_warps=w))
    return call, (y if kind == "body" else y[:1]), (slots, count)


def main(rounds: int, iters: int) -> None:
    import compiler
    from compiler.workloads import nrm2 as fn        # the seed workload's function
    mod = load_module(SRC, "tagged_poll_probe")[0]
    n = 2**20
    x = torch.randn(n, device="cuda")
    want = x.double().square().sum().sqrt().float()
    ours = compiler.compile_fresh(fn)
    with compiler.config.patch(split_last_program_sync="tagged"):
        ours_tagged = compiler.compile_fresh(fn)
    inductor = torch.compile(fn)
    cases, checks, outs = {}, {}, {}
    for name, form in forms().items():
        call, out, state = launcher(mod, x, form)
        call()
        if form[0] == "body":
            got = torch.sqrt(out[:form[1]].double().sum()).float()
            checks[name] = "lower bound " + ("ok" if torch.allclose(got, want, 1e-5) else "WRONG")
        else:
            first = out.clone()
            call()
            ok = torch.allclose(first, want, 1e-5)
            checks[name] = ("ok" if ok else "WRONG") + ("" if torch.equal(first, out) else ", second call differs")
            outs[name] = (out, first, state)
        cases[name] = call
    for name, f in (("compiler (fence)", ours), ("compiler tagged", ours_tagged), ("inductor", inductor)):
        assert torch.allclose(f(x), want, 1e-5), name
        cases[name] = (lambda f=f: f(x))
    for name in ("compiler (fence)", "compiler tagged", "inductor"):
        print(f"{name}'s kernels:", _timing.kernel_times(cases[name], iters=iters))
    times = {k: [] for k in cases}
    for r in range(rounds):
        names = list(cases)
        for k in names[r % len(names):] + names[:r % len(names)]:
            times[k].append(sum(t[2] for t in _timing.kernel_times(cases[k], iters=iters)) * 1e3)
    torch.cuda.synchronize()
    for name, (out, first, state) in outs.items():     # after rounds * iters launches: the same bits, state zeroed
        if not torch.equal(out, first):
            checks[name] += f", differs after {rounds * iters} calls"
        if any(bool(t.any()) for t in state):
            checks[name] += ", state left non-zero"
    ref = statistics.median(times["inductor"])
    rows = []
    for k, ts in times.items():
        med = statistics.median(ts)
        ratios = sorted(i / t for i, t in zip(times["inductor"], ts))
        rows.append((k, f"{med:.3f}", f"{min(ts):.3f}-{max(ts):.3f}", f"{ref / med:.4f}",
                     f"{ratios[0]:.3f}-{ratios[-1]:.3f}", checks.get(k, "")))
    _timing.print_header("nrm2 2^20 fp32: GPU time (us) of the tagged last program's poll forms")
    print(f"{rounds} interleaved rounds of {iters} calls each; median of the rounds\n")
    print(_timing.markdown_table(["form", "GPU us", "range", "vs inductor", "per-round ratio", "check"], rows))
    print("registers:", _timing.registers(mod.nrm2))
    print("\nThe volatile poll loads' layouts (TTGIR), per compiled form:")
    for c in _timing.compiled_of(mod.nrm2):
        ttgir = c.asm.get("ttgir", "")
        polls = [line.strip() for line in ttgir.splitlines() if "isVolatile = true" in line]
        if not polls:
            continue
        used = {tok.rstrip(">,)") for line in polls for tok in line.split() if tok.startswith("#blocked")}
        layouts = [line.strip() for line in ttgir.splitlines() if line.split(" = ")[0].strip() in used]
        print(f"- warps {c.metadata.num_warps}: " + " | ".join(layouts + polls[:1]))


if __name__ == "__main__":
    if _timing.require_gpu("tagged_poll_probe"):
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 15, int(sys.argv[2]) if len(sys.argv) > 2 else 40)
