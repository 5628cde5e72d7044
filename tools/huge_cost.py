"""What one huge example costs (issue #41's figures): time, GPU and host memory, against the plan's estimate.

    python -m tools.huge_cost [SUBJECTS...] [--out FILE]

For each bundled subject (default: the norms, softmax and layer-norm subjects), in a fresh process each (so the
host's peak resident set is the example's): its huge plan at the memory free now, then one example of the
plan's first pair -- the one huge mode draws first, its slices past 2^31 -- run through the harness's
``run_case`` as a campaign runs it (reference, float64 truth, both calls, the comparison a chunk at a time on
the GPU).  Prints a Markdown table: subject, dtype and shape, verdict, seconds (the first call compiles the
kernels; a second example of the same pair is timed too, warm), the GPU's peak allocated bytes against the
plan's estimate for the example, and the host's peak resident set.  CUDA only.
"""
from __future__ import annotations

import argparse
import datetime
import json
import platform
import subprocess
import sys
import time

DEFAULT = ("kernels.layer_norm", "kernels.layer_norm_backward", "kernels.layer_norm_wide", "compiler.softmax",
           "compiler.rms_norm", "compiler.layer_norm_fwd_bwd")


def one(name: str) -> dict:
    """Run the first pair of ``name``'s huge plan twice in this process; its figures."""
    import resource

    import torch
    from hypothesis import find, settings

    from tritondiff.harness import huge, loader
    from tritondiff.harness.runner import run_case
    from tritondiff.harness.strategies import cases

    subject = loader.bundled()[name]
    plan = huge.plan_on_device(subject)
    first = plan.pairs[0]
    single = huge.HugePlan(plan.subject, plan.dim, (first,), (), plan.free_bytes, plan.host_bytes)
    case = find(cases(subject, huge=single), lambda c: True, settings=settings(database=None, max_examples=1))
    dtype, size, others = first
    estimate, estimate_host = huge.example_bytes(subject, dtype, {**dict(others), plan.dim: size},
                                                 measured=huge.measure_reference(subject, dtype, plan.dim, others))
    runs = []
    for _ in range(2):
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        verdict = run_case(subject, case)
        runs.append((time.perf_counter() - start, verdict.status, verdict.message.splitlines()[0] if verdict.message
                     else ""))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    shape = ", ".join([f"{plan.dim}={size:,}"] + [f"{d}={v:,}" for d, v in others])
    return {"subject": name, "dtype": dtype, "shape": shape, "elements": size * _rest(others),
            "cold_s": runs[0][0], "warm_s": runs[1][0], "verdict": runs[1][1], "message": runs[1][2] or runs[0][2],
            "gpu_peak": torch.cuda.max_memory_allocated(), "gpu_estimate": estimate, "host_peak": rss,
            "host_estimate": estimate_host}


def _rest(others) -> int:
    n = 1
    for _, v in others:
        n *= v
    return n


def _gib(n: int) -> str:
    return f"{n / 2 ** 30:.1f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.huge_cost", description=__doc__.splitlines()[0])
    parser.add_argument("subjects", nargs="*", default=list(DEFAULT))
    parser.add_argument("--one", help=argparse.SUPPRESS)          # the child process: one subject, JSON out
    parser.add_argument("--out", help="also write the table to this Markdown file")
    args = parser.parse_args(argv)
    from tritondiff.base import device

    if device.MODE != "cuda":
        print("huge examples need a CUDA device; this machine has none (nothing measured)")
        return 0
    if args.one:
        print("RESULT " + json.dumps(one(args.one)))
        return 0
    import torch
    import triton

    lines = [f"Huge examples: {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}, "
             f"Python {platform.python_version()}, {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d}; "
             f"`python -m tools.huge_cost {' '.join(args.subjects)}`", "",
             "| subject | dtype | shape | elements | verdict | cold s | warm s | GPU peak GiB | plan's GPU GiB "
             "| host peak GiB |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name in args.subjects:
        done = subprocess.run([sys.executable, "-m", "tools.huge_cost", "--one", name], capture_output=True,
                              text=True)
        found = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
        if done.returncode or not found:
            tail = (done.stderr.strip() or done.stdout.strip() or "no output").splitlines()[-1][:120]
            lines.append(f"| {name} | | | | error (exit {done.returncode}): {tail} | | | | | |")
        else:
            r = json.loads(found[0][len("RESULT "):])
            verdict = r["verdict"] + (f" ({r['message'][:80]})" if r["verdict"] != "pass" else "")
            lines.append(f"| {name} | {r['dtype']} | {r['shape']} | {r['elements']:,} | {verdict} | "
                         f"{r['cold_s']:.1f} | {r['warm_s']:.1f} | {_gib(r['gpu_peak'])} | {_gib(r['gpu_estimate'])} "
                         f"| {_gib(r['host_peak'])} |")
        print(lines[-1], flush=True)
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
