"""GPU-only huge shapes: subjects drawn with an input just past 2^31 elements, where 32-bit offsets overflow.

A kernel that computes ``pid * BLOCK + tl.arange(0, BLOCK)`` or ``row * N + col``
in int32 wraps once an index passes 2^31 - 1 and reads or writes the wrong place;
the normal draws (bounded by ``config.max_example_bytes``) never get there.  In
huge mode the *size dim* (:func:`candidates`: the first ranged dim of an input with
the most dims) is drawn so that input holds about each of :data:`HUGE_SIZES`
elements, instead of from its declared range (the declared upper bound keeps CPU
runs small; the kernels must still be right past it), with the other dims at a few
values each (:data:`OTHER_VALUES`: 1, short and odd, about a thousand, 65,537).
A 1-D subject's size dim is its one dim.  An output past ``oracle_chunks.CHUNKED_FROM``
elements is judged on the GPU a chunk at a time (:mod:`harness.oracle_chunks`: the
comparison on the host took about 300 GiB per 2^31 elements), so subjects whose
outputs are as large as their inputs -- norms, softmax, activations -- run too, as
far as GPU memory allows.  The size dim is a leading dim in the bundled 2-D
subjects, so a single row past 2^31 elements is not drawn.  The float64 truth of a reference that separates
along the size dim (row-wise outputs, sums over the rows: measured, ``reference_chunks.split_for``) is computed
a slice at a time (:mod:`harness.reference_chunks`), so a backward's float64 autograd state is one slice's, not
the tensor's.

Only on CUDA: an input of 2^31 float32 elements is 8 GiB, with its float64
reference copy 24 GiB, so the interpreter on CPU is refused with a clear
message.  The inputs are generated on the GPU itself, a chunk at a time, in
their own dtype (:mod:`harness.tensors`, past ``ON_DEVICE_MIN_NUMEL``
elements): a build is a few passes over GPU memory where the float64
generation on the host took tens of seconds and 16-32 GiB of host memory, and
the values are the same on every CUDA device.  Each (dtype, size, other dims) draw is kept only when
:func:`example_bytes`'s estimate of one example fits in free GPU memory
(``torch.cuda.mem_get_info``) and available host memory (what the oracle needs
for the outputs it compares on the CPU); the pairs left out are
listed with the figures, and a subject where none fits is skipped with that
reason.

How it is reached: ``tritondiff fuzz --huge``, the pytest profile
``gpu_huge``, or ``TRITONDIFF_HUGE_SHAPES=1`` (``config.huge_shapes``) for
``explore`` / ``tritondiff check``.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, Callable, Iterable

from tritondiff.base import device
from .api import Constant, DimValue, Subject, TensorSpec
from .exc import HugeShapesUnavailable, UsageError

#: Element counts a plan sizes the input to (drawn in :func:`reach_order`'s order): both sides of 2^31, a
#: partial block past it, a whole 2^20 block past it, and past 2^32 (where an unsigned 32-bit offset wraps too).
HUGE_SIZES = (2 ** 31 - 1, 2 ** 31, 2 ** 31 + 1, 2 ** 31 + 4097, 2 ** 31 + 2 ** 20 + 1, 2 ** 32 + 17)
#: Dtypes drawn in huge mode (where the subject allows them).
HUGE_DTYPES = ("float32", "float16")
#: Hang timeout of one huge example, seconds.  Its inputs are generated on the GPU now (a few passes
#: over GPU memory per build, four builds an example); what stays slow is the first call's compilation
#: and, for an output as large as the input, the oracle's float64 comparison on the CPU (tens of seconds
#: per call judged).
EXAMPLE_TIMEOUT_S = 300.0
#: Fraction of the free memory an example may plan to use.
SAFETY = 0.9
#: Headroom for the CUDA context, allocator fragmentation and kernel workspaces.
HEADROOM_BYTES = 2 ** 30
#: float64 temporaries per output element of the oracle's comparison on the CPU, at its peak (measured:
#: ``harness.oracle.compare`` of 2^24-element float32 outputs grew the resident set by 18 x 8 bytes per
#: element, passing or failing: upcasts, errors, magnitudes, allowances, masks, statistics).
ORACLE_HOST_TEMPORARIES = 18
GIB = 2 ** 30

_ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int32": 4, "int64": 8, "int8": 1,
             "uint8": 1, "bool": 1}


@dataclasses.dataclass(frozen=True)
class HugePlan:
    """What huge mode draws for one subject: the (dtype, size, other dims) draws that fit, and why others
    were left out."""

    subject: str
    dim: str
    # (dtype of the drawn tensors, size of ``dim``, the other dims' values as (name, value) pairs), the
    # likeliest to wrap a 32-bit offset first (:func:`reach_order`)
    pairs: tuple[tuple[str, int, tuple[tuple[str, int], ...]], ...]
    left_out: tuple[str, ...]                # one line per pair that does not fit
    free_bytes: int
    host_bytes: int
    lead: int = 1                            # how many leading pairs are of the likeliest tier

    def led_by(self, k: int) -> "HugePlan":
        """The plan with the ``k``-th pair of its leading tier (mod its size) first, the rest in order: a
        search draws the first pair first, so searches with other seeds (a campaign's shards, its nights)
        start from other pairs of that tier instead of repeating one example."""
        i = k % max(self.lead, 1)
        pairs = (self.pairs[i],) + self.pairs[:i] + self.pairs[i + 1:]
        return dataclasses.replace(self, pairs=pairs)

    def describe(self) -> str:
        sizes = sorted({n for _, n, _ in self.pairs})
        dtypes = sorted({d for d, _, _ in self.pairs})
        others = sorted({o for _, _, o in self.pairs if o}, key=lambda o: [v for _, v in o])
        at = (" at " + " | ".join(", ".join(f"{d}={v}" for d, v in o) for o in others)) if others else ""
        return (f"{self.subject}: {self.dim} in {{{', '.join(_pow2(n) for n in sizes)}}}{at} x {', '.join(dtypes)} "
                f"({_gib(self.free_bytes)} GPU, {_gib(self.host_bytes)} host memory free"
                + (f"; {len(self.left_out)} pair(s) left out" if self.left_out else "") + ")")


# ---------------------------------------------------------------------------------------------- eligibility

def size_dim(subject: Subject) -> tuple[str | None, str]:
    """(the size dim, "") of a subject huge mode can draw, else (None, why not): that of the first of
    :func:`candidates` (a plan falls back to the next ones when nothing fits)."""
    found = candidates(subject)
    if found:
        return found[0][1], ""
    named = sorted({d for spec in subject.tensor_inputs().values() for d in spec.shape if isinstance(d, str)})
    if not named:
        return None, "no tensor input with a named dim"
    if not any(_ranged(subject, d) for d in named):
        fixed = ", ".join(f"{d!r} = {subject.dims[d][0]}" for d in named)
        return None, f"every dim of its inputs is fixed ({fixed})"
    return None, "every ranged dim appears twice in its input (a square input cannot be sized to 2^31 by one dim)"


def candidates(subject: Subject) -> list[tuple[TensorSpec, str]]:
    """(input, size dim) pairs huge mode can draw, in the order a plan tries them: inputs with the most dims
    first (the first declared on a tie), each with its first ranged dim that it uses once.  The size dim is
    drawn so that input holds just past 2^31 elements; the other dims take :func:`other_values`."""
    found = []
    for spec in subject.tensor_inputs().values():
        dims = [d for d in spec.shape if _ranged(subject, d) and spec.shape.count(d) == 1]
        if dims:
            found.append((spec, dims[0]))
    return sorted(found, key=lambda pair: -len(pair[0].shape))


def _ranged(subject: Subject, dim: Any) -> bool:
    return isinstance(dim, str) and subject.dims[dim][0] != subject.dims[dim][1]


#: Values the dims other than the size dim take in huge mode (clamped to each dim's range), position by
#: position across the dims: short and odd (masked tails), about a thousand, and long (a split reduction).
OTHER_VALUES = (1, 3, 1000, 65_537)


def other_values(subject: Subject, dim: str) -> tuple[tuple[tuple[str, int], ...], ...]:
    """The combinations of the other dims' values a plan tries: the k-th of each dim's clamped
    :data:`OTHER_VALUES` together (not every product); ``((),)`` for a subject with the size dim only."""
    others = [d for d in subject.dims if d != dim and _used(subject, d)]
    if not others:
        return ((),)
    per_dim = []
    for d in others:
        lo, hi = subject.dims[d]
        per_dim.append(list(dict.fromkeys(min(max(v, lo), hi) for v in OTHER_VALUES)))
    width = max(len(values) for values in per_dim)
    combos = {tuple((d, values[min(k, len(values) - 1)]) for d, values in zip(others, per_dim)) for k in range(width)}
    return tuple(sorted(combos, key=lambda combo: [v for _, v in combo]))


def _used(subject: Subject, dim: str) -> bool:
    return any(dim in spec.shape for spec in subject.tensor_inputs().values())


def size_for(subject: Subject, spec: TensorSpec, dim: str, target: int, others: tuple[tuple[str, int], ...]) -> int:
    """The size dim's value at which input ``spec`` holds at least ``target`` elements (at least the dim's
    declared lower bound)."""
    fixed = dict(others)
    rest = 1
    for d in spec.shape:
        if d != dim:
            rest *= d if isinstance(d, int) else fixed[d]
    return max(-(-target // max(rest, 1)), subject.dims[dim][0])


def huge_dtypes(subject: Subject) -> tuple[str, ...]:
    """The huge-mode dtypes the subject's floating own-dtype inputs with dims all allow.  Inputs with no
    floating dtype (indices, targets) keep drawing their own dtypes: they do not restrict the plan."""
    from .tensors import torch_dtype

    own = [spec for spec in subject.tensor_inputs().values() if spec.dtype_like is None and spec.shape
           and any(torch_dtype(dt).is_floating_point for dt in spec.dtypes)]
    return tuple(dt for dt in HUGE_DTYPES if own and all(dt in spec.dtypes for spec in own))


# ---------------------------------------------------------------------------------------------- memory

def _shape(spec: TensorSpec, dims: dict[str, int]) -> tuple[int, ...]:
    return tuple(d if isinstance(d, int) else dims[d] for d in spec.shape)


def output_elements(subject: Subject, dtype: str, dims: dict[str, int]) -> list[tuple[int, int]] | None:
    """(elements, bytes per element) of each of the reference's tensor outputs at ``dims``, found on the meta
    device (no memory is touched); None when the reference cannot run there (then assume the worst)."""
    import torch

    from .oracle import flatten
    from .tensors import torch_dtype

    kwargs: dict[str, Any] = {}
    try:
        for name, spec in subject.inputs.items():
            if isinstance(spec, TensorSpec):
                dt = dtype if spec.dtype_like or dtype in spec.dtypes else spec.dtypes[0]
                kwargs[name] = torch.empty(_shape(spec, dims), dtype=torch_dtype(dt), device="meta")
            elif isinstance(spec, Constant):
                kwargs[name] = spec.value
            elif isinstance(spec, DimValue):
                kwargs[name] = dims[spec.name]
            else:
                return None                  # a drawn scalar: no value to probe with
        out = subject.reference(**kwargs)
    except Exception:  # noqa: BLE001 - data-dependent references (and shapes past torch's limits) do not run on meta
        return None
    return [(t.numel(), t.element_size()) for t in flatten(out) if isinstance(t, torch.Tensor)]


def example_bytes(subject: Subject, dtype: str, dims: dict[str, int], *,
                  measured: "ReferenceCost | None" = None) -> tuple[int, int]:
    """(GPU bytes, host bytes) one example of ``subject`` at ``dims`` in ``dtype`` may need at its peak.

    The inputs are generated on the GPU (:mod:`harness.tensors`: in their dtype, a chunk at a time; the
    generator's workspace is counted once).  GPU, the larger of two phases of
    :func:`harness.runner.run_case`: the float64 reference (the inputs' float64 upcast and the copy of
    it the reference is given, the reference's outputs and as much again for its intermediates, eager's
    outputs) and the candidate calls (the upcast, kept for the spread; eager's and the float64 outputs;
    inputs plus the mutation snapshot and the four bool masks of the mutation check; two calls' outputs
    and the copy of one).  The comparison: an output of more than ``oracle_chunks.CHUNKED_FROM`` elements is
    judged on the GPU a chunk at a time (:data:`ORACLE_HOST_TEMPORARIES` float64 temporaries per element of
    one chunk, on the GPU); a smaller one on the host, with its copies of the candidate's, eager's and the
    float64 outputs and those temporaries per element.  Nothing on the host for the inputs.  Not counted:
    the spread (``runner._spread``), measured only once a comparison has failed, which adds about five
    float64 copies of the inputs; where they do not fit the verdict is judged without it.  Outputs are
    sized on the meta device, or taken as large as the inputs when the reference cannot run there.
    ``measured``: the reference phase as measured on the GPU at a small size (:func:`measure_reference`),
    whose bytes per input element raise the estimate where they are larger: a backward reference's float64
    autograd keeps intermediates the estimate does not count (layer norm's backward peaked 30% over it).
    They never lower it: scaling a small run by all input elements underestimates a reference whose memory
    grows with the sized input alone, and running out of memory at a huge example is a skip
    (``runner._beyond``), which would hide an optimistic plan.  Where the measurement found the truth
    separable along the size dim (``measured.chunked``, :mod:`harness.reference_chunks`), the float64 phase
    holds eager's outputs, the native inputs, the truth's outputs and one slice's reference (the measured
    figure times a slice's elements), and no float64 copy of the inputs is kept for the calls.
    """
    from .oracle_chunks import CHUNK_ELEMENTS as COMPARE_CHUNK, CHUNKED_FROM
    from .reference_chunks import CHUNK_ELEMENTS
    from .tensors import on_device_workspace_bytes

    n = sum(math.prod(_shape(spec, dims)) for spec in subject.tensor_inputs().values() if spec.shape)
    inputs, inputs64, masks = _ITEMSIZE[dtype] * n, 8 * n, 4 * n
    probe = output_elements(subject, dtype, dims)
    each = probe if probe is not None else [(n, _ITEMSIZE[dtype])]
    outputs, outputs64 = sum(k * item for k, item in each), 8 * sum(k for k, _ in each)
    reference = 2 * inputs64 + 2 * outputs64 + outputs
    chunked = measured is not None and measured.chunked
    if chunked:                                    # eager whole; then the truth a slice at a time
        sized = max(math.prod(_shape(spec, dims)) for spec in subject.tensor_inputs().values() if spec.shape)
        part = min(1.0, CHUNK_ELEMENTS / max(sized, 1)) if sized else 1.0
        one_slice = max(measured.per_element * n, 2 * inputs64 + 2 * outputs64 + outputs) * part
        reference = max(measured.eager_per_element * n, 2 * inputs + 2 * outputs,
                        outputs + inputs + outputs64 + int(one_slice))
    elif measured is not None:                     # measured: it raises the estimate, never lowers it
        reference = max(reference, int(measured.per_element * n))
    compared_on_gpu = any(k > CHUNKED_FROM for k, _ in each)
    calls = ((0 if chunked else inputs64) + outputs64 + outputs + 2 * inputs + masks + 3 * outputs
             + (ORACLE_HOST_TEMPORARIES * 8 * COMPARE_CHUNK if compared_on_gpu else 0))
    host = sum((2 * item + 8 + ORACLE_HOST_TEMPORARIES * 8) * k for k, item in each if k <= CHUNKED_FROM)
    return max(reference, calls) + on_device_workspace_bytes() + HEADROOM_BYTES, host + HEADROOM_BYTES


def plan(subject: Subject, *, free_bytes: int, host_bytes: int, sizes: tuple[int, ...] = HUGE_SIZES,
         calibrate: Callable[[str, str, tuple[tuple[str, int], ...]], "ReferenceCost | None"] | None = None
         ) -> HugePlan:
    """The (dtype, size, other dims) draws of ``subject`` that fit the given free GPU and host memory.

    ``sizes`` are element counts of the input a plan sizes (:func:`candidates`, the first one with a draw
    that fits); the size dim is chosen to reach each one with the other dims at each of
    :func:`other_values`.  Pure logic (no device is touched): :func:`plan_on_device` measures the memory,
    and passes ``calibrate(dtype, size dim, other dims)``, the reference phase as measured
    (:class:`ReferenceCost`; None: estimate it).  Raises :class:`~harness.exc.HugeShapesUnavailable`
    (``reason``) when the subject has no size dim, allows no huge dtype, or nothing fits.
    """
    found = candidates(subject)
    if not found:
        why = size_dim(subject)[1]
        raise HugeShapesUnavailable(f"{subject.name}: no dim to draw past 2^31 ({why})", reason=why)
    dtypes = huge_dtypes(subject)
    if not dtypes:
        why = f"its inputs allow none of {', '.join(HUGE_DTYPES)}"
        raise HugeShapesUnavailable(f"{subject.name}: {why}", reason=why)
    smallest = None
    for spec, dim in found:
        pairs, left_out, seen = [], [], set()
        for dtype in dtypes:
            for others in other_values(subject, dim):
                measured = calibrate(dtype, dim, others) if calibrate is not None else None
                for target in sizes:
                    n = size_for(subject, spec, dim, target, others)
                    if (dtype, n, others) in seen:
                        continue                 # two targets on one size (the other dims' product rounds up)
                    seen.add((dtype, n, others))
                    need, need_host = example_bytes(subject, dtype, {**dict(others), dim: n},
                                                    measured=measured)
                    if need <= SAFETY * free_bytes and need_host <= SAFETY * host_bytes:
                        pairs.append((dtype, n, others))
                        continue
                    short = "GPU" if need > SAFETY * free_bytes else "host"
                    what = ", ".join([f"{dim}={n:,}"] + [f"{d}={v:,}" for d, v in others])
                    left_out.append(f"{dtype} {what}: needs ~{_gib(need)} GPU / {_gib(need_host)} host memory "
                                    f"({short} memory is short)")
                    if smallest is None or (need, need_host) < smallest[:2]:
                        smallest = (need, need_host, dtype, what, dim)
        if pairs:
            rest = functools.partial(_rest, spec, dim)
            ordered = reach_order(pairs, rest)
            lead = sum(1 for p in ordered if _tier(p, rest) == _tier(ordered[0], rest))
            return HugePlan(subject.name, dim, ordered, tuple(left_out), int(free_bytes), int(host_bytes), lead)
    need, need_host, dtype, what, dim = smallest
    why = (f"not enough memory for {dim} past 2^31 elements: the smallest example ({dtype}, {what}) needs "
           f"~{_gib(need)} GPU and {_gib(need_host)} host memory, {_gib(free_bytes)} GPU and "
           f"{_gib(host_bytes)} host are free (at most {SAFETY:.0%} of it is used)")
    raise HugeShapesUnavailable(f"{subject.name}: {why}", reason=why)


def _rest(spec: TensorSpec, dim: str, others: tuple[tuple[str, int], ...]) -> int:
    """The product of the sized input's dims other than ``dim`` (a slice of it along ``dim``)."""
    fixed = dict(others)
    return math.prod(d if isinstance(d, int) else fixed[d] for d in spec.shape if d != dim)


def _tier(p: tuple, rest: Callable[[tuple[tuple[str, int], ...]], int]) -> int:
    n, r = p[1], rest(p[2])
    return 0 if r > 1 and (n - 1) * r >= 2 ** 31 else 1 if n * r > 2 ** 31 else 2


def reach_order(pairs: Iterable[tuple[str, int, tuple[tuple[str, int], ...]]],
                rest: Callable[[tuple[tuple[str, int], ...]], int]) -> tuple:
    """``pairs``, those most likely to expose a 32-bit offset first: a huge example costs tens of seconds
    and a campaign runs few.  A search's first draw is the first pair (Hypothesis's simplest choice; it
    also shrinks toward it), its later draws pick pairs at random; :meth:`HugePlan.led_by` varies the
    first pair between searches.

    Three tiers: (0) slices past 2^31 -- the last slice along the size dim starts at or past element
    2^31, so ``program_id * stride`` of a row-wise kernel wraps as well as flat offsets; (1) the total
    alone passes 2^31 (flat offsets wrap); (2) the boundary sizes (2^31 - 1, 2^31).  Within a tier each
    (other dims, dtype) combination comes with its largest size before any comes with its second, wider
    slices first.  ``rest(others)`` is the number of elements of one slice."""
    ranked, seen = [], {}
    for p in sorted(pairs, key=lambda p: (_tier(p, rest), -p[1] * rest(p[2]))):
        group = (_tier(p, rest), p[2], p[0])
        seen[group] = seen.get(group, -1) + 1
        ranked.append(((_tier(p, rest), seen[group], -rest(p[2]), HUGE_DTYPES.index(p[0]) if p[0] in HUGE_DTYPES
                        else len(HUGE_DTYPES)), p))
    return tuple(p for _, p in sorted(ranked, key=lambda kp: kp[0]))


def require_cuda(what: str = "huge shapes") -> None:
    """Refuse huge mode anywhere but on CUDA (the interpreter would try to allocate tens of GiB on the CPU)."""
    if device.MODE != "cuda":
        raise HugeShapesUnavailable(
            f"{what} run on a CUDA GPU only: one example holds 2^31+ elements (8 GiB of float32, 16 GiB more "
            "for the float64 reference), which Triton's interpreter on CPU cannot run; this machine runs "
            "the interpreter (no CUDA device)", reason="no CUDA device")


def free_memory() -> tuple[int, int]:
    """(free GPU bytes of the current device, available host bytes); CUDA only."""
    require_cuda()
    import torch

    free, _total = torch.cuda.mem_get_info()
    return int(free), host_available()


def host_available() -> int:
    """MemAvailable of /proc/meminfo in bytes (0 when it cannot be read: then nothing fits)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def plan_on_device(subject: Subject) -> HugePlan:
    """:func:`plan` with the memory measured now and each reference phase measured at a small size (CUDA
    only)."""
    free, host = free_memory()
    return plan(subject, free_bytes=free, host_bytes=host,
                calibrate=lambda dt, dim, others: measure_reference(subject, dt, dim, others))


#: Elements of the sized input when :func:`measure_reference` runs the reference: large enough that fixed
#: allocations (workspaces, 0-d outputs) are a small part of the peak, small enough to take milliseconds.
CALIBRATION_ELEMENTS = 2 ** 22


@dataclasses.dataclass(frozen=True)
class ReferenceCost:
    """The runner's reference phase for one (dtype, size dim, other dims) of a subject, measured on the GPU at
    :data:`CALIBRATION_ELEMENTS` (:func:`measure_reference`): bytes per element of the inputs at its peak."""

    per_element: float                 # eager, then the float64 truth run whole
    eager_per_element: float = 0.0     # eager's run alone
    chunked: bool = False              # the truth separates along the size dim (harness.reference_chunks)


def measure_reference(subject: Subject, dtype: str, dim: str, others: tuple[tuple[str, int], ...]
                      ) -> ReferenceCost | None:
    """The GPU memory of the runner's reference phase (eager in ``dtype``, then the float64 truth on a copy of
    the upcast inputs), measured at :data:`CALIBRATION_ELEMENTS` with the other dims at ``others``: memory grows
    with the size dim alike there and past 2^31; and whether a huge example's truth is computed in slices
    (``reference_chunks.split_for``, checked on this draw).  None where it cannot be measured (no CUDA, no draw
    at that size, the reference raises): the estimate stands."""
    if device.MODE != "cuda":
        return None
    import torch

    from .runner import eager_reference, float64_reference

    case = _small_case(subject, dtype, dim, others, CALIBRATION_ELEMENTS)
    if case is None:
        return None
    held: dict[str, Any] = {}                      # what the reference phase keeps alive, as the runner's does
    try:
        elements = sum(t.numel for t in case.tensors.values())
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        held["eager"] = eager_reference(subject, case)
        torch.cuda.synchronize()
        eager_peak = torch.cuda.max_memory_allocated() - base
        held["upcast"], held["truth"] = float64_reference(subject, case)
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - base
    except Exception:  # noqa: BLE001 - the reference raises at that size: estimate instead
        return None
    finally:
        held.clear()                               # released before the cache is emptied, on either path
        torch.cuda.empty_cache()
    from . import reference_chunks
    from .runner import float64_truth_of, reference_inputs

    try:
        split = reference_chunks.split_for(subject, case, reference_inputs(subject, case),
                                           functools.partial(float64_truth_of, subject), at_any_size=True)
    except Exception:  # noqa: BLE001 - inputs that do not build again: the truth runs whole
        split = None
    return ReferenceCost(peak / max(elements, 1), eager_peak / max(elements, 1), split is not None)


def _small_case(subject: Subject, dtype: str, dim: str, others: tuple[tuple[str, int], ...], elements: int) -> Any:
    """A case of ``subject`` drawn as huge mode draws, its sized input at about ``elements`` elements; None where
    there is no such draw."""
    from hypothesis import HealthCheck, find, settings

    from .strategies import cases

    spec = next((sp for sp, d in candidates(subject) if d == dim), None)
    if spec is None:
        return None
    n = size_for(subject, spec, dim, elements, others)
    small = HugePlan(subject.name, dim, ((dtype, n, others),), (), 0, 0)
    try:
        return find(cases(subject, huge=small), lambda c: True,
                    settings=settings(database=None, max_examples=5, suppress_health_check=list(HealthCheck)))
    except Exception:  # noqa: BLE001 - no draw at that size (a where= filter, a dim's bound)
        return None


def check_lanes(workers: int | None) -> None:
    """A huge campaign runs on CUDA, one lane per GPU at most (two huge examples on one GPU do not fit)."""
    require_cuda("tritondiff fuzz --huge: huge shapes")
    import torch

    gpus = torch.cuda.device_count()
    if workers is not None and workers > gpus:
        raise UsageError(f"--huge --workers {workers}: huge examples need a GPU each and {gpus} are visible; "
                         f"use --workers {gpus} or fewer")


def plans_for(subjects: Iterable[Subject], say: Callable[[str], None], *, strict: bool = True,
              measure: Callable[[], tuple[int, int]] | None = None) -> dict[str, HugePlan]:
    """Plans of the ``subjects`` that can run huge shapes here, by name; ``say`` gets a line per subject
    (its plan, or why it is skipped).  ``strict``: none can -> UsageError listing the reasons.
    ``measure`` returns (free GPU bytes, host bytes) -- :func:`free_memory` by default, and then each
    subject's reference phase is measured too (:func:`measure_reference`)."""
    free, host = (measure or free_memory)()
    plans, skipped = {}, []
    for subj in subjects:
        calibrate = None if measure is not None else (
            lambda dt, dim, others, subj=subj: measure_reference(subj, dt, dim, others))
        try:
            plans[subj.name] = plan(subj, free_bytes=free, host_bytes=host, calibrate=calibrate)
            say(f"huge  {plans[subj.name].describe()}")
        except HugeShapesUnavailable as e:
            skipped.append(f"{subj.name} ({e.reason})")
            say(f"skip  {subj.name}: {e.reason}")
    if not plans and strict:
        raise UsageError(f"--huge: no target can run huge shapes here: {'; '.join(skipped)}")
    return plans


def _gib(n: float) -> str:
    return f"{n / GIB:.1f} GiB"


def _pow2(n: int) -> str:
    if n < 2 ** 22:
        return f"{n:,}"
    k = int(math.log2(n))
    for base in (k, k + 1):
        d = n - 2 ** base
        if abs(d) <= 2 ** 21:
            return f"2^{base}" + (f"{d:+d}" if d else "")
    return f"{n:,}"
