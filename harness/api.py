"""The subject API: how a user declares a kernel under test and its eager reference.

```python
@subject(reference=lambda x: torch.linalg.vector_norm(x),
         inputs={"x": tensor(("N",), dtypes=("float32", "float16"))},
         dims={"N": (0, 3_000_000)})
def my_nrm2(x): ...
```

Everything is validated when the decorator runs, so a malformed declaration fails
at import with an :class:`~harness.exc.InvalidSubject` naming the argument.
"""
from __future__ import annotations

import dataclasses
import inspect
import math
import os
from typing import Any, Callable, Mapping, Sequence

from hypothesis.strategies import SearchStrategy

from tritondiff.base import device  # (subject files define @triton.jit kernels after importing the API)
from tritondiff.base import interpreter
from . import hunters
from .exc import InvalidSubject

if device.is_interpreter():
    interpreter.install()           # bf16 arithmetic on values, not bit patterns (see base.interpreter)

#: Dtypes a tensor input may be drawn in, by name.
DTYPES = ("float32", "float16", "bfloat16", "float64", "int32", "int64", "int8", "uint8", "bool", "float8_e4m3fn",
          "float8_e5m2")
FLOAT_DTYPES = ("float32", "float16", "bfloat16", "float64")

#: Memory layouts a tensor input may be drawn in.  "expanded" (stride-0 views)
#: is only drawn for inputs the subject does not declare as mutated.
LAYOUTS = ("contiguous", "transposed", "strided", "offset", "expanded")

#: Value families; "nonfinite" sprinkling is separate (see ``tensor(nonfinite=...)``).
VALUE_FAMILIES = ("normal", "uniform_pos", "large_offset", "large", "near_max", "tiny", "zeros", "integer")
#: Families drawn only where declared: "masked" -- normal values with a block of -inf in each row of the last
#: dim, as attention masks and masked logits have (declare it for scores and logits).
OPTIONAL_FAMILIES = ("masked",)

#: Hazard hunters that can be switched off by name.
HAZARDS = hunters.NAMES


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """How to draw one tensor input.  Build it with :func:`tensor`."""

    shape: tuple[str | int, ...]
    dtypes: tuple[str, ...]
    layouts: tuple[str, ...]
    values: tuple[str, ...]
    nonfinite: bool
    dtype_like: str | None
    low: float | str | None     # a number, or a dim name (see tensor())
    high: float | str | None

    def dim_names(self) -> list[str]:
        """The dims its shape and its bounds name."""
        return [d for d in (*self.shape, self.low, self.high) if isinstance(d, str)]


@dataclasses.dataclass(frozen=True)
class Constant:
    """A non-tensor input fixed to one value."""

    value: Any


def tensor(shape: Sequence[str | int], *, dtypes: Sequence[str] = ("float32",),
           layouts: Sequence[str] = LAYOUTS, values: Sequence[str] = VALUE_FAMILIES,
           nonfinite: bool = True, dtype_like: str | None = None,
           low: float | str | None = None, high: float | str | None = None) -> TensorSpec:
    """Declare a tensor input.

    ``shape`` lists dims by name (resolved through the subject's ``dims``) or as
    int literals.  ``dtypes``, ``layouts`` and ``values`` restrict what is drawn (``dtypes`` from
    :data:`DTYPES`, the float8 formats ``"float8_e4m3fn"`` / ``"float8_e5m2"`` among them; outputs may be float8
    too); ``values`` may add ``"masked"`` (a block of -inf in every row, at boundary offsets and lengths: attention
    scores, masked logits; judged as ordinary values, not as an edge); ``nonfinite=False`` never sprinkles
    NaN/inf; ``dtype_like="x"`` gives this
    tensor the dtype drawn for input ``x``; ``low``/``high`` bound the values: floating
    values are clamped to them (``low=0`` for a ``sqrt`` domain, after the family is drawn),
    integer values are drawn uniformly in ``[low, high]``.  Either may name a dim: ``high="V"``
    draws indices into a dim of size V (at most V - 1), e.g. token or position ids.
    """
    if isinstance(shape, (str, int)) or not isinstance(shape, Sequence):
        raise InvalidSubject(f"tensor(shape=...) takes a tuple of dim names or ints, got {shape!r}; "
                             "write e.g. tensor(('N',)) for a 1-D input", argument="shape")
    for d in shape:
        if isinstance(d, bool) or not isinstance(d, (str, int)):
            raise InvalidSubject(f"tensor shape entries are dim names or ints, got {d!r}", argument="shape")
        if isinstance(d, int) and d < 0:
            raise InvalidSubject(f"tensor shape has a negative literal {d}", argument="shape")
    dtypes = _names(dtypes, DTYPES, "dtypes")
    layouts = _names(layouts, LAYOUTS, "layouts")
    values = _names(values, VALUE_FAMILIES + OPTIONAL_FAMILIES, "values")
    if dtype_like is not None and not isinstance(dtype_like, str):
        raise InvalidSubject("dtype_like names another input, e.g. dtype_like='x'", argument="dtype_like")
    for name, bound in (("low", low), ("high", high)):
        if bound is not None and (isinstance(bound, bool) or not isinstance(bound, (int, float, str))):
            raise InvalidSubject(f"tensor({name}={bound!r}): give a number or a dim name", argument=name)
    if isinstance(low, (int, float)) and isinstance(high, (int, float)) and low > high:
        raise InvalidSubject(f"tensor(low={low}, high={high}): low must not exceed high", argument="low")
    return TensorSpec(tuple(shape), dtypes, layouts, values, bool(nonfinite), dtype_like, low, high)


