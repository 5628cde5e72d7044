"""Session 20: RMSNorm rows of several widths and dtypes, the compiler with config.persistent_reread_loads on
(a two-pass row that keeps only loads is read again, one whole-row step per pass) and off (persistent, x held
in registers), beside Inductor, in interleaved rounds.  GPU only.

    PYTHONPATH=. python reports/gpu/2026-11-27-session20/scripts/rms_widths.py [ROUNDS]
"""
import statistics
import sys

import torch

import compiler
from compiler import workloads
from kernels.benchmarks import _timing

SHAPES = [(65536, 1024, torch.float32), (32768, 2048, torch.float32), (16384, 4096, torch.float32),
          (8192, 8192, torch.float32), (8192, 8192, torch.bfloat16), (16384, 4096, torch.bfloat16),
          (65536, 2560, torch.bfloat16)]


def main(rounds: int) -> None:
    copy = _timing.copy_bandwidth_gbps()
    _timing.print_header("RMSNorm rows: read again (on) against held (off)")
    print(f"copy bandwidth {copy:.0f} GB/s; {rounds} interleaved rounds, median of the rounds' medians\n")
    rows = []
    for m, n, dtype in SHAPES:
        x = torch.randn(m, n, device="cuda", dtype=dtype)
        w = torch.randn(n, device="cuda", dtype=dtype)
        ref = workloads.rms_norm(x, w)
        cases = {}
        for on in (True, False):
            fn = compiler.compile_fresh(workloads.rms_norm)
            with compiler.config.patch(persistent_reread_loads=on):
                out = fn(x, w)                                   # compiles under the knob
            torch.testing.assert_close(out, ref, rtol=2e-2 if dtype != torch.float32 else 1e-5, atol=1e-2)
            cases["on" if on else "off"] = lambda fn=fn: fn(x, w)
        torch._dynamo.reset()                 # a fresh static graph per shape (call 7 ran without: see README)
        ind = torch.compile(workloads.rms_norm, dynamic=False)
        ind(x, w)
        cases["inductor"] = lambda: ind(x, w)
        times = _timing.interleaved_us(cases, rounds, rep_ms=100)
        med = {k: statistics.median(v) for k, v in times.items()}
        nbytes = 2 * m * n * x.element_size() + n * x.element_size()
        rows.append((f"{m}x{n} {str(dtype)[6:]}", f"{med['on']:.2f}", f"{med['off']:.2f}", f"{med['inductor']:.2f}",
                     f"{med['off'] / med['on']:.4f}", f"{med['inductor'] / med['on']:.4f}",
                     f"{med['inductor'] / med['off']:.4f}", f"{nbytes / (med['on'] * 1e-6) / 1e9 / copy:.1%}"))
        print(rows[-1], flush=True)
    print(_timing.markdown_table(["shape", "on us", "off us", "inductor us", "off/on", "inductor/on", "inductor/off",
                                  "% copy BW (on)"], rows))


if __name__ == "__main__":
    if _timing.require_gpu("rms_widths"):
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
