"""One-shot grid search of the mHC-lite launch configurations (BLOCK_T, BLOCK_C/BLOCK_K, warps, stages).

    python -m bench.mhc_gridsearch [--T 65536] [--C 2560] [--dtype bfloat16]
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

The budget is shared out: each kernel may use the time left divided by the
kernels left, so a slow compiler cannot starve the last kernels.  Every trial
prints a progress line as it finishes.

Output: per kernel the best configuration, its speed-up over the table entry,
the top five trials, and the failures; a ready-to-paste ``TABLE`` block for
``kernels/mhc/configs.py``; with ``--json-out`` everything as JSON and with
``--md-out`` the same report as Markdown, both headed by the device, driver,
torch / triton versions and the date.  On a machine without a GPU it prints a
notice and exits 0; ``--dry-run`` (no GPU needed) lists every candidate that
would be timed, per kernel, for ``--arch``'s table entry.

Adopting the winners (the documented step):

1. run ``python -m bench.mhc_gridsearch --json-out g.json --md-out g.md``
   on the target GPU (H100: ``sm90``), unattended, < 8 minutes;
2. review the printed ``TABLE`` block: keep an entry only where its speed-up
   over the table entry is real (> ~3%, beyond run-to-run noise);
3. paste the kept lines over the ``"sm90"`` (or the printed arch's) entries of
   ``TABLE`` in ``kernels/mhc/configs.py``, and note the run in that
   docstring's ``sm90`` paragraph;
4. run ``python -m pytest tests/kernels/test_mhc.py`` (the table tests check
   the 2**20-element limit and tl.dot's 16-wide tiles) and
   ``python -m bench.mhc`` on the GPU to confirm.
"""
from __future__ import annotations

import argparse
import itertools
import json
import random
import time

import torch

from tritondiff.base import timing as _timing
from bench.mhc import _DTYPES, N, make_case, our_calls, traffic_bytes
from tritondiff.kernels.mhc import configs
from tritondiff.kernels.mhc.configs import LaunchConfig

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


def _width(kernel: str, C: int) -> int:
    """The tile-width problem size of ``kernel``: n*C for K1 (its reduction runs over x_flat), else C."""
    return N * C if kernel.startswith("k1") else C


def _fmt(cfg: LaunchConfig) -> str:
    return f"BT={cfg.block_t} BC={cfg.block_c} w={cfg.num_warps} s={cfg.num_stages}"


def search_kernel(kernel: str, case, *, max_trials: int, deadline: float, warmup_ms: int, rep_ms: int) -> dict:
    dev = case.t["x"].device
    current = configs.lookup(kernel, T=case.T, C=_width(kernel, case.C), device=dev)
    trials, failed = [], []
    nbytes = traffic_bytes(kernel, T=case.T, C=case.C, elem=case.elem)
    cands = candidates(kernel, current=current, elem=case.elem, max_trials=max_trials)
    for i, cfg in enumerate(cands):
        if time.monotonic() > deadline:
            print(f"  [{kernel} {i}/{len(cands)}] kernel's share of the budget spent; "
                  f"{len(cands) - i} candidates not timed", flush=True)
            break
        fn = our_calls(case, {kernel: cfg})[kernel]
        try:
            fn()
            torch.cuda.synchronize()
            t = _timing.bench(fn, warmup_ms=warmup_ms, rep_ms=rep_ms)
        except Exception as e:  # compile / launch failure of this candidate only
            msg = f"{type(e).__name__}: {' '.join(str(e).split())[:200]}"
            failed.append({"config": cfg.as_dict(), "error": msg})
            print(f"  [{kernel} {i + 1}/{len(cands)}] {_fmt(cfg)}: FAILED {msg[:120]}", flush=True)
            continue
        trials.append({"config": cfg.as_dict(), "median_ms": t.median_ms, "min_ms": t.min_ms,
                       "gbps": _timing.gbps(nbytes, t.median_ms), "is_table_entry": cfg == current})
        print(f"  [{kernel} {i + 1}/{len(cands)}] {_fmt(cfg)}: {t.median_ms:.4f} ms "
              f"({trials[-1]['gbps']:.0f} GB/s){' (table entry)' if cfg == current else ''}", flush=True)
    trials.sort(key=lambda r: r["median_ms"])
    table_ms = next((r["median_ms"] for r in trials if r["is_table_entry"]), None)
    return {"kernel": kernel, "name": configs.KERNELS[kernel], "bytes": nbytes, "trials_run": len(trials),
            "best": trials[0] if trials else None, "table_entry": current.as_dict(), "table_entry_ms": table_ms,
            "top": trials[:5], "failed": failed}


#: A winner is adopted (printed as an override) only past this speed-up over the table entry: run-to-run
#: noise of do_bench medians on an H100 is about 1-2%.
ADOPT_SPEEDUP = 1.03


def launch_overrides(results: list[dict]) -> str:
    """``TRITONDIFF_KERNEL_LAUNCH`` text running each kernel whose best trial beats its table entry by more
    than :data:`ADOPT_SPEEDUP` with that trial's configuration ("" when none does)."""
    items = []
    for r in results:
        best, table_ms = r["best"], r["table_entry_ms"]
        if best is None or table_ms is None or table_ms / best["median_ms"] <= ADOPT_SPEEDUP:
            continue
        name = configs.override_name(r["kernel"])
        items += [f"{name}.{key}={value}" for key, value in best["config"].items()]
    return ",".join(items)


