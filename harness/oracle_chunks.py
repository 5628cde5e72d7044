"""The oracle's comparison of a huge floating output, chunk by chunk, on the device the output is on.

:func:`harness.oracle.compare` judges an output on CPU copies with about 18 float64 temporaries per element
(``harness.huge.ORACLE_HOST_TEMPORARIES``): 300 GiB of host memory for 2^31 elements, which ruled every subject
whose output is as large as its input out of huge mode.  The runner passes it :func:`compare_large`, which
past :data:`CHUNKED_FROM` elements judges with :func:`compare_float` instead: the same verdict -- the same
rule, the same allowances, the same report, field for field (tests/harness/test_oracle_chunks.py checks it
against the whole-tensor comparison) -- from two passes over the output in chunks of about
:data:`CHUNK_ELEMENTS`, on the output's own device (the GPU in huge mode), so memory is bounded by a chunk,
not the tensor:

1. the output-wide figures: the truth's largest finite magnitude (the ``atol`` scale), eager's largest error,
   the sums of squared errors and the count the tail allowance and a 0-D / 1-D output's RMS take, and what the
   ``degenerate`` check asks (is the candidate zero wherever it is finite, ...);
2. per chunk, every element's allowance and verdict, with row RMS levels from the chunk's own rows -- chunks are
   whole rows, and whole groups of ``MIN_RMS_ELEMENTS`` where rows are shorter, the last chunk taking the last
   group's remainder as the whole-tensor grouping does -- accumulating the counts, the maxima, the first
   indices and where the failing elements sit (:class:`harness.oracle.Spots`).

A mismatch's message also says where its first element sits against 2^31 (the offset past which 32-bit
indexing wraps).
"""
from __future__ import annotations

import math

import torch

from . import oracle
from .oracle import MAX_INDICES, MIN_RMS_ELEMENTS, OutputReport, Spots

#: Outputs with more elements than this are compared chunk by chunk on their own device.
CHUNKED_FROM = 1 << 26
#: About this many elements a chunk (whole rows, or whole groups of short rows).
CHUNK_ELEMENTS = 1 << 24


