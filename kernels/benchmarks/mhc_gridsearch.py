"""One-shot grid search of the mHC-lite launch configurations (BLOCK_T, BLOCK_C/BLOCK_K, warps, stages).

    python -m kernels.benchmarks.mhc_gridsearch [--T 65536] [--C 2560] [--dtype bfloat16]
        [--kernels k1_fwd k4_bwd_fused ...] [--max-trials 24] [--budget-s 420]
        [--json-out reports/mhc_gridsearch_h100.json]

For each kernel: the current table entry first, then up to ``--max-trials - 1``
candidates drawn (seeded) from the grid after pruning the ones that cannot be
good on any GPU: fewer than 4 or more than 64 elements per thread per live
tile (idle lanes / register spills), software-pipelining buffers past 200 KB of
shared memory, and num_stages varied only for kernels with a loop over C.
Each candidate is compiled and timed through the kernel's real launcher; a
candidate that fails to compile or launch is recorded, not fatal.  The whole
search stops at ``--budget-s`` (the remaining kernels keep their table entry),
so one shape finishes within ~8 minutes on an H100.

Output: per kernel the best configuration, its speed-up over the table entry,
the top five trials, and the failures; a ready-to-paste ``TABLE`` block for
``kernels/mhc/configs.py``; and, with ``--json-out``, everything as JSON.
On a machine without a GPU it prints a notice and exits 0.
"""
from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
import time

import torch

from kernels.benchmarks import _timing
from kernels.benchmarks.mhc import _DTYPES, N, make_case, our_calls, traffic_bytes
from kernels.mhc import configs
from kernels.mhc.configs import LaunchConfig

BLOCK_T = (8, 16, 32, 64, 128)
BLOCK_C = (64, 128, 256, 512)
WARPS = (2, 4, 8)
STAGES = (2, 3, 4)

#: Kernels with a loop over C (or K), whose loads can be software-pipelined.
LOOPED = ("k1_fwd", "k1_bwd_dx", "k3_bwd_hpre", "k4_bwd_fused")
#: Tiles of the kernel's width loaded per loop iteration (shared-memory estimate of pipelining).
LIVE_TILES = {"k1_fwd": 1, "k1_bwd_dx": 1, "k3_fwd": 4, "k3_bwd_dx": 1, "k3_bwd_hpre": 5, "k4_fwd": 5,
              "k4_bwd_fused": 9}
SMEM_LIMIT = 200 * 1024


def plausible(kernel: str, cfg: LaunchConfig, elem: int) -> bool:
    """Could ``cfg`` be a good configuration of ``kernel`` on an SM80+ GPU?"""
    per_thread = cfg.block_t * cfg.block_c / (32 * cfg.num_warps)
    if not 4 <= per_thread <= 64:
        return False
    if kernel.startswith("k1") and cfg.block_t < 16:  # tl.dot needs M >= 16
        return False
    if kernel in LOOPED:
        return cfg.num_stages * LIVE_TILES[kernel] * cfg.block_t * cfg.block_c * elem <= SMEM_LIMIT
    return cfg.num_stages == 1


def candidates(kernel: str, *, current: LaunchConfig, elem: int, max_trials: int, seed: int = 0) -> list[LaunchConfig]:
    """The current entry, then a seeded sample of the plausible grid, ``max_trials`` in all."""
    stages = STAGES if kernel in LOOPED else (1,)
    grid = [LaunchConfig(bt, bc, w, s) for bt, bc, w, s in itertools.product(BLOCK_T, BLOCK_C, WARPS, stages)]
    grid = [c for c in grid if plausible(kernel, c, elem) and c != current]
    random.Random(f"{seed}:{kernel}").shuffle(grid)
    return [current] + grid[:max(0, max_trials - 1)]


