"""Run one example of one subject: reference, candidate calls, hazard hunters, verdict.

The order of calls is the hazard hunt:

1. the reference, eagerly in the inputs' dtype and in float64 (the arbiter);
   an input it rejects is outside the subject's domain (a skip, not a failure);
2. call A, the *tuning call*: every autotuner's cache is cleared first, so the
   real autotuner runs its real trials now (seed 001's 1265x bug lives here);
   allocations are poisoned, bounds checked (interpreter), inputs snapshotted
   and canaries watched;
3. call B, the *cached call*: same inputs again; must pass and (for
   deterministic subjects) agree bitwise with A;
4. each autotune config alone, when autotuners ran.

A verdict is plain data (picklable) so it can come back from a worker process,
with the debug counts of its example and, when it fails, the compiler's artifacts
of the graphs that example compiled or ran (the parent writes them into the dump).
"""
from __future__ import annotations

import contextlib
import functools
import math
import sys
import time
import traceback
from typing import Any, Callable, Iterable

import torch

from tritondiff.base import device

from . import hunters, oracle_chunks, reference_chunks, rounding
from .api import Subject
from .case import Case
from .config import config
from .counters import counters
from .exc import GridLimitExceeded, ReferenceFault
from .oracle import Comparison, compare, flatten
from .tensors import materialize, torch_dtype
from .verdict import CallResult, Verdict, fail, first_label, last_line, second_label

def enabled_hazards(subject: Subject, disabled: frozenset = frozenset()) -> frozenset:
    """The hazard hunters armed for ``subject``: all but ``disabled``, the subject's own ``disable`` and
    ``config.disabled_hazards`` (TRITONDIFF_DISABLE)."""
    off = set(disabled) | subject.disable | config.disabled_hazards
    return frozenset(h for h in hunters.NAMES if h not in off)


# ---------------------------------------------------------------------------- inputs

def build_inputs(subject: Subject, case: Case, *, guard: bool = True,
                 guard_fill: dict[str, tuple] | None = None, storage_offset: bool = True) -> dict[str, Any]:
    """The inputs of ``case`` on the device, each inside canary guards when ``guard``; ``guard_fill``
    maps an input's name to other (before, after) guard values (see ``tensors.materialize``)."""
    dev = device.torch_device()
    kwargs: dict[str, Any] = {}
    # under compute-sanitizer the end of each input is the end of its allocation: memcheck then sees the
    # first element read or written past it, which a canary guard would hide inside the same allocation
    guard = guard and not config.under_memcheck
    for name in subject.inputs:
        if name in case.tensors:
            kwargs[name] = materialize(case.tensors[name], dev, guard=256 if guard else 0,
                                       fill=(guard_fill or {}).get(name), storage_offset=storage_offset)
        else:
            kwargs[name] = case.scalars[name]
    return kwargs


def reference_inputs(subject: Subject, case: Case) -> dict[str, Any]:
    """The inputs the reference runs on: the candidate's values and strides, no guards and no storage
    offset.  The arbiter must not share the candidate's layout hazards: eager kernels that assume an
    aligned data pointer read out of bounds on a sliced storage (pytorch/pytorch#183484, memory-efficient
    attention) and take the process's CUDA context down on the candidate's behalf."""
    return build_inputs(subject, case, guard=False, storage_offset=False)


def _upcast(kwargs: dict[str, Any], subject: Subject | None = None) -> dict[str, Any]:
    """The reference's inputs for the float64 truth: every floating tensor in float64, after the subject's own
    ``upcast`` (inputs that describe tensors rather than hold them: the ATen-override packs' drawn calls)."""
    if subject is not None and subject.upcast is not None:
        kwargs = subject.upcast(dict(kwargs))
    return {k: v.detach().double() if isinstance(v, torch.Tensor) and v.dtype.is_floating_point else v
            for k, v in kwargs.items()}


def _detach(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (tuple, list)):
        return type(value)(_detach(v) for v in value)
    return value


# ---------------------------------------------------------------------------- one call

def _instrumentation():
    from . import autotuning, launches

    autotuning.install_cpu_benchmarker()      # idempotent; lets triton.autotune tune in the interpreter
    return autotuning, launches


