"""How a fuzz campaign's examples per second scale with lanes and GPUs (issue #40's figures).

    python -m tools.fuzz_scaling [TARGETS...] [--lanes 1 4 8] [--budget 60] [--ray ADDRESS] [--out FILE]

Runs one campaign per lane count over the same targets (default: every bundled subject) with the same seed,
each into a fresh store, and prints a Markdown table: lanes, the GPUs they spread over, examples per second in
all and per subject group, the speedup over the first row, and the kinds of finding each found (subject and
failure class) -- equal kinds across rows say more lanes found the same bugs.  First, unreported, a warm-up
campaign of ``--warmup`` seconds on the most lanes fills Triton's kernel cache: a subject's first example
compiles its kernels (seconds each on a GPU), and with a hundred subjects a short campaign measures compile time,
not fuzzing (H200 x2, 45 s campaigns, cold: 0.82 examples/s on one lane, 0.46 on two).  Then the lane counts run
largest first.  Give each campaign minutes (``--budget``): every subject's task pays its worker's import of the
subject once.  Default lanes: 1, one per GPU and two per GPU on CUDA; 1 and the CPU count otherwise.  ``--ray``
runs the lanes as Ray actors on that cluster (``local``: a one-machine cluster).
"""
from __future__ import annotations

import argparse
import datetime
import io
import os
import platform
import sys
import tempfile
import time
from collections import Counter

from tritondiff.base import device


def _default_lanes() -> list[int]:
    if device.MODE == "cuda":
        import torch

        gpus = max(1, torch.cuda.device_count())
        return sorted({1, gpus, 2 * gpus})
    return sorted({1, max(1, os.cpu_count() or 1)})


def measure(targets: list[str], lanes: int, budget_s: float, seed: int, ray: str | None) -> dict:
    """One campaign's figures: examples per second in all and per subject group, and the finding kinds."""
    from tritondiff.harness.campaign import name_groups, run_campaign
    from tritondiff.harness.store import Store

    with tempfile.TemporaryDirectory(prefix="fuzz-scaling-") as tmp:
        store = os.path.join(tmp, "f.db")
        res = run_campaign(targets, budget_s=budget_s, workers=lanes, seed=seed, store=store, out=io.StringIO(),
                           live=False, ray=ray)
        with Store(store, create=False) as s:
            per_subject = {r["subject"]: r["examples"] for r in s.stats()}
            kinds = sorted({(f["subject"], f["failure_class"]) for f in s.findings()})
    groups: Counter = Counter()
    for group, names in name_groups(per_subject).items():
        groups[group] = sum(per_subject[n] for n in names)
    seconds = res.seconds or float("nan")
    return {"lanes": lanes, "seconds": seconds, "examples": res.examples, "rate": res.examples / seconds,
            "groups": {g: n / seconds for g, n in groups.items()}, "kinds": kinds}


def store_commits_per_s(seconds: float = 3.0) -> float:
    """How many committed writes a second the findings store takes (a lane's stats flush each)."""
    from tritondiff.harness.store import Store

    with tempfile.TemporaryDirectory(prefix="fuzz-scaling-store-") as tmp:
        with Store(os.path.join(tmp, "f.db")) as store:
            n, t0 = 0, time.perf_counter()
            while time.perf_counter() - t0 < seconds:
                store.add_stats("s", examples=10, skipped=0, seconds=2.0, coverage={"shape": {"1": 3}})
                n += 1
            return n / (time.perf_counter() - t0)


def table(rows: list[dict], gpus: int) -> str:
    base = min(rows, key=lambda r: r["lanes"])
    groups = sorted({g for r in rows for g in r["groups"]})
    head = ["lanes", "GPUs used", "examples", "seconds", "examples/s", "vs 1 lane"] + [f"{g} /s" for g in groups] + \
        ["finding kinds", "same kinds as 1 lane"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in sorted(rows, key=lambda r: r["lanes"]):
        used = min(r["lanes"], gpus) if gpus else 0
        lines.append("| " + " | ".join([
            str(r["lanes"]), str(used), str(r["examples"]), f"{r['seconds']:.1f}", f"{r['rate']:.2f}",
            f"{r['rate'] / base['rate']:.2f}x" if base["rate"] else "-",
            *[f"{r['groups'].get(g, 0.0):.2f}" for g in groups],
            "; ".join(f"{s} {c}" for s, c in r["kinds"]) or "none", "yes" if r["kinds"] == base["kinds"] else "no",
        ]) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.fuzz_scaling", description=__doc__.splitlines()[0])
    parser.add_argument("targets", nargs="*", help="as tritondiff fuzz takes them (default: every bundled subject)")
    parser.add_argument("--lanes", type=int, nargs="+", default=None, help="lane counts to run")
    parser.add_argument("--budget", type=float, default=300.0, help="seconds per campaign (default 300)")
    parser.add_argument("--warmup", type=float, default=120.0,
                        help="seconds of an unreported first campaign that compiles the kernels (default 120; 0: none)")
    parser.add_argument("--seed", type=int, default=2611)
    parser.add_argument("--ray", default=None, metavar="ADDRESS", help="lanes as Ray actors on this cluster")
    parser.add_argument("--out", default=None, help="also write the table to this file")
    parser.add_argument("--store-rate", action="store_true",
                        help="only measure the commits a second the findings store takes, and exit")
    args = parser.parse_args(argv)
    if args.store_rate:
        print(f"findings store: {store_commits_per_s():.0f} committed stats writes a second "
              f"({platform.node() or 'this machine'}, {os.cpu_count()} CPUs)")
        return 0
    lanes = args.lanes or _default_lanes()
    if any(n < 1 for n in lanes):
        parser.error("--lanes: give positive lane counts")
    if not args.budget > 0 or not args.warmup >= 0:
        parser.error("--budget must be positive and --warmup at least 0")
    gpus = 0
    if device.MODE == "cuda":
        import torch

        gpus = torch.cuda.device_count()
    if args.warmup > 0:
        measure(list(args.targets), max(lanes), args.warmup, args.seed + 1, args.ray)
    rows = []
    for n in sorted(set(lanes), reverse=True):
        rows.append(measure(list(args.targets), n, args.budget, args.seed, args.ray))
        print(f"{n} lane(s): {rows[-1]['rate']:.2f} examples/s", flush=True)
    import torch

    header = (f"date: {datetime.date.today()}, device: {device.describe()}, GPUs: {gpus}, torch: {torch.__version__}, "
              f"python: {platform.python_version()}, budget: {args.budget:.0f} s a campaign, seed: {args.seed}"
              + (f", Ray: {args.ray}" if args.ray else ""))
    text = header + "\n\n" + table(rows, gpus)
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
