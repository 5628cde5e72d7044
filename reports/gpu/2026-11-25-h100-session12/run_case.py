"""Run one stored case of a bundled subject with timings, and a stack dump if it stalls.

  python reports/gpu/2026-11-25-h100-session12/run_case.py SUBJECT CASE.json [--stall-s 60]
"""
import argparse
import faulthandler
import json
import time

import torch

import compiler.subjects  # noqa: F401  (registers the bundled subjects)
import kernels.subjects  # noqa: F401
from harness.api import registry
from harness.case import Case
from harness.runner import build_inputs, run_case


def timed(label, fn):
    t = time.perf_counter()
    out = fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    print(f"  {label}: {time.perf_counter() - t:.2f} s", flush=True)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("subject")
    ap.add_argument("case")
    ap.add_argument("--stall-s", type=float, default=60)
    a = ap.parse_args()
    faulthandler.dump_traceback_later(a.stall_s, repeat=True)
    subj = registry()[a.subject]
    case = Case.from_json(json.load(open(a.case)))
    print(a.subject, case.describe(), flush=True)
    args = timed("inputs", lambda: build_inputs(subj, case, guard=False))
    timed("eager", lambda: subj.reference(**args))
    timed("float64", lambda: subj.reference(**{k: v.double() if v.is_floating_point() else v for k, v in args.items()}))
    timed("subject, first call", lambda: subj.fn(**args))
    timed("subject, second call", lambda: subj.fn(**args))
    v = timed("run_case", lambda: run_case(subj, case))
    print(f"  verdict {v.status} {v.message[:300]}", flush=True)


if __name__ == "__main__":
    main()