def call_subject(subject: Subject, case: Case, hazards: frozenset, *, contexts: tuple = (),
                 fn: Callable | None = None, guard_fill: dict[str, tuple] | None = None) -> CallResult:
    """One call of the candidate on freshly built inputs, with the hunters in ``hazards`` armed.
    ``contexts`` (context-manager factories) are entered around the call and ``guard_fill`` puts other
    values than the canary around the named inputs: both are control runs of a diagnosis."""
    autotuning, launches = _instrumentation()
    armed = hunters.armed(hazards)
    res = CallResult()
    kwargs = build_inputs(subject, case, guard=any(h.guards_inputs() for h in armed), guard_fill=guard_fill)
    call = hunters.Call(subject, kwargs, res)
    with contextlib.ExitStack() as stack:
        rec = stack.enter_context(launches.record_launches())
        watch = stack.enter_context(autotuning.tuning_watch())
        for hunter in armed:
            hunter.arm(call, stack)
        for context in contexts:
            stack.enter_context(context())
        try:
            res.output = _detach((fn or subject.fn)(**kwargs))
            if device.MODE == "cuda":
                torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - any exception of the subject is a finding
            res.error = traceback.format_exc(limit=20)
            res.beyond = _beyond(e, case)
    res.launches = [launch.to_json() for launch in rec.launches]
    res.tuned = [autotuning.describe(t) for t in watch.tuned]
    res.tuners = list(watch.used)
    counters["kernels_launched"] += sum(1 for la in rec.launches if not la.tuning_trial)
    counters["tuning_trials"] += sum(1 for la in rec.launches if la.tuning_trial)
    for hunter in armed:
        hunter.observe(call)
    return res


# ---------------------------------------------------------------------------- verdict

def run_case(subject: Subject, case: Case, hazards: frozenset | None = None) -> Verdict:
    """Everything about one example, judged.  Never raises for a subject's misbehaviour.

    The verdict carries the example's counter increments and, when it fails, the compiler
    artifacts of the graphs that ran (see :func:`compiler_artifacts`)."""
    before = counters.snapshot()
    compiler_dump = sys.modules.get("tritondiff.compiler.dump")
    if compiler_dump is not None:
        compiler_dump.forget_ran()
    verdict = _run_case(subject, case, hazards)
    if verdict.status == "fail":
        verdict.compiler = compiler_artifacts()
    verdict.counters = counters.delta(before)
    return verdict


#: Bounds on the compiler artifacts a failing verdict carries back from the worker.
ARTIFACT_TEXT_MAX_CHARS = 256 * 1024
ARTIFACTS_MAX_CHARS = 4 * 2 ** 20


def compiler_artifacts() -> list[dict]:
    """The compiler's artifacts (graph, IR, Triton source, plan, counters, error) of the graphs
    compiled or run since the example began, newest kept first when the size bound bites;
    [] when no compiled code ran."""
    compiler_dump = sys.modules.get("tritondiff.compiler.dump")
    ran = getattr(compiler_dump, "ran_artifacts", None)
    if not callable(ran):
        return []
    try:
        arts = ran()
    except Exception:  # noqa: BLE001 - a verdict must not fail because the compiler's bookkeeping did
        return []
    out, left = [], ARTIFACTS_MAX_CHARS
    for art in reversed(arts):
        texts = {}
        for step, text in art.texts.items():
            cut = len(text) - ARTIFACT_TEXT_MAX_CHARS
            if cut > 0:
                text = text[:ARTIFACT_TEXT_MAX_CHARS] + f"\n... [{cut} more characters cut]\n"
            texts[step] = text
        size = sum(len(t) for t in texts.values())
        if size > left:
            break
        left -= size
        out.append({"graph": str(art.graph), "texts": texts, "counters": dict(art.counters), "error": art.error})
    return out[::-1]


def eager_reference(subject: Subject, case: Case) -> Any:
    """The reference run as the case's dtypes have it: what the candidate is judged beside."""
    return _detach(subject.reference(**reference_inputs(subject, case)))


def float64_reference(subject: Subject, case: Case) -> tuple[dict[str, Any] | None, Any]:
    """The upcast inputs and the reference run on a copy of them (a reference may mutate its inputs): the
    float64 truth.  A huge case whose reference separates along its size dim gets its truth a slice at a
    time (:mod:`harness.reference_chunks`) and no upcast inputs (None: they are never whole in memory)."""
    kwargs = reference_inputs(subject, case)
    truth_of = functools.partial(float64_truth_of, subject)
    split = reference_chunks.split_for(subject, case, kwargs, truth_of)
    if split is not None:
        return None, reference_chunks.truth(subject, kwargs, split, case.dims[split.dim], truth_of)
    upcast = _upcast(kwargs, subject)
    return upcast, _detach(subject.reference(**{k: _detach(v) for k, v in upcast.items()}))


