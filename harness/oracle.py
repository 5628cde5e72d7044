"""The oracle: is a candidate's output as right as eager PyTorch's, judged against float64?

For each output the reference runs twice: in float64 (floating inputs upcast;
the arbiter, "truth") and in the inputs' own dtype ("eager").  A candidate
element passes when

    |cand - truth| <= multiplier * eager_error + rtol * |truth| + atol * max|truth|

(the rule of ``torch._dynamo.utils.same`` with an fp64 reference, applied per
element so a wrong tail block cannot hide in an average).  ``eager_error`` of
an element is the larger of eager's own error there and eager's RMS error
along the element's row (the last dim, neighbouring rows together where a row
is shorter than ``MIN_RMS_ELEMENTS``; the whole output for 0-D and 1-D ones):
rounding errors land at random, so at elements where eager happens to be
exact, a candidate as accurate as eager overall would otherwise fail on luck
(seen: layer-norm dx, where eager's RMS error was 2.6x ours but eager was
exact at 585 elements).  A wrong block is still far above eager's error level.
Where a comparison fails, the runner measures the element's *spread* and
judges again with the level at least that: the linear part of how far the
float64 truth moves when the inputs move by one ulp up and down
(``harness.runner._spread``), i.e. its conditioning.  In a sum that
cancels (a GEMM of large-offset and integer operands into a sigmoid), any
summation order errs by about that much, eager included, and whether eager
happened to land close at that element is luck.  Where rounding errors are
heavy-tailed, a few elements of an equally accurate candidate lie past 3x
their level at places where eager's do not: those are excused (a tail
allowance, ``_tail_excused``; counted in the report's ``tail_excused``) when
over the whole output the candidate's RMS error is within 1.25x eager's, each
such element errs by at most 2x eager's largest error and 16x its own level,
and there are at most twice as many as eager's own past 3x their row's RMS --
but always one.  So in an output of 256 elements or more, a single element, or
a few where eager has its own tail, may err up to 16x its level: a mild
precision bug confined to them passes; a wrong value (far past rounding), a
wrong block larger than eager's tail, or a candidate worse overall does not.
The level is also at least the reference's *rounding noise* (``harness.rounding``, measured like the
spread only after a failing comparison): how far the float64 reference lands from itself when re-run
rounding like a float32 machine in random directions, each intermediate at its own magnitude (a mean summed
at an offset of 1000, an ``lse`` formed at the logits' size).  No element is judged below float32's smallest
normal: a device may flush a subnormal result to zero.
NaN / inf positions must match float64 rounded to the output dtype, or
eager's -- except where the truth lies within tolerance of the dtype's
overflow threshold and only rounding decides the side (``_across_overflow``), and where the rounding noise
shows another order of the same sums overflowing float32.  Integer and bool outputs are exact.  An all-zero
candidate where the truth is not zero fails as ``degenerate`` whatever the tolerances say.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch

from .rounding import FLOAT8, Bounds, overflow_threshold

# Per-dtype floors: (rtol, atol relative to the output's largest magnitude).  float8 formats (quantised outputs):
# one epsilon relative -- a one-ulp difference, a tie rounded the other way -- and a quarter of one absolute: two
# of e5m2's epsilons are 50%, and a scale off by a factor of two would pass.
DEFAULT_FLOORS = {
    torch.float64: (1e-9, 1e-9),
    torch.float32: (1e-5, 1e-5),
    torch.float16: (2e-3, 2e-3),
    torch.bfloat16: (1.6e-2, 1.6e-2),
    **{d: (torch.finfo(d).eps, torch.finfo(d).eps / 4) for d in FLOAT8},
}
MAX_INDICES = 8


@dataclasses.dataclass
class OutputReport:
    index: int
    shape: tuple
    dtype: str
    numel: int
    mismatches: int = 0
    max_abs: float = 0.0
    max_rel: float = 0.0
    max_ulp: int = 0
    eager_max_abs: float = 0.0
    tail_excused: int = 0           # elements past the per-element bound excused by the tail allowance
    first_indices: list = dataclasses.field(default_factory=list)
    location: str = "none"          # coarse kind, part of a failure signature
    where: str = ""                 # human description of where mismatches sit
    failure_class: str | None = None
    message: str = ""


@dataclasses.dataclass
class Comparison:
    passed: bool
    failure_class: str | None
    message: str
    outputs: list[OutputReport]

    @property
    def location(self) -> str:
        bad = [o for o in self.outputs if o.failure_class]
        return f"out{bad[0].index}:{bad[0].location}" if bad else "none"

    def to_json(self) -> dict:
        return {"passed": self.passed, "failure_class": self.failure_class, "message": self.message,
                "outputs": [dataclasses.asdict(o) for o in self.outputs]}


def flatten(value: Any) -> list:
    """Outputs as a flat list (tuples/lists recursively; scalars and None kept)."""
    if isinstance(value, (tuple, list)):
        out = []
        for v in value:
            out.extend(flatten(v))
        return out
    return [value]


def compare(candidate: Any, eager: Any, truth: Any, *, multiplier: float = 3.0,
            rtol: float | None = None, atol: float | None = None, spread: Any = None,
            noise: Any = None, large: Any = None) -> Comparison:
    """Judge ``candidate`` against ``truth`` (float64 reference) with ``eager`` as the error yardstick.

    ``spread`` (optional, shaped like ``truth``'s outputs): how far the truth moves when the inputs move
    by one ulp -- each element's conditioning, a floor for eager's error there (see the module docstring).
    ``noise`` (optional, a :class:`harness.rounding.Noise`): the reference's rounding noise -- a further floor
    for the error level, and where it marks an element as one a legitimate order overflows, an excuse for a
    non-finite candidate there.
    ``large`` (optional): ``large(report, candidate, eager, truth, multiplier, rtol, atol, spread, noise,
    may_overflow)`` judges a floating output where it returns a report (``harness.oracle_chunks.compare_large``:
    the huge ones, chunk by chunk on their own device); the rest are judged here, on CPU copies.
    """
    cands, eagers, truths = flatten(candidate), flatten(eager), flatten(truth)
    spreads = flatten(spread) if spread is not None else [None] * len(truths)
    levels = list(noise.levels) if noise is not None else []
    overflows = list(noise.may_overflow) if noise is not None else []
    discretes = list(noise.discrete) if noise is not None else []
    if len(cands) != len(eagers):
        return Comparison(False, "structure", f"candidate returned {len(cands)} output(s), the reference "
                          f"{len(eagers)}", [])
    reports = []
    with torch.device("cpu"):      # the comparison runs on CPU copies, whatever default device the caller set
        for i, (c, e, t) in enumerate(zip(cands, eagers, truths)):
            reports.append(_compare_one(i, c, e, t, multiplier, rtol, atol,
                                        spreads[i] if i < len(spreads) else None,
                                        levels[i] if i < len(levels) else None,
                                        overflows[i] if i < len(overflows) else None,
                                        discretes[i] if i < len(discretes) else None, large))
    bad = [r for r in reports if r.failure_class]
    if not bad:
        return Comparison(True, None, "match", reports)
    first = bad[0]
    return Comparison(False, first.failure_class, first.message, reports)


def _as_tensor(x: Any) -> torch.Tensor | None:
    if isinstance(x, torch.Tensor):
        return x
    if isinstance(x, (bool, int, float)):
        return torch.tensor(x)
    return None


def _compare_one(i: int, c: Any, e: Any, t: Any, multiplier: float, rtol, atol, spread=None, noise=None,
                 may_overflow=None, discrete=None, large=None) -> OutputReport:
    if e is None or c is None:
        rep = OutputReport(i, (), "none", 0)
        if (e is None) != (c is None):
            rep.failure_class, rep.message = "structure", f"output {i}: candidate {type(c).__name__}, " \
                                                          f"reference {type(e).__name__}"
        return rep
    ct, et, tt = _as_tensor(c), _as_tensor(e), _as_tensor(t)
    if ct is None or et is None:
        rep = OutputReport(i, (), type(e).__name__, 1)
        if c != e:
            rep.failure_class, rep.message = "mismatch", f"output {i}: candidate {c!r} != reference {e!r}"
        return rep
    rep = OutputReport(i, tuple(et.shape), str(et.dtype).replace("torch.", ""), et.numel())
    if tuple(ct.shape) != tuple(et.shape):
        rep.failure_class = "shape"
        rep.message = f"output {i}: shape {tuple(ct.shape)}, reference {tuple(et.shape)}"
        return rep
    if ct.dtype != et.dtype:
        rep.failure_class = "dtype"
        rep.message = f"output {i}: dtype {ct.dtype}, reference {et.dtype}"
        return rep
    if large is not None and et.dtype.is_floating_point and not et.dtype.is_complex:
        tt = tt if tt is not None else et
        extra = [x if isinstance(x, torch.Tensor) and tuple(x.shape) == tuple(tt.shape) else None
                 for x in (spread, noise, may_overflow)]
        judged = large(rep, ct, et, tt, multiplier, rtol, atol, *extra)
        if judged is not None:
            return judged
    ct, et = ct.detach().cpu(), et.detach().cpu()
    tt = tt.detach().cpu() if tt is not None else et
    if et.dtype.is_complex:
        # Complex outputs are judged as their (real, imaginary) float pairs: indices gain a last dim of 2.
        ct, et = (torch.view_as_real(x.resolve_conj().contiguous()) for x in (ct, et))
        tt = torch.view_as_real(tt.resolve_conj().to(torch.complex128).contiguous())
    if not et.dtype.is_floating_point:
        wrong = ct != et
        if isinstance(tt, torch.Tensor) and tt.shape == ct.shape and not tt.dtype.is_floating_point:
            wrong &= ct != tt.to(ct.dtype)             # the float64 path's integers: the arbiter's own answer
        if isinstance(discrete, Bounds) and discrete.low.shape == ct.shape:
            wrong &= ~discrete.admit(ct)               # the values rounding noise at a step reaches
        if not bool(wrong.any()):
            return rep
        return _finish(rep, wrong, ct.double() if et.dtype != torch.bool else ct.long(),
                       et.double() if et.dtype != torch.bool else et.long(), "mismatch", exact=True)
    spread, noise, may_overflow = (_matching(x, tt) for x in (spread, noise, may_overflow))
    return _compare_float(rep, ct, et, tt, multiplier, rtol, atol, spread, noise, may_overflow)


def _matching(x: Any, truth: torch.Tensor) -> torch.Tensor | None:
    """An allowance tensor shaped like the (real) truth, on CPU; None otherwise."""
    if isinstance(x, torch.Tensor) and tuple(x.shape) == tuple(truth.shape) and not x.dtype.is_complex:
        x = x.detach().cpu()
        return x if x.dtype == torch.bool else x.double()
    return None


def _compare_float(rep: OutputReport, c: torch.Tensor, e: torch.Tensor, t: torch.Tensor,
                   multiplier: float, rtol, atol, spread: torch.Tensor | None = None,
                   noise: torch.Tensor | None = None, may_overflow: torch.Tensor | None = None) -> OutputReport:
    dtype = e.dtype
    t64 = t.double()
    rounded = t64.to(dtype).double()                   # the best the dtype can represent
    c64, e64 = c.double(), e.double()
    # Non-finite pattern: NaN, +inf and -inf must match float64 rounded to the dtype, or eager's own
    # pattern.  Where the truth is finite and eager is not (an intermediate overflowed), any non-finite
    # candidate is excused: another order of the same sums overflows differently.  So where the float64
    # truth is finite but past the dtype's range (it rounds to inf) and eager's kind is another (a sum of
    # near-max terms at 3.6e38, NaN in eager's order): eager shows the kind is the order's.  Where the
    # truth is non-finite, a candidate of another kind (NaN for -inf, +inf for -inf) is wrong.
    nf_c, nf_t, nf_e = _nonfinite_code(c64), _nonfinite_code(rounded), _nonfinite_code(e64)
    order_made = (nf_e != 0) & torch.isfinite(t64) & ((nf_t == 0) | (nf_e != nf_t))
    nf_wrong = (nf_c != nf_t) & (nf_c != nf_e) & ~((nf_c != 0) & order_made)
    if may_overflow is not None:       # a legitimate order of the same sums overflows here: any non-finite
        # candidate where the truth rounds to a finite value; where it rounds to inf (finite in float64, past
        # the dtype's range), a NaN -- partials that overflowed both ways -- but not the other infinity
        nf_wrong &= ~((nf_c != 0) & may_overflow & ((nf_t == 0) | ((nf_c == 1) & torch.isfinite(t64))))
    finite = torch.isfinite(c64) & torch.isfinite(t64)
    d_rtol, d_atol = DEFAULT_FLOORS.get(dtype, (1e-5, 1e-5))
    rtol = d_rtol if rtol is None else rtol
    atol = d_atol if atol is None else atol
    err_c = torch.where(finite, (c64 - t64).abs(), torch.zeros_like(c64))
    err_e = torch.where(finite & torch.isfinite(e64), (e64 - t64).abs(), torch.zeros_like(c64))
    mag = torch.where(finite, t64.abs(), torch.zeros_like(t64))
    scale = float(mag.max()) if mag.numel() else 0.0
    tiny = _absolute_floor(dtype)
    counted = finite & torch.isfinite(e64)
    rms_e = _local_rms(err_e, counted)
    level = torch.maximum(err_e, rms_e)
    if spread is not None:
        level = torch.maximum(level, torch.where(finite, spread, torch.zeros_like(spread)))
    if noise is not None:
        level = torch.maximum(level, torch.where(finite, noise, torch.zeros_like(noise)))
    floor = multiplier * level + atol * scale + tiny
    allowed = floor + rtol * mag
    if bool(nf_wrong.any()):        # mag is 0 where the candidate is not finite: the truth's own magnitude there
        nf_wrong &= ~_across_overflow(c64, t64, floor + rtol * t64.abs(), dtype)
    if bool(nf_wrong.any()):
        _finish(rep, nf_wrong, c64, rounded, "nonfinite")
        kinds = _nonfinite_kinds(c64[nf_wrong])
        rep.message = (f"output {rep.index}: {int(nf_wrong.sum())} element(s) have the wrong NaN/inf status "
                       f"({kinds}), {rep.where}; first at {rep.first_indices[:3]}")
        return rep
    wrong = err_c > allowed
    if bool(wrong.any()) and _tail_excused(wrong, err_c, err_e, rms_e, level, counted, multiplier):
        rep.tail_excused = int(wrong.sum())
        wrong = torch.zeros_like(wrong)
    rep.eager_max_abs = float(err_e.max()) if err_e.numel() else 0.0
    _stats(rep, c64, t64, rounded, finite, dtype)
    if bool(wrong.any()):
        _finish(rep, wrong, c64, t64, "mismatch")
        rep.message = (f"output {rep.index}: {rep.mismatches} of {rep.numel} element(s) off by up to "
                       f"{rep.max_abs:.3g} (rel {rep.max_rel:.3g}, {rep.max_ulp} ulp; eager's error "
                       f"{rep.eager_max_abs:.3g}), {rep.where}; first at {rep.first_indices[:3]}")
        return rep
    # Degenerate: all zeros where the truth carries signal above eager's own noise, and eager is not zero.
    signal = scale > max(float(err_e.max()) if err_e.numel() else 0.0, tiny)     # a flushed subnormal is no signal
    if (scale > 0 and signal and bool((c64[finite] == 0).all()) and bool((t64[finite] != 0).any())
            and not bool((e64[torch.isfinite(e64)] == 0).all())):
        rep.failure_class, rep.location, rep.where = "degenerate", "all", "everywhere"
        rep.message = f"output {rep.index}: candidate is all zeros, the reference is not"
    return rep


def _absolute_floor(dtype: torch.dtype) -> float:
    """The error no output element is judged below: the dtype's smallest subnormal, and for outputs a device
    computes in float32, float32's smallest normal -- GPU arithmetic may flush float32 subnormals to zero (the
    approximate math functions do), so a subnormal result and a zero are one legitimate answer."""
    if dtype == torch.float64:
        return 0.0
    info = torch.finfo(dtype)
    return max(info.tiny * info.eps, torch.finfo(torch.float32).tiny)


#: Fewest elements an RMS of eager's error is taken over: rows shorter than this are grouped with their
#: neighbours.  A short row's error can be one rounded sum shared by the whole row (layer-norm dx over rows
#: of 9, dy at a large offset: rstd / N * (N g - sum g) errs by ~0.07 per row), so whether eager got lucky
#: on a row says nothing about the candidate there.
MIN_RMS_ELEMENTS = 32


def _local_rms(err: torch.Tensor, counted: torch.Tensor) -> torch.Tensor:
    """Per element: the RMS of ``err`` over the ``counted`` elements of its row -- rows along the last dim
    (consecutive rows together up to ``MIN_RMS_ELEMENTS`` where they are shorter), the whole tensor for
    0-D / 1-D outputs.  Eager's error level at an element is the larger of this and its own error there
    (see the module docstring)."""
    if err.dim() <= 1:
        n = int(counted.sum())
        rms = torch.sqrt((err * err).sum() / n) if n else torch.zeros((), dtype=err.dtype, device=err.device)
        return rms.expand(err.shape)
    width = err.shape[-1]
    if width >= MIN_RMS_ELEMENTS or err.numel() == 0:
        n = counted.sum(-1, keepdim=True).clamp_min(1)
        return torch.sqrt((err * err).sum(-1, keepdim=True) / n).expand(err.shape)
    squares = (err * err).reshape(-1, width).sum(-1)
    counts = counted.reshape(-1, width).sum(-1).to(err.dtype)
    rows = squares.numel()
    per_group = -(-MIN_RMS_ELEMENTS // width)
    groups = max(rows // per_group, 1)                        # the last rows join the last whole group
    which = (torch.arange(rows, device=err.device) // per_group).clamp_max(groups - 1)
    group_squares = torch.zeros(groups, dtype=err.dtype, device=err.device).index_add_(0, which, squares)
    group_counts = torch.zeros(groups, dtype=err.dtype, device=err.device).index_add_(0, which, counts).clamp_min(1)
    rms = torch.sqrt(group_squares / group_counts)[which]
    return rms.reshape(err.shape[:-1] + (1,)).expand(err.shape)


#: The tail allowance (:func:`_tail_excused`).  Rounding errors are heavy-tailed where a row's result amplifies
#: one rounded sum (layer-norm dx with dy at a large offset: one element in a few thousand lies 4-9x past its
#: row's RMS, for eager and for an equally accurate candidate alike, at different elements).  An element past
#: ``multiplier`` x its level is excused only when, over the whole output (at least TAIL_MIN_ELEMENTS counted):
#: the candidate's RMS error is within TAIL_RMS_RATIO of eager's; the element errs by at most TAIL_MAX_RATIO x
#: eager's largest error and TAIL_LEVEL_RATIO x its own level; and such elements are at most TAIL_COUNT_RATIO x
#: as many as eager's own past ``multiplier`` x their row's RMS (at least one).
TAIL_MIN_ELEMENTS = 256
TAIL_RMS_RATIO = 1.25
TAIL_MAX_RATIO = 2.0
TAIL_LEVEL_RATIO = 16.0
TAIL_COUNT_RATIO = 2.0


def _tail_excused(wrong: torch.Tensor, err_c: torch.Tensor, err_e: torch.Tensor, rms_e: torch.Tensor,
                  level: torch.Tensor, counted: torch.Tensor, multiplier: float) -> bool:
    """Are all the ``wrong`` elements the tail of an error distribution no worse than eager's?  (See above.)"""
    n = int(counted.sum())
    if n < TAIL_MIN_ELEMENTS:
        return False
    c, e = err_c[counted], err_e[counted]
    if float(c.pow(2).mean().sqrt()) > TAIL_RMS_RATIO * float(e.pow(2).mean().sqrt()):
        return False
    eager_tail = int(((err_e > multiplier * rms_e) & counted).sum())
    if int(wrong.sum()) > max(1.0, TAIL_COUNT_RATIO * eager_tail):
        return False
    near = (err_c <= TAIL_MAX_RATIO * float(e.max())) & (err_c <= TAIL_LEVEL_RATIO * level)
    return bool((near | ~wrong).all())