@dataclasses.dataclass(frozen=True)
class DimValue:
    """A non-tensor input that takes the value drawn for a dim (:func:`dim`)."""

    name: str


def dim(name: str) -> DimValue:
    """Declare a non-tensor input that receives the value drawn for dim ``name``: the sizes a kernel or module
    takes as plain ints (heads, groups, a stride) beside the tensors whose shapes name the same dims, so that
    ``where=`` relates them (``inputs={"x": tensor(("B", "C")), "heads": dim("H")}, where=lambda C, H: C % H == 0``)."""
    if not isinstance(name, str) or not name:
        raise InvalidSubject(f"dim({name!r}): give the name of a dim declared in dims=", argument="inputs")
    return DimValue(name)


def constant(value: Any) -> Constant:
    """Declare a non-tensor input fixed to ``value`` (a plain value in ``inputs`` means the same)."""
    return Constant(value)


def _names(given: Sequence[str], allowed: Sequence[str], what: str) -> tuple[str, ...]:
    if isinstance(given, str):
        given = (given,)
    given = tuple(given)
    if not given:
        raise InvalidSubject(f"tensor({what}=()) is empty; give at least one of {', '.join(allowed)}", argument=what)
    bad = [g for g in given if g not in allowed]
    if bad:
        raise InvalidSubject(f"unknown {what} {', '.join(map(repr, bad))}; choose from {', '.join(allowed)}",
                             argument=what)
    return given


@dataclasses.dataclass(frozen=True)
class Tolerance:
    """Oracle knobs: candidate error <= multiplier * eager error + rtol*|truth| + atol*max|truth|."""

    multiplier: float = 3.0
    rtol: float | None = None      # None: the dtype's default floor
    atol: float | None = None      # relative to the output's largest magnitude


class Subject:
    """A kernel entry point under test, with its eager reference and input space."""

    def __init__(self, fn: Callable, *, reference: Callable, inputs: Mapping[str, Any],
                 dims: Mapping[str, int | tuple[int, int]], name: str | None, tolerance: Tolerance,
                 mutates: Sequence[str], deterministic: bool, disable: Sequence[str],
                 max_example_bytes: int | None, where: Sequence[Callable[..., bool]] = (),
                 gpu_only: str | None = None, upcast: Callable[[dict], dict] | None = None,
                 edge: Callable[[dict], dict | None] | None = None):
        self.fn = fn
        self.gpu_only = gpu_only
        self.upcast = upcast
        self.edge = edge
        self.where = tuple(where)
        self.reference = reference
        self.inputs = dict(inputs)
        self.dims = {k: (v, v) if isinstance(v, int) else tuple(v) for k, v in dims.items()}
        self.name = name or fn.__name__
        self.tolerance = tolerance
        self.mutates = tuple(mutates)
        self.deterministic = deterministic
        self.disable = frozenset(disable)
        self.max_example_bytes = max_example_bytes
        self.module = fn.__module__
        try:
            self.file = os.path.abspath(inspect.getsourcefile(fn) or "")
        except TypeError:
            self.file = ""
        #: ``(attribute, source)`` of a kernel file a finding's standalone.py loads in place of ``file``, for a
        #: subject whose own file needs tritondiff (``harness.packs.overrides``); None: ``file`` itself.
        self.standalone: tuple[str, str] | None = None
        self.__wrapped__ = fn
        self.__doc__ = fn.__doc__

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<subject {self.name}>"

    def tensor_inputs(self) -> dict[str, TensorSpec]:
        return {k: v for k, v in self.inputs.items() if isinstance(v, TensorSpec)}


_REGISTRY: dict[str, Subject] = {}


def registry() -> dict[str, Subject]:
    """Every subject declared so far in this process, by name."""
    return dict(_REGISTRY)


