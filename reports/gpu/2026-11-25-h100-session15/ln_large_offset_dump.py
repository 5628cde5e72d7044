"""Dump layer_norm_fwd_bwd's dx on the dy-at-a-large-offset cases (session 15) for oracle calibration.

    PYTHONPATH=. TRITONDIFF_DEVICE=cuda python reports/gpu/2026-11-25-h100-session15/ln_large_offset_dump.py OUT.pt

For each shape and seed (x normal, weight expanded uniform_pos, bias uniform_pos, dy large_offset, float32;
the harness's own draws) saves dx from the compiled subject, from eager and in float64, with the spread the
runner measures, and the harness verdict's message: the data to judge an oracle rule against on a CPU.
"""
import sys

import torch

import compiler.subjects  # noqa: F401  (registers the bundled subjects)
from harness import runner
from harness.api import registry
from harness.runner import build_inputs, run_case
from tests.compiler.test_subjects import ln_large_offset_case

SHAPES = ((733, 7), (100, 31), (64, 100), (257, 13), (2000, 5))


def main(path: str, seeds: int = 6) -> None:
    subj = registry()["compiler.layer_norm_fwd_bwd"]
    rows = []
    for m, n in SHAPES:
        for seed in range(seeds):
            case = ln_large_offset_case(m, n, seed)
            verdict = run_case(subj, case)
            a = build_inputs(subj, case, guard=False)
            up = runner._upcast(build_inputs(subj, case, guard=False))
            truth = subj.reference(**up)
            spread = runner._spread(subj, case, up, truth)
            rows.append({"m": m, "n": n, "seed": seed, "status": verdict.status, "message": verdict.message,
                         "cand": subj.fn(**a)[1].cpu(), "eager": subj.reference(**a)[1].cpu(),
                         "truth": truth[1].cpu(), "spread": spread[1].cpu() if spread else None})
            print(m, n, seed, verdict.status, verdict.message[:120], flush=True)
    torch.save(rows, path)


if __name__ == "__main__":
    main(sys.argv[1])