def float64_truth_of(subject: Subject, kwargs: dict[str, Any]) -> Any:
    """The reference on the float64 upcast of native inputs ``kwargs`` (which it may not mutate)."""
    return subject.reference(**_upcast(kwargs, subject))


def _run_case(subject: Subject, case: Case, hazards: frozenset | None) -> Verdict:
    start = time.perf_counter()
    hazards = enabled_hazards(subject) if hazards is None else hazards
    counters["examples"] += 1
    try:
        eager = eager_reference(subject, case)
        if device.MODE == "cuda":
            torch.cuda.synchronize()         # a fault of eager's own kernels surfaces here, not in the candidate's
    except Exception as e:  # noqa: BLE001 - outside the subject's domain
        _raise_if_device_fault(subject, e)
        counters["skipped"] += 1
        return Verdict("skip", message=f"reference raised {type(e).__name__}: {e}",
                       details={"skip": f"reference raised {type(e).__name__}"}, seconds=time.perf_counter() - start)
    try:
        upcast, truth = float64_reference(subject, case)
        if device.MODE == "cuda":
            torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001 - reference has no float64 path: eager is the best arbiter
        _raise_if_device_fault(subject, e)
        upcast, truth = None, eager
    spread = (lambda: _spread(subject, case, upcast, truth)) if upcast is not None else None
    noise = (lambda: _noise(subject, case, upcast, truth)) if upcast is not None else None
    verdict = _judge(subject, case, hazards, Reference(eager, truth, spread, noise))
    verdict.seconds = time.perf_counter() - start
    if verdict.status == "fail":
        counters["failures"] += 1
    elif verdict.status == "skip":
        counters["skipped"] += 1
    return verdict


def _raise_if_device_fault(subject: Subject, error: Exception) -> None:
    if device.device_fault(error):
        raise ReferenceFault(f"the reference of {subject.name!r} faulted on the device ({type(error).__name__}: "
                             f"{(str(error).splitlines() or [''])[0]}): eager PyTorch's "
                             "own kernel failed on this input, not the candidate; this process's CUDA context "
                             "is unusable") from None


class Reference:
    """What a candidate is judged against: eager (the inputs' dtype), the float64 truth, and -- measured only
    when a comparison without it fails, since it can only loosen a verdict -- the truth's spread under
    one-ulp input moves (:func:`_spread`)."""

    def __init__(self, eager: Any, truth: Any, spread: Callable[[], Any] | None = None,
                 noise: Callable[[], Any] | None = None):
        self.eager, self.truth = eager, truth
        # each measured on first use, once
        self.spread = functools.cache(spread or (lambda: None))
        self.noise: Callable[[], rounding.Noise | None] = functools.cache(noise or (lambda: None))


def _noise(subject: Subject, case: Case, upcast: dict[str, Any], truth: Any) -> rounding.Noise | None:
    if any(isinstance(t, torch.Tensor) and t.numel() > oracle_chunks.CHUNKED_FROM for t in flatten(truth)):
        return None       # its probes copy each output to the host: a huge one is judged without them
    dtypes = [torch_dtype(t.dtype) for t in case.tensors.values()]
    return rounding.measure(subject.reference, upcast, flatten(truth), dtypes, flatten,    # each probe copies
                            native=reference_inputs(subject, case))


#: Relative move of a floating input for :func:`_spread`: one float32 ulp -- eager's accumulation precision
#: for float32, float16 and bfloat16 inputs alike (a half-precision ulp would hide half-precision
#: accumulation bugs) -- and one float64 ulp for float64 inputs.
_SPREAD_EPS = {torch.float64: 2.0 ** -52}
_SPREAD_EPS_DEFAULT = 2.0 ** -23
#: An element's move counts as linear (a conditioning to measure) when its even part -- the same
#: direction for the up and the down move -- is at most this fraction of its odd part.
_SPREAD_LINEARITY = 0.25