def subject(*, reference: Callable, inputs: Mapping[str, Any], dims: Mapping[str, Any] | None = None,
            name: str | None = None, multiplier: float = 3.0, rtol: float | None = None,
            atol: float | None = None, mutates: Sequence[str] = (), deterministic: bool = True,
            disable: Sequence[str] = (), max_example_bytes: int | None = None,
            where: Callable[..., bool] | Sequence[Callable[..., bool]] = (),
            gpu_only: str | None = None, upcast: Callable[[dict], dict] | None = None,
            edge: Callable[[dict], dict | None] | None = None) -> Callable[[Callable], Subject]:
    """Declare ``fn`` a subject: a Triton entry point diffed against ``reference``.

    ``inputs`` maps each parameter name to a :func:`tensor` spec, a Hypothesis
    strategy (drawn per example), a :func:`dim` (the drawn value of a dim) or a constant.  ``dims`` maps each dim name to
    an int or an inclusive ``(lo, hi)`` range.  Tolerance: ``multiplier`` times
    eager's own error against float64, plus ``rtol``/``atol`` floors (dtype
    defaults).  ``mutates`` names inputs the subject writes on purpose;
    ``deterministic=False`` lets repeated calls differ within the oracle;
    ``disable`` switches hazard hunters off by name (see ``HAZARDS``); ``where`` relates
    dims with predicates over them by name (``where=lambda H, KV: H % KV == 0``): drawn
    dims that fail one are redrawn.  ``gpu_only="why"`` marks a subject Triton's interpreter cannot run
    (it queries the CUDA device, uses an op the interpreter lacks): under the interpreter campaigns skip it
    with that reason and ``check`` refuses it, rather than report the interpreter's error as a finding.
    ``upcast`` maps the inputs (by name) to those of the float64 truth run where an input describes tensors
    rather than holding them (a drawn description of a whole call); tensor inputs are upcast as always.
    ``edge`` maps the drawn scalar inputs (by name) to the same with their edge values made ordinary, or to
    None when none is at the edge: a description whose tensors sit at the edge of their dtype (scaled past
    float16's range) makes its findings ``edge``, as an edge value family does for a tensor input.
    """
    if not callable(reference):
        raise InvalidSubject(f"subject(reference=...) must be callable, got {type(reference).__name__}",
                             argument="reference")
    if not isinstance(inputs, Mapping) or not inputs:
        raise InvalidSubject("subject(inputs=...) must be a non-empty dict of parameter name -> tensor(...), "
                             "strategy or constant", argument="inputs")
    dims = dict(dims or {})
    _check_dims(dims)
    parsed: dict[str, Any] = {}
    for key, spec in inputs.items():
        if not isinstance(key, str) or not key.isidentifier():
            raise InvalidSubject(f"input name {key!r} is not a parameter name", argument="inputs")
        if isinstance(spec, (TensorSpec, SearchStrategy, Constant, DimValue)):
            parsed[key] = spec
        elif callable(spec):
            raise InvalidSubject(f"input {key!r} is a callable; give tensor(...), a Hypothesis strategy or a value",
                                 argument="inputs")
        else:
            parsed[key] = Constant(spec)
    for key, spec in parsed.items():
        if isinstance(spec, DimValue) and spec.name not in dims:
            raise InvalidSubject(f"input {key!r} is dim({spec.name!r}), which dims= does not define; "
                                 f"add dims={{{spec.name!r}: (lo, hi)}}", argument="dims")
        if isinstance(spec, TensorSpec):
            for d in spec.dim_names():
                if d not in dims:
                    raise InvalidSubject(f"input {key!r} uses dim {d!r}, which dims= does not define; "
                                         f"add dims={{{d!r}: (lo, hi)}}", argument="dims")
            if spec.dtype_like is not None:
                other = parsed.get(spec.dtype_like)
                if not isinstance(other, TensorSpec) or other.dtype_like is not None:
                    raise InvalidSubject(f"input {key!r} has dtype_like={spec.dtype_like!r}, which must name another "
                                         "tensor input that has its own dtypes", argument="dtype_like")
    for m in mutates:
        if m not in parsed:
            raise InvalidSubject(f"mutates names {m!r}, which is not an input", argument="mutates")
    bad = [h for h in disable if h not in HAZARDS]
    if bad:
        raise InvalidSubject(f"disable names unknown hazard(s) {bad}; known: {', '.join(HAZARDS)}",
                             argument="disable")
    if not (isinstance(multiplier, (int, float)) and multiplier >= 1 and math.isfinite(multiplier)):
        raise InvalidSubject(f"multiplier={multiplier!r} must be a finite number >= 1", argument="multiplier")
    for arg, val in (("rtol", rtol), ("atol", atol)):
        if val is not None and not (isinstance(val, (int, float)) and 0 <= val < 1):
            raise InvalidSubject(f"{arg}={val!r} must be a number in [0, 1)", argument=arg)
    tol = Tolerance(float(multiplier), rtol, atol)
    where = _check_where(where, dims)
    if upcast is not None and not callable(upcast):
        raise InvalidSubject(f"upcast={upcast!r} must map the inputs (a dict) to the truth run's", argument="upcast")
    if edge is not None and not callable(edge):
        raise InvalidSubject(f"edge={edge!r} must map the scalar inputs (a dict) to their ordinary counterpart or None",
                             argument="edge")
    if gpu_only is not None and (not isinstance(gpu_only, str) or not gpu_only.strip()):
        raise InvalidSubject(f"gpu_only={gpu_only!r}: give the reason the interpreter cannot run it, as a string",
                             argument="gpu_only")

    def decorate(fn: Callable) -> Subject:
        if not callable(fn):
            raise InvalidSubject("@subject(...) decorates a function", argument="fn")
        try:
            _check_signature(fn, parsed, "subject")
            _check_signature(reference, parsed, "reference")
        except InvalidSubject as e:
            raise InvalidSubject(f"@subject {getattr(fn, '__name__', fn)!r}: {e}", argument=e.argument) from None
        subj = Subject(fn, reference=reference, inputs=parsed, dims=dims, name=name, tolerance=tol,
                       mutates=mutates, deterministic=deterministic, disable=disable,
                       max_example_bytes=max_example_bytes, where=where, gpu_only=gpu_only, upcast=upcast,
                       edge=edge)
        _REGISTRY[subj.name] = subj
        return subj

    return decorate


