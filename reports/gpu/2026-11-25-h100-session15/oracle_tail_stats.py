"""Tail statistics of ln_large_offset_dump.py's dumps (session 15): the figures harness.oracle._tail_excused uses.

    python reports/gpu/2026-11-25-h100-session15/oracle_tail_stats.py DUMP.pt [DUMP.pt ...]

Per case the per-element rule flags (eager's level: max(its error, its row's RMS, the spread); allowed 3x that
plus the float32 floors): how many elements, the candidate's RMS error over eager's, eager's own count past 3x
its row's RMS, the flagged elements' largest error over eager's largest and over their level, and the oracle's
verdict with the tail allowance.
"""
import sys

import torch

from harness import oracle

for path in sys.argv[1:]:
    rows = torch.load(path)
    print("==", path)
    passed = 0
    for r in rows:
        c, e, t = (r[k].double() for k in ("cand", "eager", "truth"))
        ec, ee = (c - t).abs(), (e - t).abs()
        counted = torch.ones_like(ee, dtype=torch.bool)
        rms_e = oracle._local_rms(ee, counted)
        level = torch.maximum(ee, rms_e)
        if r["spread"] is not None:
            level = torch.maximum(level, r["spread"].double())
        bad = ec > 3 * level + 1e-5 * t.abs() + 1e-5 * t.abs().max()
        verdict = oracle.compare(r["cand"], r["eager"], r["truth"], spread=r["spread"]).passed
        passed += verdict
        if bad.any():
            print(f"{r['m']}x{r['n']} seed {r['seed']}: flagged {int(bad.sum())}, eager's tail {int((ee > 3 * rms_e).sum())}, "
                  f"RMS err cand/eager {float(ec.pow(2).mean().sqrt() / ee.pow(2).mean().sqrt()):.2f}, "
                  f"flagged err / eager's largest {float((ec[bad] / ee.max()).max()):.2f}, "
                  f"/ level {float((ec[bad] / level[bad]).max()):.1f}; oracle now: {'pass' if verdict else 'FAIL'}")
    print(f"{passed} of {len(rows)} pass")
