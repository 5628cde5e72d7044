"""Triage of session 11's call-10 campaign findings on the GPU (run from the repo root):

  python reports/gpu/2026-11-25-h100-session12/triage_call10.py {persistent,looped,post_res} [--seeds N]

persistent: compiler.reduce_rows_persistent, float32 [1, 4093] expanded (one value per row) normal;
  prints ours / eager / float64 per seed and what fp32 orders of adding the row give.
looped: compiler.reduce_rows_looped, bfloat16 [2, 956086] expanded integer seed 57581, timing each
  stage of the example (a stack dump if one stalls for 100 s).
post_res: compiler.mhc_post_res with near_max h_res; for each wrong element, the four fp32 products
  and whether adding them in order ((p0+p1)+p2)+p3 or pairwise overflows.
"""
import argparse
import faulthandler
import json
import sys

import torch

import compiler.subjects  # noqa: F401  (registers the compiler subjects)
from compiler import workloads
from harness.api import registry
from harness.case import Case, TensorCase
from harness.runner import build_inputs, run_case
from run_case import timed  # this directory's script (sys.path[0] when run as a script)


def tcase(shape, dtype, layout, param, values, seed, nonfinite=""):
    return TensorCase(tuple(shape), dtype, layout, param, values, seed, nonfinite)


def persistent(seeds):
    subj = registry()["compiler.reduce_rows_persistent"]
    for seed in range(seeds):
        for n in (4093, 4096, 2049):
            case = Case({"M": 1, "N": n}, {"x": tcase((1, n), "float32", "expanded", 1, "normal", seed)}, {})
            x = build_inputs(subj, case, guard=False)["x"]
            ours = subj.fn(x)[0].item()
            eager = x.sum(-1).item()
            truth = x.double().sum(-1).item()
            v = torch.tensor(x[0, 0].item(), dtype=torch.float32)
            seq = torch.zeros((), dtype=torch.float32)
            for _ in range(n):
                seq = seq + v
            ulp = torch.finfo(torch.float32).eps * abs(truth) / 2
            print(f"seed {seed} N {n} v {v.item():.9g}: ours {ours:.9g} ({(ours - truth) / ulp:+.0f} ulp) "
                  f"eager {eager:.9g} ({(eager - truth) / ulp:+.0f}) seq {seq.item():.9g} "
                  f"({(seq.item() - truth) / ulp:+.0f}) contiguous-ours "
                  f"{subj.fn(x.contiguous())[0].item():.9g}", flush=True)
        v = run_case(subj, Case({"M": 1, "N": 4093}, {"x": tcase((1, 4093), "float32", "expanded", 1, "normal", seed)}, {}))
        print(f"  run_case seed {seed}: {v.status} {v.message[:200]}", flush=True)


def looped(_seeds):
    faulthandler.dump_traceback_later(100, repeat=True)
    subj = registry()["compiler.reduce_rows_looped"]
    for param in (0, 1):
        case = Case({"M": 2, "N": 956086},
                    {"x": tcase((2, 956086), "bfloat16", "expanded", param, "integer", 57581)}, {})
        print(f"layout_param {param}", flush=True)
        x = timed("inputs", lambda: build_inputs(subj, case)["x"])
        timed("eager", lambda: subj.reference(x))
        timed("float64", lambda: subj.reference(x.double()))
        timed("compiled (subject)", lambda: subj.fn(x))
        v = timed("run_case", lambda: run_case(subj, case))
        print(f"  verdict {v.status} {v.message[:300]}", flush=True)


def post_res(seeds):
    subj = registry()["compiler.mhc_post_res"]
    found = 0
    for seed in range(seeds):
        for t, c in ((26, 507), (257, 507)):
            case = Case({"T": t, "C": c}, {
                "x_streams": tcase((t, 4, c), "float32", "transposed", 0, "integer", seed, "inf"),
                "layer_output": tcase((t, c), "float32", "transposed", 0, "large_offset", seed + 1),
                "h_res": tcase((t, 4, 4), "float32", "strided", 2, "near_max", seed + 2),
                "h_post": tcase((t, 4), "float32", "contiguous", 0, "uniform_pos", seed + 3)}, {})
            args = build_inputs(subj, case, guard=False)
            ours = subj.fn(**args)
            eager = workloads.mhc_post_res(**args)
            truth = workloads.mhc_post_res(**{k: v.double() for k, v in args.items()})
            bad = (torch.isinf(ours) & torch.isfinite(eager) & torch.isfinite(truth)).cpu()
            print(f"seed {seed} T {t}: {int(bad.sum())} element(s) inf in ours, finite in eager and float64",
                  flush=True)
            if not bad.any():
                continue
            found += 1
            hr, xs = args["h_res"].cpu(), args["x_streams"].cpu()
            kinds = {"sequential overflows": 0, "pairwise overflows": 0, "product overflows": 0}
            for (ti, i, ci) in bad.nonzero().tolist():
                p = [hr[ti, i, j] * xs[ti, j, ci] for j in range(4)]
                seq = ((p[0] + p[1]) + p[2]) + p[3]
                pair = (p[0] + p[1]) + (p[2] + p[3])
                kinds["product overflows"] += any(torch.isinf(q) for q in p)
                kinds["sequential overflows"] += bool(torch.isinf(seq))
                kinds["pairwise overflows"] += bool(torch.isinf(pair))
            print(f"  {int(bad.sum())} wrong: {kinds}", flush=True)
            ti, i, ci = bad.nonzero()[0].tolist()
            print(f"  first [{ti},{i},{ci}]: products {[f'{float(hr[ti, i, j] * xs[ti, j, ci]):.4g}' for j in range(4)]} "
                  f"eager {float(eager[ti, i, ci]):.4g} truth {float(truth[ti, i, ci]):.4g}", flush=True)
    print(f"{found} failing case(s)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=("persistent", "looped", "post_res"))
    ap.add_argument("--seeds", type=int, default=8)
    a = ap.parse_args()
    {"persistent": persistent, "looped": looped, "post_res": post_res}[a.what](a.seeds)