def table_snippet(results: list[dict], arch: str) -> str:
    lines = [f'    "{arch}": {{']
    for r in results:
        if r["best"]:
            c = r["best"]["config"]
            lines.append(f'        "{r["kernel"]}": _C(block_t={c["block_t"]}, block_c={c["block_c"]}, '
                         f'num_warps={c["num_warps"]}, num_stages={c["num_stages"]}),')
    lines.append("    },")
    return "\n".join(lines)


def report_markdown(results: list[dict], *, env: dict, title: str, arch: str, elapsed: float,
                    budget_s: float) -> str:
    """The search's report: environment header, per-kernel best / top-five / failures, the TABLE block."""
    out = [f"# {title}", ""]
    out += [f"- {k}: {v}" for k, v in env.items()] + [f"- search: {elapsed:.0f} s of a {budget_s:.0f} s budget", ""]
    for r in results:
        best = r["best"]
        if best is None:
            out += [f"## {r['kernel']}: no successful trial ({len(r['failed'])} failed)", ""]
        else:
            table_ms = r["table_entry_ms"]
            gain = f", {table_ms / best['median_ms']:.3f}x the table entry" if table_ms else ", table entry failed"
            out += [f"## {r['kernel']} (`{r['name']}`)", "",
                    f"best {_fmt(LaunchConfig(**best['config']))}: {best['median_ms']:.4f} ms "
                    f"({best['gbps']:.0f} GB/s){gain}; {r['trials_run']} trials, {len(r['failed'])} failed", "",
                    _timing.markdown_table(("median ms", "min ms", "GB/s", "BT", "BC", "warps", "stages"),
                                           [(t["median_ms"], t["min_ms"], t["gbps"], *t["config"].values())
                                            for t in r["top"]]), ""]
        for f in r["failed"]:
            out.append(f"- failed {_fmt(LaunchConfig(**f['config']))}: {f['error']}")
        if r["failed"]:
            out.append("")
    out += ["Paste into `kernels/mhc/configs.py` TABLE (review first; see this script's docstring):", "",
            "```python", table_snippet(results, arch), "```", ""]
    return "\n".join(out)


def dry_run(args) -> int:
    """List every candidate per kernel (no GPU): the table entry of ``args.arch`` first."""
    elem = torch.empty((), dtype=_DTYPES[args.dtype]).element_size()
    entries = configs.TABLE[args.arch]
    total = 0
    print(f"mhc_gridsearch --dry-run: T={args.T}, C={args.C}, {args.dtype}, table entry '{args.arch}', "
          f"up to {args.max_trials} trials a kernel")
    for kernel in args.kernels:
        current = configs.clamp(entries[kernel], T=args.T, C=_width(kernel, args.C), arch=args.arch)
        cands = candidates(kernel, current=current, elem=elem, max_trials=args.max_trials)
        total += len(cands)
        print(f"{kernel}: {len(cands)} candidates")
        for i, cfg in enumerate(cands):
            print(f"  {i + 1:3d}. {_fmt(cfg)}{'  (table entry)' if i == 0 else ''}")
    print(f"total: {total} candidates")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.mhc_gridsearch",
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
    parser.add_argument("--overrides-out", help="write a TRITONDIFF_KERNEL_LAUNCH value adopting the winners "
                        f"(> {ADOPT_SPEEDUP}x their table entry) to this file, to run a benchmark with them")
    parser.add_argument("--md-out", help="write the report as Markdown to this file")
    parser.add_argument("--dry-run", action="store_true", help="list the candidates and exit (no GPU needed)")
    parser.add_argument("--arch", choices=[a for a in configs.TABLE if a != "interpreter"], default="sm90",
                        help="table entry --dry-run starts from (a GPU run uses its own device's)")
    args = parser.parse_args(argv)
    if args.max_trials < 1 or args.budget_s <= 0 or args.T < 1 or args.C < 1:
        parser.error("--max-trials, --budget-s, --T and --C must be positive")
    if args.dry_run:
        return dry_run(args)
    if not _timing.require_gpu("bench.mhc_gridsearch"):
        return 0
    start = time.monotonic()
    deadline = start + args.budget_s
    dev = torch.device("cuda")
    title = f"mHC-lite launch grid search: T={args.T}, C={args.C}, n=4, {args.dtype}"
    _timing.print_header(title)
    case = make_case(args.T, args.C, _DTYPES[args.dtype], dev)
    results = []
    for i, kernel in enumerate(args.kernels):
        share = (deadline - time.monotonic()) / (len(args.kernels) - i)
        print(f"### {kernel}: up to {args.max_trials} trials, {max(0.0, share):.0f} s", flush=True)
        results.append(search_kernel(kernel, case, max_trials=args.max_trials, deadline=time.monotonic() + share,
                                     warmup_ms=args.warmup_ms, rep_ms=args.rep_ms))
    arch = configs.table_key(dev)
    elapsed = time.monotonic() - start
    env = _timing.environment()
    text = report_markdown(results, env=env, title=title, arch=arch, elapsed=elapsed, budget_s=args.budget_s)
    print("\n" + text)
    if args.md_out:
        with open(args.md_out, "w") as fh:
            fh.write(text)
        print(f"wrote {args.md_out}")
    if args.json_out:
        payload = {"environment": env, "shape": {"T": args.T, "C": args.C, "n": N},
                   "dtype": args.dtype, "arch": arch, "elapsed_s": elapsed, "max_trials": args.max_trials,
                   "results": results}
        with open(args.json_out, "w") as fh:
            json.dump(payload, fh, indent=2)
        print(f"wrote {args.json_out}")
    if args.overrides_out:
        with open(args.overrides_out, "w") as fh:
            fh.write(launch_overrides(results))
        print(f"wrote {args.overrides_out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