def search_kernel(kernel: str, case, *, max_trials: int, deadline: float, warmup_ms: int, rep_ms: int) -> dict:
    dev = case.t["x"].device
    width = N * case.C if kernel.startswith("k1") else case.C
    current = configs.lookup(kernel, T=case.T, C=width, device=dev)
    trials, failed = [], []
    nbytes = traffic_bytes(kernel, T=case.T, C=case.C, elem=case.elem)
    for cfg in candidates(kernel, current=current, elem=case.elem, max_trials=max_trials):
        if time.monotonic() > deadline:
            break
        fn = our_calls(case, {kernel: cfg})[kernel]
        try:
            fn()
            torch.cuda.synchronize()
            t = _timing.bench(fn, warmup_ms=warmup_ms, rep_ms=rep_ms)
        except Exception as e:  # compile / launch failure of this candidate only
            failed.append({"config": cfg.as_dict(), "error": f"{type(e).__name__}: {str(e)[:200]}"})
            continue
        trials.append({"config": cfg.as_dict(), "median_ms": t.median_ms, "min_ms": t.min_ms,
                       "gbps": _timing.gbps(nbytes, t.median_ms), "is_table_entry": cfg == current})
    trials.sort(key=lambda r: r["median_ms"])
    table_ms = next((r["median_ms"] for r in trials if r["is_table_entry"]), None)
    return {"kernel": kernel, "name": configs.KERNELS[kernel], "bytes": nbytes, "trials_run": len(trials),
            "best": trials[0] if trials else None, "table_entry": current.as_dict(), "table_entry_ms": table_ms,
            "top": trials[:5], "failed": failed}


def table_snippet(results: list[dict], arch: str) -> str:
    lines = [f'    "{arch}": {{']
    for r in results:
        if r["best"]:
            c = r["best"]["config"]
            lines.append(f'        "{r["kernel"]}": _C(block_t={c["block_t"]}, block_c={c["block_c"]}, '
                         f'num_warps={c["num_warps"]}, num_stages={c["num_stages"]}),')
    lines.append("    },")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kernels.benchmarks.mhc_gridsearch",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--T", type=int, default=65536)
    parser.add_argument("--C", type=int, default=2560)
    parser.add_argument("--dtype", choices=sorted(_DTYPES), default="bfloat16")
    parser.add_argument("--kernels", nargs="+", choices=list(configs.KERNELS), default=list(configs.KERNELS))
    parser.add_argument("--max-trials", type=int, default=24, help="candidates per kernel, table entry included")
    parser.add_argument("--budget-s", type=float, default=420.0, help="wall-clock budget of the whole search")
    parser.add_argument("--warmup-ms", type=int, default=5)
    parser.add_argument("--rep-ms", type=int, default=40)
    parser.add_argument("--json-out", help="write the full results as JSON to this file")
    args = parser.parse_args(argv)
    if args.max_trials < 1 or args.budget_s <= 0 or args.T < 1 or args.C < 1:
        parser.error("--max-trials, --budget-s, --T and --C must be positive")
    if not _timing.require_gpu("kernels.benchmarks.mhc_gridsearch"):
        return 0
    start = time.monotonic()
    deadline = start + args.budget_s
    dev = torch.device("cuda")
    _timing.print_header(f"mHC-lite launch grid search: T={args.T}, C={args.C}, n=4, {args.dtype}")
    case = make_case(args.T, args.C, _DTYPES[args.dtype], dev)
    results = []
    for kernel in args.kernels:
        r = search_kernel(kernel, case, max_trials=args.max_trials, deadline=deadline,
                          warmup_ms=args.warmup_ms, rep_ms=args.rep_ms)
        results.append(r)
        best = r["best"]
        if best is None:
            print(f"### {kernel}: no successful trial ({len(r['failed'])} failed; budget left "
                  f"{deadline - time.monotonic():.0f} s)\n")
            continue
        table_ms = "failed" if r["table_entry_ms"] is None else f"{r['table_entry_ms']:.4f} ms"
        print(f"### {kernel} (`{r['name']}`): best {best['config']} {best['median_ms']:.4f} ms "
              f"({best['gbps']:.0f} GB/s), table entry {table_ms}, "
              f"{r['trials_run']} trials, {len(r['failed'])} failed\n")
        print(_timing.markdown_table(("median ms", "min ms", "GB/s", "BT", "BC", "warps", "stages"),
                                     [(t["median_ms"], t["min_ms"], t["gbps"], *t["config"].values())
                                      for t in r["top"]]) + "\n")
        sys.stdout.flush()
    arch = configs.table_key(dev)
    print("Paste into kernels/mhc/configs.py TABLE (review first):\n")
    print("```python\n" + table_snippet(results, arch) + "\n```")
    elapsed = time.monotonic() - start
    print(f"\nsearch took {elapsed:.0f} s (budget {args.budget_s:.0f} s)")
    if args.json_out:
        payload = {"environment": _timing.environment(), "shape": {"T": args.T, "C": args.C, "n": N},
                   "dtype": args.dtype, "arch": arch, "elapsed_s": elapsed, "max_trials": args.max_trials,
                   "results": results}
        with open(args.json_out, "w") as fh:
            json.dump(payload, fh, indent=2)
        print(f"wrote {args.json_out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
