"""CPU probe behind session 14's note on the open layer_norm_fwd_bwd finding (rows of 7, dy at a large offset).

    TRITON_INTERPRET=1 python reports/gpu/2026-11-25-h100-h200-session14/ln_rows7_probe.py [--seeds 6]

For x normal, weight expanded uniform_pos, bias uniform_pos, dy large_offset, float32 [733, 7]: dx's error
against float64 per column (RMS over seeds, relative to mean |truth|) for eager, the same FX-graph formula
in float32 with torch.var_mean (CPU: accumulated in double), with the compiler's shifted two-pass statistics
in float32, and the compiled subject; and how many seeds the oracle passes for each.
"""
import argparse

import torch

import compiler.subjects  # noqa: F401  (registers the bundled subjects)
from harness import oracle
from harness.api import registry
from harness.case import Case, TensorCase
from harness.runner import build_inputs

M, N = 733, 7


def dx_formula(x, w, dy, shifted):
    """The backward graph's dx: rstd / N * (N w dy - sum(w dy) - xhat * sum(w dy xhat))."""
    wdy = dy * w
    if shifted:                                   # compiler.lowerings.reductions.variance
        s = x[:, :1]
        mean = s + (x - s).sum(1, keepdim=True) / N
        var = ((x - mean) ** 2).sum(1, keepdim=True) / N
    else:
        var, mean = torch.var_mean(x, 1, correction=0, keepdim=True)
    rstd = torch.rsqrt(var + 1e-5)
    xhat = (x - mean) * rstd
    return rstd / N * (wdy * N - wdy.sum(1, keepdim=True) - xhat * (wdy * xhat).sum(1, keepdim=True))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=6)
    args = ap.parse_args()
    subj = registry()["compiler.layer_norm_fwd_bwd"]
    errs, passes = {}, {}
    for seed in range(args.seeds):
        def t(shape, layout, values, k):
            return TensorCase(shape, "float32", layout, 0, values, 100 * seed + k, "")
        case = Case({"M": M, "N": N}, {"x": t((M, N), "contiguous", "normal", 1),
                                       "weight": t((N,), "expanded", "uniform_pos", 2),
                                       "bias": t((N,), "contiguous", "uniform_pos", 3),
                                       "dy": t((M, N), "contiguous", "large_offset", 4)}, {})
        a = build_inputs(subj, case, guard=False)
        truth = subj.reference(**{k: v.double() for k, v in a.items()})[1]
        eager = subj.reference(**a)[1]
        for name, out in (("eager", eager),
                          ("formula, var_mean", dx_formula(a["x"], a["weight"], a["dy"], False)),
                          ("formula, shifted", dx_formula(a["x"], a["weight"], a["dy"], True)),
                          ("compiled", subj.fn(**a)[1])):
            e = (out.double() - truth) / truth.abs().mean()
            errs.setdefault(name, []).append(e.pow(2).mean(0))
            if name != "eager":
                passes[name] = passes.get(name, 0) + oracle.compare(out, eager, truth).passed
    print(f"dx error per column, RMS over {args.seeds} seeds, relative to mean |truth|; oracle passes")
    for name, v in errs.items():
        cols = " ".join(f"{c:.2e}" for c in torch.stack(v).mean(0).sqrt().tolist())
        print(f"{name:18s} {cols}   {'-' if name == 'eager' else passes[name]}/{args.seeds}")


if __name__ == "__main__":
    main()