def _across_overflow(c64: torch.Tensor, t64: torch.Tensor, allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Elements whose NaN/inf status differs from the truth's only by where rounding puts them against the
    dtype's overflow threshold (the largest finite value plus half its ulp: 65520 in fp16).  A float64 truth
    of 65520.9 rounds to inf in fp16, and a candidate computing 65519 stores 65504: 2.6e-4 off, an fp16-sized
    error (seen: layer-norm dx, x tiny and weight at a large offset, where eager overflowed as the truth did).
    Excused: a finite candidate within ``allowed`` of a finite truth past the threshold -- judged with the
    finite elements then -- and an infinite candidate of the truth's sign where the truth lies within
    ``allowed`` below the threshold."""
    if dtype == torch.float64 or not dtype.is_floating_point:
        return torch.zeros(c64.shape, dtype=torch.bool, device=c64.device)
    threshold = overflow_threshold(dtype)
    exact = torch.isfinite(t64)
    over = exact & (t64.abs() >= threshold) & torch.isfinite(c64) & ((c64 - t64).abs() <= allowed)
    under = (exact & (t64.abs() < threshold) & torch.isinf(c64) & (torch.sign(c64) == torch.sign(t64))
             & (threshold - t64.abs() <= allowed))
    return over | under


def _nonfinite_code(x: torch.Tensor) -> torch.Tensor:
    code = torch.zeros(x.shape, dtype=torch.int8, device=x.device)
    code[torch.isnan(x)] = 1
    code[x == math.inf] = 2
    code[x == -math.inf] = 3
    return code


def _nonfinite_kinds(x: torch.Tensor) -> str:
    kinds = []
    if bool(torch.isnan(x).any()):
        kinds.append("NaN")
    if bool(torch.isinf(x).any()):
        kinds.append("inf")
    if bool(torch.isfinite(x).any()):
        kinds.append("finite where NaN/inf expected")
    return ", ".join(kinds)


def _stats(rep: OutputReport, c64, t64, rounded, finite, dtype) -> None:
    if not bool(finite.any()):
        return
    diff = (c64 - t64).abs()[finite]
    rep.max_abs = float(diff.max())
    rel = diff / t64.abs()[finite].clamp_min(torch.finfo(dtype).tiny)
    rep.max_rel = float(rel.max())
    rep.max_ulp = int(ulp_distance(c64[finite].to(dtype), rounded[finite].to(dtype)).max())


def ulp_distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Elementwise distance in units in the last place between same-dtype float tensors."""
    int_type = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[a.dtype.itemsize]
    bits = a.dtype.itemsize * 8

    def key(x: torch.Tensor) -> torch.Tensor:
        i = x.contiguous().view(int_type).to(torch.int64)
        mag = i & ((1 << (bits - 1)) - 1)
        return torch.where(i < 0, -mag, mag)

    return (key(a) - key(b)).abs()


def _finish(rep: OutputReport, wrong: torch.Tensor, c64, t64, klass: str, exact: bool = False) -> OutputReport:
    rep.failure_class = klass
    rep.mismatches = int(wrong.sum())
    idx = wrong.nonzero()
    rep.first_indices = [tuple(int(v) for v in row) for row in idx[:MAX_INDICES]]
    rep.location, rep.where = locate(wrong)
    if exact:
        rep.message = (f"output {rep.index}: {rep.mismatches} of {rep.numel} element(s) differ, "
                       f"{rep.where}; first at {rep.first_indices[:3]}")
    return rep


@dataclasses.dataclass
class Spots:
    """Where the True entries of a mask sit, as :func:`locate` reads them: built from the whole mask
    (:meth:`of`) or chunk by chunk in flat order (``harness.oracle_chunks``)."""

    shape: tuple
    count: int = 0                   # True entries
    first: int = -1                  # their first and last flat index
    last: int = -1
    rows: int = 0                    # dim-0 indices holding one (2-D and more)
    first_rows: list = dataclasses.field(default_factory=list)     # the first four of them
    cols: torch.Tensor | None = None  # per last-dim index: holds one (2-D and more)

    @classmethod
    def of(cls, wrong: torch.Tensor) -> "Spots":
        flat = wrong.flatten().nonzero().flatten()
        spots = cls(tuple(wrong.shape), flat.numel())
        if spots.count:
            spots.first, spots.last = int(flat[0]), int(flat[-1])
        if wrong.dim() >= 2 and spots.count:
            rows = wrong.flatten(1).any(1).nonzero().flatten()
            spots.rows, spots.first_rows = rows.numel(), rows[:4].tolist()
            spots.cols = wrong.reshape(-1, wrong.shape[-1]).any(0)
        return spots

    def describe(self) -> tuple[str, str]:
        """(coarse kind, description) of where the entries sit."""
        n = math.prod(self.shape)
        if len(self.shape) == 0 or n == 1:
            return "scalar", "in the single output element"
        k, first, last = self.count, self.first, self.last
        if k == 0:
            return "none", "nowhere"
        if k >= 0.9 * n:
            return "all", f"nearly everywhere ({k} of {n})"
        if first >= 1 << 20:
            return "beyond_2^20", f"only past flat element 1,048,576 (from {first} of {n})"
        if len(self.shape) >= 2:
            height, width = self.shape[0], self.shape[-1]
            cols = self.cols.nonzero().flatten()
            if self.first_rows[0] >= 1 << 20:
                return "beyond_2^20", f"only rows past 1,048,576 ({self.rows} of {height})"
            if self.rows <= max(1, height // 4):
                tail = _tail_block(self.first_rows[0], height)
                if tail:
                    return "tail", f"only the tail rows {self.first_rows[0]}..{height - 1} (the rows a mask " \
                                   f"covers for row block {tail})"
                return "rows", f"in {self.rows} of {height} rows (first rows {self.first_rows})"
            if cols.numel() <= max(1, width // 4):
                return "cols", f"in {cols.numel()} of {width} columns (first {cols[:4].tolist()})"
            return "scattered", f"scattered ({k} of {n}, in {self.rows} rows and {cols.numel()} columns)"
        block = _tail_block(first, n)
        if block:
            return "tail", f"only the tail block (elements {first}..{n - 1}; the lanes a mask covers " \
                           f"for block size {block})"
        if last < n // 2 and first == 0:
            return "head", f"only the head (elements 0..{last} of {n})"
        return "scattered", f"scattered ({k} of {n}, elements {first}..{last})"


def locate(wrong: torch.Tensor) -> tuple[str, str]:
    """(coarse kind, description) of where the True entries of ``wrong`` sit."""
    return Spots.of(wrong).describe()


def _tail_block(first: int, n: int) -> int | None:
    """The smallest power-of-two block whose partial last block contains every mismatch."""
    b = 16
    while b < n and b <= 1 << 20:
        start = (n // b) * b
        if n % b and first >= start:
            return b
        b *= 2
    return None


def has_new_nan(output: Any, truth: Any) -> bool:
    """Some floating output element is NaN where the truth's is not."""
    for c, t in zip(flatten(output), flatten(truth)):
        if isinstance(c, torch.Tensor) and c.dtype.is_floating_point and isinstance(t, torch.Tensor):
            if bool((torch.isnan(c) & ~torch.isnan(t.to(c.device))).any()):     # where c is: no host copy
                return True
    return False


def bitwise_diff(x: Any, y: Any) -> tuple[str, str] | None:
    """(kind, message) of the first output where two calls' results differ bit for bit (NaN matches NaN), or None."""
    for i, (a, b) in enumerate(zip(flatten(x), flatten(y))):
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
            if a.shape != b.shape or a.dtype != b.dtype:
                return "shape", f"output {i} changed shape/dtype between calls"
            a8, b8 = a.cpu().contiguous(), b.cpu().contiguous()
            if a.dtype.is_floating_point:
                same = (a8 == b8) | (torch.isnan(a8) & torch.isnan(b8))
            else:
                same = a8 == b8
            if not bool(same.all()):
                kind, where = locate(~same)
                return f"out{i}:{kind}", f"output {i}: {int((~same).sum())} element(s) differ, {where}"
        elif a != b:
            return f"out{i}:scalar", f"output {i}: {a!r} vs {b!r}"
    return None
