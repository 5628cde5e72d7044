"""Measure what the hazard hunters cost: examples/s with all of them, with none, and one at a time off.

    python -m harness.overhead [--examples 30] [--out reports/hazard_overhead.md]

Runs the same seeded examples of a few subjects under each setting (same
Hypothesis seed, so the same cases), and prints a Markdown table.
"""
from __future__ import annotations

import argparse
import os
import time

from . import device
from .api import HAZARDS
from .config import config
from .dump import versions
from .executor import InProcess, Isolated
from .explore import explore
from .loader import load_file, subjects_in

SETTINGS = [("all hunters (default)", frozenset()),
             ("no isolation", frozenset({"isolation"})),
             ("no autotune checks", frozenset({"autotune"})),
             ("no idempotence call", frozenset({"idempotence"})),
             ("no poison / bounds / canary / mutation", frozenset({"poison", "bounds", "canary", "mutation"})),
             ("none (plain diff)", frozenset(HAZARDS))]


def measure(subject, disabled: frozenset, examples: int, out_dir: str) -> tuple[float, int]:
    executor = InProcess() if "isolation" in disabled else Isolated()
    try:
        start = time.perf_counter()
        res = explore(subject, budget_s=3600, max_examples=examples, seed=42, out_dir=out_dir, database=False,
                      disabled=disabled, executor=executor)
        return time.perf_counter() - start, res.examples
    finally:
        executor.close()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=30)
    parser.add_argument("--file", default=os.path.join(os.path.dirname(__file__), "..", "examples",
                                                        "seed001_nrm2.py"))
    parser.add_argument("--subject", action="append", default=None)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    subjects = subjects_in(load_file(args.file))
    wanted = args.subject or ["two_kernel_nrm2", "autotuned_atomic_nrm2_reset"]
    subjects = [s for s in subjects if s.name in wanted]
    rows = []
    with config.patch(max_example_bytes=4 * 2 ** 20):
        for subj in subjects:
            base = None
            for label, disabled in SETTINGS:
                secs, n = measure(subj, disabled, args.examples, "/tmp/tritondiff-overhead")
                rate = n / secs if secs else 0.0
                base = base or rate
                rows.append((subj.name, label, n, secs, rate, rate / base))
                print(f"{subj.name:32s} {label:40s} {n:4d} ex {secs:7.1f} s {rate:6.2f} ex/s", flush=True)
    v = versions()
    lines = [f"## Hazard-hunter overhead ({device.describe()})", "",
             f"torch {v['torch']}, triton {v['triton']}, python {v['python']}, {time.strftime('%Y-%m-%d')}; "
             f"{args.examples} seeded examples per row, inputs <= 4 MiB, load average "
             f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores.", "",
             "| subject | hunters | examples | seconds | examples/s | vs default |", "|---|---|---|---|---|---|"]
    lines += [f"| {s} | {lab} | {n} | {sec:.1f} | {r:.2f} | {rel:.2f}x |" for s, lab, n, sec, r, rel in rows]
    table = "\n".join(lines)
    print(table)
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out, "w") as f:
            f.write(table + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
