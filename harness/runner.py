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
import dataclasses
import sys
import time
import traceback
import warnings
from typing import Any, Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from . import device
from .api import HAZARDS, Subject
from .case import Case
from .config import config
from .counters import counters
from .oracle import Comparison, compare, flatten, locate
from .tensors import guards_intact, materialize, torch_dtype

MAX_CONFIGS_CHECKED = 8


@dataclasses.dataclass
class Verdict:
    status: str                      # "pass" | "fail" | "skip" | "budget" (cut short, not judged)
    failure_class: str | None = None
    message: str = ""
    location: str = "none"           # coarse, part of the signature
    call: str = ""                   # which call diverged
    details: dict = dataclasses.field(default_factory=dict)
    launches: list = dataclasses.field(default_factory=list)
    traceback: str | None = None
    seconds: float = 0.0
    dump: str | None = None
    counters: dict = dataclasses.field(default_factory=dict)   # this example's debug counts (full names)
    compiler: list = dataclasses.field(default_factory=list)   # failing only: artifacts of the graphs that ran

    def signature(self, subject_name: str) -> str:
        return f"{subject_name}|{self.failure_class}|{self.location}"


@dataclasses.dataclass
class CallResult:
    output: Any = None
    error: str | None = None
    violations: list = dataclasses.field(default_factory=list)
    canary: dict = dataclasses.field(default_factory=dict)
    mutated: dict = dataclasses.field(default_factory=dict)
    launches: list = dataclasses.field(default_factory=list)
    tuned: list = dataclasses.field(default_factory=list)      # autotuners that benchmarked during the call
    tuners: list = dataclasses.field(default_factory=list)     # autotuners called during the call


def enabled_hazards(subject: Subject, disabled: frozenset = frozenset()) -> frozenset:
    """The hazard hunters armed for ``subject``: all but ``disabled``, the subject's own ``disable`` and
    ``config.disabled_hazards`` (TRITONDIFF_DISABLE)."""
    off = set(disabled) | subject.disable | config.disabled_hazards
    return frozenset(h for h in HAZARDS if h not in off)


# ---------------------------------------------------------------------------- inputs

def build_inputs(subject: Subject, case: Case, *, guard: bool = True,
                 guard_fill: dict[str, tuple] | None = None) -> dict[str, Any]:
    """The inputs of ``case`` on the device, each inside canary guards when ``guard``; ``guard_fill``
    maps an input's name to other (before, after) guard values (see ``tensors.materialize``)."""
    dev = device.torch_device()
    kwargs: dict[str, Any] = {}
    for name in subject.inputs:
        if name in case.tensors:
            kwargs[name] = materialize(case.tensors[name], dev, guard=256 if guard else 0,
                                       fill=(guard_fill or {}).get(name))
        else:
            kwargs[name] = case.scalars[name]
    return kwargs


