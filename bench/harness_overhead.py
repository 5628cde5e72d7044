"""Measure what the hazard hunters cost: examples/s with all of them, with each one switched off alone,
and with none.

    python -m bench.harness_overhead [--examples 100] [--repeats 5] [--out overhead.md]

Every setting runs the same seeded examples of each subject (same Hypothesis
seed, and correct subjects, so the same cases), ``--repeats`` times; a row
gives the median wall time of the exploration and the spread of the repeats.
Repeats go round-robin over the settings, each round in a rotated order, so a
change in the machine's load lands on every setting alike rather than on the
ones measured last.  The worker's start and the subject's import are not timed
(``executor.prepare`` runs first) and neither are the runner's first-use
costs (lazy imports, the CPU benchmarker): every run first judges a trivial
example where its examples will run (``campaign.warm_up``), in the worker or
in this process, so isolation is charged only its per-example round trip.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

from tritondiff.base import device
from tritondiff.harness.api import HAZARDS
from tritondiff.harness import hunters
from tritondiff.harness.hunters import HUNTERS
from tritondiff.harness.config import config
from tritondiff.harness.dump import versions
from tritondiff.harness.lanes import warm_up
from tritondiff.harness.executor import InProcess, Isolated
from tritondiff.harness.explore import explore
from tritondiff.harness.loader import load_file, ref, subjects_in

#: (label, hunters switched off): the default, each hunter off alone, none at all.
SETTINGS = ([("all hunters (default)", frozenset())]
            + [(f"all but {h}", frozenset({h})) for h in HAZARDS]
            + [("none (plain diff)", frozenset(HAZARDS))])

#: What switching each hunter off saves, in words for the report: each hunter's own summary.
WHAT = {name: hunter.summary for name, hunter in HUNTERS.items()}


def measure(subject, disabled: frozenset, examples: int, out_dir: str) -> tuple[float, int]:
    """(seconds, examples run) of one seeded exploration, the worker's start excluded."""
    executor = Isolated() if hunters.isolated(frozenset(HAZARDS) - disabled) else InProcess()
    try:
        _warm(executor)
        executor.prepare(ref(subject))
        start = time.perf_counter()
        res = explore(subject, budget_s=3600, max_examples=examples, seed=42, out_dir=out_dir, database=False,
                      disabled=disabled, executor=executor)
        if res.status != "pass":
            raise RuntimeError(f"{subject.name} must pass to be timed, got {res.line()}")
        return time.perf_counter() - start, res.examples
    finally:
        executor.close()


def _warm(executor) -> None:
    """Pay the runner's first-use costs (lazy imports, the CPU benchmarker) where the examples will run:
    a fresh worker would otherwise charge them to the first timed example of every isolated run."""
    if isinstance(executor, Isolated):
        res = executor.worker.call("tritondiff.harness.lanes:warm_up", timeout=300)
        if not res.ok:
            raise RuntimeError(f"the worker's warm-up failed:\n{res.error}")
    else:
        warm_up()


def run(subjects: list, examples: int, repeats: int, out_dir: str) -> tuple[list[dict], list[float]]:
    """Time every (subject, setting) ``repeats`` times; returns the rows and the 1-min load averages seen."""
    loads = [os.getloadavg()[0]]
    times: dict = {}
    for subj in subjects:
        for r in range(repeats):
            order = SETTINGS[r % len(SETTINGS):] + SETTINGS[:r % len(SETTINGS)]
            for label, disabled in order:
                secs, n = measure(subj, disabled, examples, out_dir)
                times.setdefault((subj.name, label), []).append((secs, n))
                loads.append(os.getloadavg()[0])
                print(f"{subj.name:32s} {label:24s} rep {r + 1}: {n:4d} ex {secs:7.1f} s {n / secs:6.2f} ex/s "
                      f"(load {loads[-1]:.1f})", flush=True)
    rows = []
    for subj in subjects:
        base = statistics.median(s for s, _ in times[(subj.name, SETTINGS[0][0])])
        for label, disabled in SETTINGS:
            runs = times[(subj.name, label)]
            secs = statistics.median(s for s, _ in runs)
            n = runs[0][1]
            rows.append({"subject": subj.name, "setting": label, "examples": n, "seconds": secs,
                         "rate": n / secs, "lo": min(m / s for s, m in runs), "hi": max(m / s for s, m in runs),
                         "vs_default": base / secs, "disabled": disabled})
    return rows, loads


def render(rows: list[dict], loads: list[float], examples: int, repeats: int, max_bytes: int) -> str:
    v = versions()
    busy = max(loads) > 2
    head = [f"## Hazard-hunter overhead ({device.describe()})", ""]
    if busy:
        head += [f"**Measured on a shared, busy machine: 1-minute load average {min(loads):.1f}-{max(loads):.1f} "
                 f"on {os.cpu_count()} cores (above 2 throughout or at times).** Absolute rates are low and "
                 "each repeat saw other jobs come and go; the medians and the rotated order keep the ratios "
                 "usable, the spread column says how far to trust each row.", ""]
    head += [f"torch {v['torch']}, triton {v['triton']}, python {v['python']}, {time.strftime('%Y-%m-%d')}; "
             f"{examples} seeded examples per run, inputs <= {max_bytes / 2 ** 20:g} MiB, {repeats} repeats per "
             f"row (median shown, min-max of the repeats' rates beside it), load average "
             f"{min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} cores.  \"vs default\" > 1: faster than "
             "with every hunter on, i.e. the share of the default's time that hunter costs is "
             "1 - 1/(vs default).", "",
             "| subject | hunters | examples | seconds (median) | examples/s | spread (ex/s) | vs default |",
             "|---|---|---|---|---|---|---|"]
    body = [f"| {r['subject']} | {r['setting']} | {r['examples']} | {r['seconds']:.1f} | {r['rate']:.2f} | "
            f"{r['lo']:.2f}-{r['hi']:.2f} | {r['vs_default']:.2f}x |" for r in rows]
    legend = ["", "What each hunter costs when on: " + "; ".join(f"`{h}`: {w}" for h, w in WHAT.items()) + ".",
              "", f"Reproduce: `python -m bench.harness_overhead --examples {examples} --repeats {repeats} "
              f"--max-bytes {max_bytes} --out overhead.md` (published in reports/harness.md)."]
    return "\n".join(head + body + legend)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--max-bytes", type=int, default=2 ** 20, help="inputs per example, bytes")
    parser.add_argument("--file", default=os.path.join(os.path.dirname(__file__), "..", "examples",
                                                        "seed001_nrm2.py"))
    parser.add_argument("--subject", action="append", default=None)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    wanted = args.subject or ["two_kernel_nrm2", "autotuned_atomic_nrm2_reset"]
    subjects = [s for s in subjects_in(load_file(args.file)) if s.name in wanted]
    with config.patch(max_example_bytes=args.max_bytes):
        rows, loads = run(subjects, args.examples, args.repeats, "/tmp/tritondiff-overhead")
    table = render(rows, loads, args.examples, args.repeats, args.max_bytes)
    print(table)
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out, "w") as f:
            f.write(table + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