def _check_where(where: Any, dims: dict) -> tuple:
    """``where=``: one predicate or several over the drawn dims, each taking dims by name as keyword
    arguments (``where=lambda H, KV: H % KV == 0``); every parameter must name a declared dim."""
    preds = (where,) if callable(where) else tuple(where) if isinstance(where, (list, tuple)) else None
    if preds is None or not all(callable(p) for p in preds):
        raise InvalidSubject("where= takes a predicate over dims (lambda H, KV: H % KV == 0) or a list of them",
                             argument="where")
    for pred in preds:
        try:
            params = inspect.signature(pred).parameters.values()
        except (TypeError, ValueError):
            continue                          # a builtin: its parameters cannot be read, it is called as it is
        for p in params:
            if p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
                continue
            if p.name not in dims:
                raise InvalidSubject(f"where= predicate takes {p.name!r}, which dims= does not define; its "
                                     f"parameters name dims ({', '.join(dims) or 'none declared'})", argument="where")
    return preds


def runnable_here(subject: Subject) -> str | None:
    """None when ``subject`` can run here; otherwise why not (a GPU-only subject under the interpreter)."""
    if subject.gpu_only and device.is_interpreter():
        return f"GPU only: {subject.gpu_only}"
    return None


def dims_allowed(subject: Subject, dims: Mapping[str, int]) -> bool:
    """Whether drawn ``dims`` satisfy every ``where=`` predicate of ``subject``."""
    for pred in subject.where:
        try:
            params = inspect.signature(pred).parameters.values()
            wants_all = any(p.kind == p.VAR_KEYWORD for p in params)
            names = [p.name for p in params if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
        except (TypeError, ValueError):
            wants_all, names = True, []
        if not pred(**(dict(dims) if wants_all else {n: dims[n] for n in names})):
            return False
    return True


def _check_dims(dims: dict) -> None:
    for k, v in dims.items():
        if not isinstance(k, str):
            raise InvalidSubject(f"dims keys are dim names, got {k!r}", argument="dims")
        if isinstance(v, bool):
            raise InvalidSubject(f"dims[{k!r}] must be an int or (lo, hi), got {v!r}", argument="dims")
        if isinstance(v, int):
            v = (v, v)
        if (not isinstance(v, tuple) or len(v) != 2 or not all(isinstance(x, int) and not isinstance(x, bool)
                                                                for x in v)):
            raise InvalidSubject(f"dims[{k!r}] must be an int or an inclusive (lo, hi) pair, got {v!r}",
                                 argument="dims")
        if v[0] < 0 or v[0] > v[1]:
            raise InvalidSubject(f"dims[{k!r}] = {v}: need 0 <= lo <= hi", argument="dims")


def _check_signature(fn: Callable, inputs: Mapping[str, Any], what: str) -> None:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    params = sig.parameters
    if any(p.kind == p.VAR_KEYWORD for p in params.values()):
        return
    missing = [k for k in inputs if k not in params]
    if missing:
        raise InvalidSubject(f"{what} {getattr(fn, '__name__', fn)!r} has no parameter(s) {missing}; the {what} is "
                             "called with every input by name, so its parameters must match inputs=",
                             argument="reference" if what == "reference" else "inputs")
    required = [n for n, p in params.items() if p.default is p.empty
                and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and n not in inputs]
    if required:
        raise InvalidSubject(f"{what} {getattr(fn, '__name__', fn)!r} requires {required}, which inputs= "
                             "does not provide", argument="inputs")