def _spread(subject: Subject, case: Case, upcast: dict[str, Any], truth: Any) -> Any:
    """Per output element, how far the float64 truth moves when every floating input moves by one ulp
    (:data:`_SPREAD_EPS`): the element's conditioning, a floor for eager's error in the oracle (where sums
    cancel, eager's own error there is a matter of luck).

    Two runs, inputs moved up and then down.  For a smooth function the two moves are opposite: the odd
    part ``|up - down| / 2`` is the conditioning and the even part ``|up + down - 2 truth| / 2`` is second
    order.  Where the even part is not small (a step: floor(3.0) moves one way only; a sum of steps, a
    comparison, a cast to int), the element gets no spread at all, so a bug there is judged as before.
    Each value's direction is a hash of its magnitude's bits, so equal values (and x, -x) move alike:
    constant rows stay constant, exact cancellations stay exact.  None where the reference raises, or where
    the moved inputs do not fit in memory (huge mode: about five float64 copies of a 2^31-element input):
    the verdict is then judged without the spread, never a harness error."""
    moved = [k for k, v in upcast.items() if isinstance(v, torch.Tensor) and v.dtype.is_floating_point and v.numel()]
    if not moved:
        return None
    runs = []
    for direction in (1.0, -1.0):
        try:
            kwargs = {k: _detach(v) for k, v in upcast.items()}
            for k in moved:
                dtype = torch_dtype(case.tensors[k].dtype) if k in case.tensors else torch.float64
                eps = _SPREAD_EPS.get(dtype, _SPREAD_EPS_DEFAULT)
                kwargs[k] = upcast[k] * (1.0 + direction * eps * _value_signs(upcast[k]))
            runs.append(flatten(_detach(subject.reference(**kwargs))))
        except Exception:  # noqa: BLE001 - outside the reference's domain, or out of memory (huge inputs): no spread
            return None
    out = []
    for t, up, down in zip(flatten(truth), *runs):
        if not (isinstance(t, torch.Tensor) and t.dtype.is_floating_point and isinstance(up, torch.Tensor)
                and isinstance(down, torch.Tensor) and up.shape == t.shape == down.shape):
            out.append(None)
            continue
        t64, u64, d64 = (v.detach().double() for v in (t, up, down))     # on their device: huge ones stay there
        odd, even = (u64 - d64).abs() / 2, (u64 + d64 - 2 * t64).abs() / 2
        linear = even <= _SPREAD_LINEARITY * odd
        out.append(torch.nan_to_num(torch.where(linear, odd, torch.zeros_like(odd)), nan=0.0, posinf=0.0))
    return out


def _value_signs(x: torch.Tensor) -> torch.Tensor:
    """+1 or -1 per element, a hash of the bits of its magnitude (equal magnitudes get equal signs): the sign
    bit of the wrapped product with the golden-ratio constant mixes all 63 bits, so it is as random for
    bf16 / fp16 / integer-valued inputs (whose low mantissa bits are all zero) as for any other."""
    bits = x.contiguous().view(torch.int64) & 0x7FFF_FFFF_FFFF_FFFF
    return torch.where(bits * -7046029254386353131 < 0, 1.0, -1.0).to(dtype=torch.float64, device=x.device)


def _oracle(subject: Subject, out: Any, ref: Reference) -> Comparison:
    """The comparison of one call's outputs; a pass that needed the spread or the tail allowance is counted
    (``passed_on_spread`` / ``passed_on_tail``: the example's ``allowance`` in :mod:`harness.coverage`)."""
    tol = subject.tolerance
    large = oracle_chunks.compare_large          # huge outputs: chunk by chunk on their own device
    cmp = compare(out, ref.eager, ref.truth, multiplier=tol.multiplier, rtol=tol.rtol, atol=tol.atol, large=large)
    if cmp.failure_class in ("mismatch", "nonfinite"):
        # an ill-conditioned element, or one a legitimate order of rounding moves, is not the candidate's fault
        spread, noise = ref.spread(), ref.noise()
        if spread is not None or noise is not None:
            cmp = compare(out, ref.eager, ref.truth, multiplier=tol.multiplier, rtol=tol.rtol, atol=tol.atol,
                          spread=spread, noise=noise, large=large)
            if cmp.passed:
                counters["passed_on_spread"] += 1
    if cmp.passed and any(r.tail_excused for r in cmp.outputs):
        counters["passed_on_tail"] += 1
    return cmp


class _Example:
    """The example being judged, as the hunters see it (:class:`hunters.Example`)."""

    def __init__(self, subject: Subject, case: Case, hazards: frozenset, ref: Reference):
        self.subject, self.case, self.hazards, self.ref = subject, case, hazards, ref

    def call(self, hazards: frozenset, *, contexts: tuple = (), guard_fill: dict[str, tuple] | None = None) -> CallResult:
        return call_subject(self.subject, self.case, hazards, contexts=contexts, guard_fill=guard_fill)

    def oracle(self, output: Any) -> Comparison:
        return _oracle(self.subject, output, self.ref)

    def passes(self, output: Any) -> bool:
        return self.oracle(output).passed

    def truth(self) -> Any:
        return self.ref.truth

    def small_enough_for_control_runs(self) -> bool:
        return self.case.total_numel() <= config.config_check_max_numel