def _row_groups(shape: tuple) -> tuple[int, int, int]:
    """(width of a row, rows in all, rows a chunk boundary must be a multiple of) of an output of ``shape``
    as the oracle's row RMS sees it: rows along the last dim, grouped up to ``MIN_RMS_ELEMENTS``; a 0-D or 1-D
    output is one row of width 1 per element (its RMS is output-wide, taken in the first pass)."""
    if len(shape) <= 1:
        n = math.prod(shape)
        return 1, n, 1
    width = shape[-1]
    rows = math.prod(shape) // width if width else 0
    return width, rows, 1 if width >= MIN_RMS_ELEMENTS else -(-MIN_RMS_ELEMENTS // width)


def chunks(shape: tuple, chunk_elements: int) -> list[tuple[int, int]]:
    """Flat [start, stop) element ranges covering an output of ``shape``: whole rows (and row groups), about
    ``chunk_elements`` each; a last range shorter than a group joins the one before it."""
    width, rows, group = _row_groups(shape)
    if rows == 0:
        return []
    step = group * max(1, chunk_elements // max(1, width * group))
    bounds = list(range(0, rows, step))
    if len(bounds) > 1 and rows - bounds[-1] < group:
        bounds.pop()
    bounds.append(rows)
    return [(a * width, b * width) for a, b in zip(bounds, bounds[1:])]


class _Where:
    """The failing elements of one kind, accumulated over chunks in flat order: their count, first indices and
    a :class:`Spots` for :func:`oracle.locate`'s description."""

    def __init__(self, shape: tuple, device: torch.device):
        self.shape = shape
        self.spots = Spots(shape)
        self.indices: list[tuple] = []
        self.per_row = math.prod(shape[1:]) if len(shape) >= 2 else 1
        self.last_row = -1
        if len(shape) >= 2:
            self.spots.cols = torch.zeros(shape[-1], dtype=torch.bool, device=device)

    def add(self, start: int, mask: torch.Tensor) -> None:
        flat = mask.nonzero().flatten()
        if not flat.numel():
            return
        flat = flat + start
        s = self.spots
        if s.count == 0:
            s.first = int(flat[0])
        s.last = int(flat[-1])
        s.count += flat.numel()
        for f in flat[:max(0, MAX_INDICES - len(self.indices))].tolist():
            self.indices.append(_unravel(f, self.shape))
        if len(self.shape) >= 2:
            rows = torch.unique_consecutive(flat // self.per_row)
            if int(rows[0]) == self.last_row:        # a dim-0 row the previous chunk already counted
                rows = rows[1:]
            if rows.numel():
                s.rows += rows.numel()
                s.first_rows.extend(rows[:max(0, 4 - len(s.first_rows))].tolist())
                self.last_row = int(rows[-1])
            s.cols.index_fill_(0, flat % self.shape[-1], True)

    def finish(self, rep: OutputReport, klass: str) -> None:
        rep.failure_class = klass
        rep.mismatches = self.spots.count
        rep.first_indices = list(self.indices)
        rep.location, rep.where = self.spots.describe()


def _unravel(flat: int, shape: tuple) -> tuple:
    out = []
    for extent in reversed(shape):
        flat, r = divmod(flat, extent)
        out.append(r)
    return tuple(reversed(out))


def past_2_31(first: int, shape: tuple) -> str:
    """Where the first failing element sits against 2^31 (row, column, flat offset)."""
    at = _unravel(first, shape)
    side = "past" if first >= 2 ** 31 else "below"
    return f"the first at {list(at)}, flat offset {first:,} ({side} 2^31 = 2,147,483,648)"


def compare_large(rep: OutputReport, c: torch.Tensor, e: torch.Tensor, t: torch.Tensor, multiplier: float,
                  rtol, atol, spread=None, noise=None, may_overflow=None) -> OutputReport | None:
    """``oracle.compare``'s ``large``: the report of an output past :data:`CHUNKED_FROM` elements, judged here;
    None for a smaller one (the oracle judges it on the CPU)."""
    if e.numel() <= CHUNKED_FROM:
        return None
    return compare_float(rep, c, e, t, multiplier, rtol, atol, spread, noise, may_overflow)


def compare_float(rep: OutputReport, c: torch.Tensor, e: torch.Tensor, t: torch.Tensor, multiplier: float,
                  rtol, atol, spread=None, noise=None, may_overflow=None,
                  chunk_elements: int | None = None) -> OutputReport:
    """:func:`oracle._compare_float` in two passes over chunks of the flattened output (of ``chunk_elements``,
    default :data:`CHUNK_ELEMENTS`), on ``c``'s device."""
    dev = c.device
    dtype = e.dtype
    shape = tuple(e.shape)
    flat = [None if x is None else x.detach().reshape(-1) for x in (c, e, t, spread, noise, may_overflow)]
    d_rtol, d_atol = oracle.DEFAULT_FLOORS.get(dtype, (1e-5, 1e-5))
    rtol = d_rtol if rtol is None else rtol
    atol = d_atol if atol is None else atol
    tiny = oracle._absolute_floor(dtype)
    ranges = chunks(shape, chunk_elements or CHUNK_ELEMENTS)

    def views(a: int, b: int):
        c64, e64, t64 = (flat[k][a:b].to(dev, torch.float64) for k in range(3))
        extra = [None if x is None else x[a:b].to(dev) for x in flat[3:]]
        return c64, e64, t64, extra

    # pass 1: the output-wide figures
    scale, err_e_max, n_counted, sum_c2, sum_e2 = 0.0, 0.0, 0, 0.0, 0.0
    c_all_zero, t_any_nonzero, e_all_zero = True, False, True
    for a, b in ranges:
        c64, e64, t64, _ = views(a, b)
        finite = torch.isfinite(c64) & torch.isfinite(t64)
        counted = finite & torch.isfinite(e64)
        err_c = torch.where(counted, (c64 - t64).abs(), 0.0)
        err_e = torch.where(counted, (e64 - t64).abs(), 0.0)
        scale = max(scale, float(torch.where(finite, t64.abs(), 0.0).max()))
        err_e_max = max(err_e_max, float(err_e.max()))
        n_counted += int(counted.sum())
        sum_c2 += float((err_c * err_c).sum())
        sum_e2 += float((err_e * err_e).sum())
        c_all_zero = c_all_zero and bool((c64[finite] == 0).all())
        t_any_nonzero = t_any_nonzero or bool((t64[finite] != 0).any())
        e_all_zero = e_all_zero and bool((e64[torch.isfinite(e64)] == 0).all())
    global_rms = math.sqrt(sum_e2 / n_counted) if n_counted else 0.0

    # pass 2: each element's verdict
    nonfinite, wrong_at = _Where(shape, dev), _Where(shape, dev)
    kinds = {"NaN": False, "inf": False, "finite where NaN/inf expected": False}
    eager_tail, near_all = 0, True
    max_abs, max_rel, max_ulp, any_finite = 0.0, 0.0, 0, False
    width, _, _ = _row_groups(shape)
    for a, b in ranges:
        c64, e64, t64, (spread_c, noise_c, overflow_c) = views(a, b)
        rounded = t64.to(dtype).double()
        nf_c, nf_t, nf_e = (oracle._nonfinite_code(x) for x in (c64, rounded, e64))
        nf_wrong = (nf_c != nf_t) & (nf_c != nf_e) & ~((nf_c != 0) & (nf_e != 0) & (nf_t == 0))
        if overflow_c is not None:
            nf_wrong &= ~((nf_c != 0) & (nf_t == 0) & overflow_c)
        finite = torch.isfinite(c64) & torch.isfinite(t64)
        counted = finite & torch.isfinite(e64)
        err_c = torch.where(finite, (c64 - t64).abs(), 0.0)
        err_e = torch.where(counted, (e64 - t64).abs(), 0.0)
        mag = torch.where(finite, t64.abs(), 0.0)
        if len(shape) <= 1:
            rms_e = torch.full_like(err_e, global_rms)
        else:
            rms_e = oracle._local_rms(err_e.reshape(-1, width), counted.reshape(-1, width)).reshape(-1)
        level = torch.maximum(err_e, rms_e)
        if spread_c is not None:
            level = torch.maximum(level, torch.where(finite, spread_c.double(), 0.0))
        if noise_c is not None:
            level = torch.maximum(level, torch.where(finite, noise_c.double(), 0.0))
        floor = multiplier * level + atol * scale + tiny
        allowed = floor + rtol * mag
        if bool(nf_wrong.any()):
            nf_wrong &= ~oracle._across_overflow(c64, t64, floor + rtol * t64.abs(), dtype)
        if bool(nf_wrong.any()):
            nonfinite.add(a, nf_wrong)
            bad = c64[nf_wrong]
            kinds["NaN"] |= bool(torch.isnan(bad).any())
            kinds["inf"] |= bool(torch.isinf(bad).any())
            kinds["finite where NaN/inf expected"] |= bool(torch.isfinite(bad).any())
        wrong = err_c > allowed
        wrong_at.add(a, wrong)
        eager_tail += int(((err_e > multiplier * rms_e) & counted).sum())
        near = (err_c <= oracle.TAIL_MAX_RATIO * err_e_max) & (err_c <= oracle.TAIL_LEVEL_RATIO * level)
        near_all = near_all and bool((near | ~wrong).all())
        if bool(finite.any()):
            any_finite = True
            diff = (c64 - t64).abs()[finite]
            max_abs = max(max_abs, float(diff.max()))
            max_rel = max(max_rel, float((diff / t64.abs()[finite].clamp_min(torch.finfo(dtype).tiny)).max()))
            max_ulp = max(max_ulp, int(oracle.ulp_distance(c64[finite].to(dtype), rounded[finite].to(dtype)).max()))

    if nonfinite.spots.count:
        nonfinite.finish(rep, "nonfinite")
        rep.message = (f"output {rep.index}: {rep.mismatches} element(s) have the wrong NaN/inf status "
                       f"({', '.join(k for k, v in kinds.items() if v)}), {rep.where}; first at "
                       f"{rep.first_indices[:3]}; {past_2_31(nonfinite.spots.first, shape)}")
        return rep
    wrong_count = wrong_at.spots.count
    if wrong_count and n_counted >= oracle.TAIL_MIN_ELEMENTS and near_all \
            and math.sqrt(sum_c2 / n_counted) <= oracle.TAIL_RMS_RATIO * math.sqrt(sum_e2 / n_counted) \
            and wrong_count <= max(1.0, oracle.TAIL_COUNT_RATIO * eager_tail):
        rep.tail_excused = wrong_count
        wrong_count = 0
    rep.eager_max_abs = err_e_max
    if any_finite:
        rep.max_abs, rep.max_rel, rep.max_ulp = max_abs, max_rel, max_ulp
    if wrong_count:
        wrong_at.finish(rep, "mismatch")
        rep.message = (f"output {rep.index}: {rep.mismatches} of {rep.numel} element(s) off by up to "
                       f"{rep.max_abs:.3g} (rel {rep.max_rel:.3g}, {rep.max_ulp} ulp; eager's error "
                       f"{rep.eager_max_abs:.3g}), {rep.where}; first at {rep.first_indices[:3]}; "
                       f"{past_2_31(wrong_at.spots.first, shape)}")
        return rep
    signal = scale > max(err_e_max, tiny)
    if scale > 0 and signal and c_all_zero and t_any_nonzero and not e_all_zero:
        rep.failure_class, rep.location, rep.where = "degenerate", "all", "everywhere"
        rep.message = f"output {rep.index}: candidate is all zeros, the reference is not"
    return rep