def _upcast(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {k: v.detach().double() if isinstance(v, torch.Tensor) and v.dtype.is_floating_point else v
            for k, v in kwargs.items()}


def _detach(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (tuple, list)):
        return type(value)(_detach(v) for v in value)
    return value


# ---------------------------------------------------------------------------- hazard contexts

@contextlib.contextmanager
def poisoned_allocations():
    """torch.empty & co. return NaN (floats) / the dtype's max (ints) while active."""
    import torch.utils.deterministic as det

    was, was_warn, was_fill = (torch.are_deterministic_algorithms_enabled(),
                               torch.is_deterministic_algorithms_warn_only_enabled(), det.fill_uninitialized_memory)
    torch.use_deterministic_algorithms(True, warn_only=True)
    det.fill_uninitialized_memory = True
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        torch.use_deterministic_algorithms(was, warn_only=was_warn)
        det.fill_uninitialized_memory = was_fill


class _ZeroFill(TorchDispatchMode):
    """Zero every fresh allocation: the control run that tells uninitialised reads apart."""

    _EMPTY = {torch.ops.aten.empty.memory_format, torch.ops.aten.empty_strided.default,
              torch.ops.aten.empty_like.default, torch.ops.aten.new_empty.default,
              torch.ops.aten.new_empty_strided.default}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func in self._EMPTY:
            out.zero_()
        return out


def _instrumentation():
    from . import autotuning, launches, sanitizer

    autotuning.install_cpu_benchmarker()      # idempotent; lets triton.autotune tune in the interpreter
    return autotuning, launches, sanitizer


def call_subject(subject: Subject, case: Case, hazards: frozenset, *, zero_fill: bool = False,
                 fn: Callable | None = None, guard_fill: dict[str, tuple] | None = None) -> CallResult:
    """One call of the candidate on freshly built inputs, with the enabled hazard hunters armed.
    ``zero_fill`` zeroes fresh allocations instead of poisoning them; ``guard_fill`` puts other values
    than the canary around the named inputs (both are control runs of a diagnosis)."""
    autotuning, launches, sanitizer = _instrumentation()
    res = CallResult()
    kwargs = build_inputs(subject, case, guard="canary" in hazards, guard_fill=guard_fill)
    snapshot = {k: v.clone() for k, v in kwargs.items()
                if isinstance(v, torch.Tensor) and "mutation" in hazards and k not in subject.mutates}
    with contextlib.ExitStack() as stack:
        rec = stack.enter_context(launches.record_launches())
        watch = stack.enter_context(autotuning.tuning_watch())
        checker = (stack.enter_context(sanitizer.bounds_checking())
                   if "bounds" in hazards and device.is_interpreter() else None)
        if zero_fill:
            stack.enter_context(_ZeroFill())
        elif "poison" in hazards:
            stack.enter_context(poisoned_allocations())
        try:
            res.output = _detach((fn or subject.fn)(**kwargs))
            if device.MODE == "cuda":
                torch.cuda.synchronize()
        except Exception:  # noqa: BLE001 - any exception of the subject is a finding
            res.error = traceback.format_exc(limit=20)
    res.violations = [v.message() for v in (checker.violations if checker else [])]
    res.launches = [launch.to_json() for launch in rec.launches]
    res.tuned = [autotuning.describe(t) for t in watch.tuned]
    res.tuners = list(watch.used)
    counters["kernels_launched"] += sum(1 for la in rec.launches if not la.tuning_trial)
    counters["tuning_trials"] += sum(1 for la in rec.launches if la.tuning_trial)
    if "canary" in hazards:
        for k, v in kwargs.items():
            if isinstance(v, torch.Tensor):
                msg = guards_intact(v)
                if msg:
                    res.canary[k] = msg
    for k, before in snapshot.items():
        after = kwargs[k]
        same = (after == before) | (torch.isnan(after) & torch.isnan(before)) if after.dtype.is_floating_point \
            else after == before
        if not bool(same.all()):
            kind, where = locate(~same)
            res.mutated[k] = f"{int((~same).sum())} element(s) changed, {where}"
    return res


# ---------------------------------------------------------------------------- verdict

def run_case(subject: Subject, case: Case, hazards: frozenset | None = None) -> Verdict:
    """Everything about one example, judged.  Never raises for a subject's misbehaviour.

    The verdict carries the example's counter increments and, when it fails, the compiler
    artifacts of the graphs that ran (see :func:`compiler_artifacts`)."""
    before = counters.snapshot()
    compiler_dump = sys.modules.get("compiler.dump")
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
    compiler_dump = sys.modules.get("compiler.dump")
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


def _run_case(subject: Subject, case: Case, hazards: frozenset | None) -> Verdict:
    start = time.perf_counter()
    hazards = enabled_hazards(subject) if hazards is None else hazards
    counters["examples"] += 1
    try:
        eager = _detach(subject.reference(**build_inputs(subject, case, guard=False)))
    except Exception as e:  # noqa: BLE001 - outside the subject's domain
        counters["skipped"] += 1
        return Verdict("skip", message=f"reference raised {type(e).__name__}: {e}",
                       seconds=time.perf_counter() - start)
    try:
        upcast = _upcast(build_inputs(subject, case, guard=False))
        truth = _detach(subject.reference(**{k: _detach(v) for k, v in upcast.items()}))   # a copy: may mutate
    except Exception:  # noqa: BLE001 - reference has no float64 path: eager is the best arbiter
        upcast, truth = None, eager
    spread = (lambda: _spread(subject, case, upcast, truth)) if upcast is not None else None
    verdict = _judge(subject, case, hazards, Reference(eager, truth, spread))
    verdict.seconds = time.perf_counter() - start
    if verdict.status == "fail":
        counters["failures"] += 1
    return verdict


class Reference:
    """What a candidate is judged against: eager (the inputs' dtype), the float64 truth, and -- measured only
    when a comparison without it fails, since it can only loosen a verdict -- the truth's spread under
    one-ulp input moves (:func:`_spread`)."""

    def __init__(self, eager: Any, truth: Any, spread: Callable[[], Any] | None = None):
        self.eager, self.truth = eager, truth
        self._measure, self._spread = spread, None

    def spread(self) -> Any:
        if self._measure is not None:
            self._spread, self._measure = self._measure(), None
        return self._spread


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
        t64, u64, d64 = (v.detach().cpu().double() for v in (t, up, down))
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
    cmp = compare(out, ref.eager, ref.truth, multiplier=tol.multiplier, rtol=tol.rtol, atol=tol.atol)
    if cmp.failure_class == "mismatch":
        spread = ref.spread()                  # an ill-conditioned element is not the candidate's fault
        if spread is not None:
            cmp = compare(out, ref.eager, ref.truth, multiplier=tol.multiplier, rtol=tol.rtol, atol=tol.atol,
                          spread=spread)
            if cmp.passed:
                counters["passed_on_spread"] += 1
    if cmp.passed and any(r.tail_excused for r in cmp.outputs):
        counters["passed_on_tail"] += 1
    return cmp


def _fail(klass: str, message: str, call: str, res: CallResult, location: str = "none", **details) -> Verdict:
    return Verdict("fail", klass, message, location, call, details, res.launches, res.error)


def _judge(subject: Subject, case: Case, hazards: frozenset, ref: Reference) -> Verdict:
    autotuning, _, _ = _instrumentation()
    if "autotune" in hazards:
        autotuning.clear_caches()
    a = call_subject(subject, case, hazards)
    label_a = "tuning call" if a.tuned else "first call"
    broken = _broken(a, label_a)
    if broken:
        return broken
    cmp_a = _oracle(subject, a.output, ref)
    b = None
    if ("autotune" in hazards and a.tuners) or "idempotence" in hazards:
        b = call_subject(subject, case, hazards)
    if not cmp_a.passed:
        return _diagnose_a(subject, case, hazards, a, b, cmp_a, ref)
    if b is not None:
        label_b = "cached call" if a.tuners else "second call"
        broken = _broken(b, label_b)
        if broken:
            return broken
        cmp_b = _oracle(subject, b.output, ref)
        if not cmp_b.passed:
            if "autotune" in hazards and a.tuners:
                # the winning config may be wrong alone while the tuning call's output was finished by
                # the other configs' trials: a config that fails alone beside ones that pass is the finding
                bad = _check_configs(subject, case, hazards, ref, a.tuners)
                if bad is not None and bad.details.get("passing_configs"):
                    return bad
            klass = "cached_call" if a.tuners else "second_call"
            return _fail(klass, f"{label_b} diverged after a correct first call: {cmp_b.message}", label_b, b,
                         cmp_b.location, comparison=cmp_b.to_json())
        if subject.deterministic and "idempotence" in hazards:
            diff = bitwise_diff(a.output, b.output)
            if diff:
                return _fail("nondeterministic", f"two calls on identical inputs differ bitwise: {diff[1]}",
                             label_b, b, diff[0])
    if "autotune" in hazards and a.tuners and case.total_numel() <= config.config_check_max_numel:
        bad = _check_configs(subject, case, hazards, ref, a.tuners)
        if bad:
            return bad
    return Verdict("pass", details={"comparison": cmp_a.to_json()}, launches=a.launches)


def _broken(res: CallResult, label: str) -> Verdict | None:
    """The verdict of a call that touched memory it must not, or raised; None when its output can be judged."""
    early = _memory_findings(res, label)
    if early:
        return early
    if res.error:
        return _fail("exception", _last_line(res.error), label, res, _exc_type(res.error))
    return None


def _memory_findings(res: CallResult, label: str) -> Verdict | None:
    if res.violations:
        return _fail("out_of_bounds", f"{res.violations[0]}" + (f" (+{len(res.violations) - 1} more)"
                     if len(res.violations) > 1 else ""), label, res, "bounds", violations=res.violations)
    if res.canary:
        name, msg = next(iter(res.canary.items()))
        return _fail("out_of_bounds", f"write past the guard of input {name!r}: {msg}", label, res,
                     "canary", canary=res.canary)
    if res.mutated:
        name, msg = next(iter(res.mutated.items()))
        return _fail("input_mutation", f"input {name!r} was modified by the call ({msg}); declare "
                     f"mutates=({name!r},) if that is intended", label, res, name, mutated=res.mutated)
    return None


def _diagnose_a(subject, case, hazards, a: CallResult, b: CallResult | None, cmp_a: Comparison,
                ref: Reference) -> Verdict:
    label = "tuning call" if a.tuned else "first call"
    details = {"comparison": cmp_a.to_json()}
    if cmp_a.failure_class == "nonfinite" and "poison" in hazards and _has_new_nan(a.output, ref.truth):
        control = call_subject(subject, case, hazards - {"poison"}, zero_fill=True)
        if not control.error and _oracle(subject, control.output, ref).passed:
            return _fail("uninitialized", "output depends on uninitialised memory: with allocations poisoned "
                         f"(NaN) it is wrong, with them zeroed it is right. {cmp_a.message}", label, a,
                         cmp_a.location, **details)
    if "canary" in hazards and _has_new_nan(a.output, ref.truth):
        read = _canary_read(subject, case, hazards, a.output, ref.truth)
        if read is not None:
            name, side, cleared = read
            return _fail("out_of_bounds", f"out-of-bounds read {side} input {name!r}: the kernel read its canary "
                         f"guard (NaN): {cleared} output element(s) are NaN where the reference is finite, and not "
                         f"NaN with that guard zero-filled. {cmp_a.message}",
                         label, a, f"canary_read:{name}", canary_read={"tensor": name, "side": side,
                                                                       "elements": cleared}, **details)
    if a.tuned and b is not None and not b.error:
        cmp_b = _oracle(subject, b.output, ref)
        if cmp_b.passed:
            return _fail("tuning_trial", f"the tuning call is wrong but the cached call is right: state leaked "
                         f"across autotune trials of {', '.join(a.tuned)} (reset_to_zero / restore_value "
                         f"missing?). {cmp_a.message}", label, a, cmp_a.location, **details)
    if "autotune" in hazards and a.tuners:
        bad = _check_configs(subject, case, hazards, ref, a.tuners)
        if bad is not None and bad.details.get("passing_configs"):
            return bad
    return _fail(cmp_a.failure_class, cmp_a.message, label, a, cmp_a.location, **details)


def _canary_read(subject, case, hazards, output, truth) -> tuple[str, str, int] | None:
    """Which input's guard a NaN of ``output`` came from: (name, "past the end of" / "before the start
    of" / "around", how many new-NaN elements it explains), or None.

    Control runs, only for an output that has NaN where the truth has none: each floating input in
    turn gets zero-filled guards instead of the NaN canary; the first whose zeros clear some of those
    NaN is the tensor read out of bounds.  Then the side: the guard after it alone, else before it."""
    new_nan = [torch.isnan(c.cpu()) & ~torch.isnan(t.cpu())
               if isinstance(c, torch.Tensor) and c.dtype.is_floating_point and isinstance(t, torch.Tensor)
               and c.shape == t.shape else None for c, t in zip(flatten(output), flatten(truth))]

    def cleared(fill: dict) -> int:
        res = call_subject(subject, case, hazards, guard_fill=fill)
        if res.error:
            return 0
        n = 0
        for mask, c in zip(new_nan, flatten(res.output)):
            if mask is not None and isinstance(c, torch.Tensor) and c.shape == mask.shape:
                n += int((mask & ~torch.isnan(c.cpu())).sum())
        return n

    for name, tc in case.tensors.items():
        if name not in subject.inputs or not torch_dtype(tc.dtype).is_floating_point:
            continue
        both = cleared({name: (0.0, 0.0)})
        if not both:
            continue
        if cleared({name: (None, 0.0)}):
            return name, "past the end of", both
        if cleared({name: (0.0, None)}):
            return name, "before the start of", both
        return name, "around", both
    return None


def _check_configs(subject, case, hazards, ref: Reference, tuners: list) -> Verdict | None:
    """Run each config of each autotuner alone; report the first that diverges."""
    autotuning, _, _ = _instrumentation()
    failing, passing = [], []
    first_bad = None
    for tuner in tuners:
        for cfg in list(tuner.configs)[:MAX_CONFIGS_CHECKED]:
            with autotuning.forced_config(tuner, cfg):
                res = call_subject(subject, case, hazards - {"autotune"})
            name = f"{autotuning.describe(tuner)} with {cfg}"
            ok = not res.error and _oracle(subject, res.output, ref).passed
            (passing if ok else failing).append(name)
            if not ok and first_bad is None:
                first_bad = res
    if not failing:
        return None
    cmp = None if first_bad.error else _oracle(subject, first_bad.output, ref)
    why = _last_line(first_bad.error) if first_bad.error else cmp.message
    return _fail("autotune_config", f"config(s) diverge when run alone: {'; '.join(failing)}. {why}",
                 f"config {failing[0]}", first_bad, "config", failing_configs=failing, passing_configs=passing)


def _has_new_nan(output: Any, truth: Any) -> bool:
    for c, t in zip(flatten(output), flatten(truth)):
        if isinstance(c, torch.Tensor) and c.dtype.is_floating_point and isinstance(t, torch.Tensor):
            if bool((torch.isnan(c.cpu()) & ~torch.isnan(t.cpu())).any()):
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


def _last_line(tb: str) -> str:
    lines = [ln for ln in tb.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else tb


def _exc_type(tb: str) -> str:
    return _last_line(tb).split(":", 1)[0].strip().rsplit(".", 1)[-1] or "exception"