def _judge(subject: Subject, case: Case, hazards: frozenset, ref: Reference) -> Verdict:
    """The hunt, in order: the first call (its own evidence, then its output), a second call where a
    hunter wants one, then what the hunters check of calls that are both right."""
    armed = hunters.armed(hazards)
    ex = _Example(subject, case, hazards, ref)
    for hunter in armed:
        hunter.before_example()
    a = call_subject(subject, case, hazards)
    label_a = first_label(a)
    broken = _broken(a, label_a, armed)
    if broken:
        return broken
    cmp_a = _oracle(subject, a.output, ref)
    b = call_subject(subject, case, hazards) if any(h.wants_second_call(a) for h in armed) else None
    if not cmp_a.passed:
        return _first(h.diagnose(ex, a, b, cmp_a, label_a) for h in armed) or \
            fail(cmp_a.failure_class, cmp_a.message, label_a, a, cmp_a.location, comparison=cmp_a.to_json())
    if b is not None:
        label_b = second_label(a)
        broken = _broken(b, label_b, armed)
        if broken:
            return broken
        cmp_b = _oracle(subject, b.output, ref)
        if not cmp_b.passed:
            klass = "cached_call" if a.tuners else "second_call"
            return _first(h.second_call_wrong(ex, a, b, cmp_b) for h in armed) or \
                fail(klass, f"{label_b} diverged after a correct first call: {cmp_b.message}", label_b, b,
                     cmp_b.location, comparison=cmp_b.to_json())
    return _first(h.check_pass(ex, a, b) for h in armed) or \
        Verdict("pass", details={"comparison": cmp_a.to_json()}, launches=a.launches)


def _first(verdicts: Iterable[Verdict | None]) -> Verdict | None:
    """The first finding of a lazy sequence of hunters' answers (later hunters are not asked)."""
    return next((v for v in verdicts if v is not None), None)


def _broken(res: CallResult, label: str, armed: list) -> Verdict | None:
    """The verdict of a call whose own evidence is a finding (memory touched that it must not be, an input
    mutated) or that raised; None when its output can be judged."""
    early = _first(h.call_finding(res, label) for h in armed)
    if early:
        return early
    if res.beyond:
        why = "out of GPU memory" if res.beyond.startswith(OUT_OF_MEMORY) else "grid axis 0 past 2^31 - 1 programs"
        return Verdict("skip", message=f"{label} does not run at this shape: {res.beyond}",
                       details={"skip": why}, launches=res.launches)
    if res.error:
        return fail("exception", last_line(res.error), label, res, _exc_type(res.error))
    return None


OUT_OF_MEMORY = "out of GPU memory"


def _beyond(error: BaseException, case: Case) -> str | None:
    """Why ``error`` says the call could not run at this shape at all, else None.  Only at a huge example
    (an input of 2^31 - 1 elements or more); at ordinary sizes both are findings.

    * A :class:`GridLimitExceeded` along grid axis 0 with at most one program per element of the largest
      input: one program per row (or element) of an input past 2^31 rows, which huge mode draws to find
      wrapped offsets in kernels whose launch reaches that far.  A kernel whose launch does not has a
      limit, not a wrong answer.  More programs than elements is a wrong grid (``n * BLOCK`` for
      ``cdiv(n, BLOCK)``); axes 1 and 2 (65,535) are exceeded at ordinary sizes: findings.
    * Out of GPU memory: huge mode plans each example to fill most of the GPU beside the harness's own
      float64 copies, so the candidate's workspace not fitting is the plan's miss, not the kernel's bug.

    The error's chain is followed through explicit causes, and through the context only where it is not
    suppressed: an error raised ``from None`` (the compiler's own grid refusal, which is a compiler bug)
    is judged by itself.  Such an example is skipped (and counted as skipped)."""
    largest = max((math.prod(t.shape) for t in case.tensors.values()), default=0)
    if largest < 2 ** 31 - 1:
        return None
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, GridLimitExceeded) and error.axis == 0 and error.grid[0] <= largest:
            return str(error)
        if isinstance(error, torch.OutOfMemoryError):
            return f"{OUT_OF_MEMORY} beside the harness's copies of a huge example: {last_line(str(error))}"
        error = error.__cause__ or (None if error.__suppress_context__ else error.__context__)
    return None


def _exc_type(tb: str) -> str:
    return last_line(tb).split(":", 1)[0].strip().rsplit(".", 1)[-1] or "exception"
