"""Rounding noise: how far a legitimate low-precision implementation of the reference may land from the truth.

Eager PyTorch is one implementation; a kernel is another, with other intermediates.  Both round every value
they compute, and what a rounding costs is set by the magnitude of the *value rounded*, not of the output:
a layer norm whose mean is summed at 1000 carries an error of 1000 ulp-units into ``x - mean`` even when the
result is near 1; a fused cross entropy forms ``lse`` at the logits' magnitude and subtracts; a backward
formula cancels ``w*dy - mean(w*dy)`` to an exact zero that a contracted multiply-add leaves at one
rounding of ``w*dy``.  Whether eager happened to avoid a particular intermediate says nothing about the
candidate.

So the float64 reference is run again a few times (:data:`PROBES`) under a dispatch mode that rounds like a
float32 machine, each time with other random rounding directions (Monte Carlo arithmetic):

* composite ops are decomposed first (``torch._decomp``), so the intermediates of layer norm, softmax,
  log-softmax, losses and their backwards are rounded one by one;
* every arithmetic result moves by one unit roundoff of its own magnitude, in a random direction;
* an addition or subtraction moves by a roundoff of ``|a| + |b|``: another association of the same terms
  (``lse - x`` formed as ``m + log(s) - x``) rounds a partial at the operands' size, not the result's;
* a logarithm or exponential moves by a few roundoffs as a GPU's approximate ones err: the logarithm's of at
  least 1 (its error near 1 is absolute), the exponential's grown by its argument's size
  (:data:`APPROX_ROUNDOFFS`);
* an accumulation (sum, mean, matmul, convolution, scatter-add ...) moves by ``sqrt(n)`` roundoffs of the
  magnitude it passes through -- the same op applied to the absolute values -- since its partial sums are
  never seen and a sum that cancels is rounded at the size of its terms (Higham & Mary's probabilistic bound
  for any summation order);
* a result eager stores in float16 or bfloat16 (found by running the reference on the inputs as eager got
  them, :func:`stored_dtypes`) also moves by one roundoff of that dtype at its own magnitude: the store any
  implementation may make -- never its accumulation, which a narrow partial sum would exceed;
* a Python float operand (a coefficient, an epsilon, a temperature) is rounded to float32, as a kernel holds
  it: a constant's rounding shifts every element alike, which random directions do not model;
* values below float32's smallest normal are flushed to zero in half the probes (devices flush subnormals);
* values past float32's overflow threshold are infinite in every probe, and an accumulation (or addition)
  whose magnitude passes it is infinite in the other half: another order of the same sum overflows.  Only
  float32's: a partial sum kept in a narrower dtype (a sum of squares stored as float16) is a bug, and one
  that overflows where eager does not is an edge finding, a real divergence.

Per output element the *noise* is the largest distance of a probe from the truth, and *may_overflow* marks
elements a probe made non-finite where the truth is finite.  The oracle uses both only as allowances (a
floor for the error level, an excuse for a non-finite candidate), and only after a comparison without them
failed: a bug far past rounding still fails.  Exact ops (copies, views, selections, comparisons, max/min,
abs, where) are not rounded.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import struct
from typing import Any, Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode

#: Independent probes: the noise at an element is the largest of their distances from the truth.
PROBES = 4
#: Discrete (integer, bool) outputs also get two :class:`StepProbe` runs that move the floating operands of
#: every step (a rounding, a comparison, a cast to int) up and then down by this many unit roundoffs (16
#: float32 ulps): a GPU's approximate division, exp2 or rsqrt is a few ulps off, and the value reaching
#: the step decides which integer comes out.  (Moving every result one way would not do: a ratio of two
#: moved values does not move.)
DISCRETE_ROUNDOFFS = 32
#: Ops whose result jumps where their floating operand crosses a boundary.
STEPS = frozenset({
    "round", "floor", "ceil", "trunc", "floor_divide", "remainder", "fmod", "gt", "lt", "ge", "le", "eq", "ne",
    "sign", "sgn", "heaviside", "bucketize", "searchsorted",
})
#: Inputs larger than this (elements, all floating inputs together) get no noise estimate: each probe holds
#: float64 copies of every intermediate.
MAX_ELEMENTS = 1 << 24

#: The float8 formats this torch has (quantised values: stored, and judged on their own rounding by the oracle).
FLOAT8 = tuple(d for d in (getattr(torch, n, None) for n in (
    "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")) if d is not None)
#: Unit roundoff of the arithmetic a kernel does: float32 for float32, float16 and bfloat16 inputs (Triton
#: kernels accumulate and compute in float32), float64 where every floating input is float64.
UNIT_ROUNDOFF = {torch.float64: 2.0 ** -53}
UNIT_ROUNDOFF_DEFAULT = 2.0 ** -24

#: Ops whose results are exact functions of their inputs' values: never rounded.
EXACT = frozenset({
    "abs", "neg", "where", "masked_fill", "masked_fill_", "clamp", "clamp_", "clamp_min", "clamp_max",
    "relu", "relu_", "maximum", "minimum", "fmax", "fmin", "sign", "sgn", "signbit", "floor", "ceil", "round",
    "trunc", "frac", "fill", "fill_", "copy", "copy_", "_to_copy", "to", "lift_fresh", "lift_fresh_copy",
    "clone", "nan_to_num", "hardtanh", "threshold", "threshold_backward", "fmod", "remainder", "heaviside",
    "copysign", "isnan", "isinf", "isfinite", "logical_not", "logical_and", "logical_or", "logical_xor",
    "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "eq", "ne", "lt", "le", "gt", "ge",
    "zero_", "zeros_like", "ones_like", "full_like", "empty_like",
})
#: Accumulations: each output element is a sum of products of input elements, rounded at the size of the
#: sum of their magnitudes.  The value is how to count the terms summed into one output element.
ACCUMULATIONS = frozenset({
    "sum", "mean", "nansum", "cumsum", "mm", "bmm", "addmm", "baddbmm", "addbmm", "addmv", "mv", "dot",
    "vdot", "matmul", "convolution", "_convolution", "convolution_backward", "scatter_add", "scatter_add_",
    "index_add", "index_add_", "embedding_dense_backward", "_embedding_bag", "var", "var_mean", "std",
    "std_mean", "linalg_vector_norm", "norm", "_scaled_dot_product_flash_attention_for_cpu",
})
#: Additions: rounded at the sum of their operands' magnitudes (``|a| + |alpha| |b|``).
ADDITIONS = frozenset({"add", "add_", "sub", "sub_", "rsub"})
#: A GPU's fast exponential and logarithm: Triton's float32 ``tl.exp`` / ``tl.log`` run ``ex2.approx`` /
#: ``lg2.approx``, a few roundoffs off relative to the result, and the logarithm's error near 1 is absolute
#: (2^-22.6 on [0.5, 2], where the result is near 0: ``log(sum(exp(x - m)))`` of a row whose sum is ~1 carries
#: it into every log-softmax and cross entropy); the exponential's argument is first multiplied by log2(e), a
#: rounding relative to ``|x|`` that the result carries.  Their results move by APPROX_ROUNDOFFS roundoffs of
#: ``max(|result|, 1)`` (logarithms) or of ``|result| (1 + |x| log2 e)`` (exponentials).
APPROX_ROUNDOFFS = 4
LOGARITHMS = frozenset({"log", "log2"})
EXPONENTIALS = frozenset({"exp", "exp2"})
_APPROXIMATE = LOGARITHMS | EXPONENTIALS
#: Where the decompositions used live (``torch._decomp`` and the ``torch._refs`` it registers): a composite op
#: is run as its decomposition so its intermediates are rounded one by one; an op without one is rounded as a
#: whole (once, at its output's magnitude).
_DECOMPOSED_MODULES = ("torch._decomp", "torch._refs")


def _name(func: Any) -> str:
    return func.__name__.split(".")[0] if hasattr(func, "__name__") else str(func)


@functools.cache
def _arithmetic(func: Any) -> bool:
    """A pointwise op that computes (rounds) its result: tagged pointwise in aten; a prims op by the aten op of
    its name (prims carry no tags)."""
    if torch.Tag.pointwise in func.tags:
        return True
    if getattr(func, "namespace", "") != "prims":
        return False
    packet = getattr(torch.ops.aten, _name(func), None)
    if packet is None:
        return False
    return any(torch.Tag.pointwise in getattr(packet, o).tags for o in packet.overloads())


@functools.cache
def _decomposition(func: Any) -> Callable | None:
    from torch._decomp import decomposition_table

    d = decomposition_table.get(func)
    if d is None or not getattr(d, "__module__", "").startswith(_DECOMPOSED_MODULES):
        return None
    return d


def _terms(name: str, args: tuple, out: torch.Tensor) -> int:
    """How many terms one output element of an accumulation sums (a bound: the larger input's size over
    the output's, or a matmul's inner dim)."""
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    if name in ("mm", "bmm", "matmul", "mv", "dot", "vdot", "addmm", "baddbmm", "addbmm", "addmv"):
        mats = tensors[-2:] if name.startswith("add") or name == "baddbmm" else tensors[:2]
        return max(1, int(mats[0].shape[-1]) if mats and mats[0].dim() else 1)
    if name in ("convolution", "_convolution") and len(tensors) >= 2:
        w = tensors[1]
        return max(1, w.numel() // max(1, int(w.shape[0])))
    if name == "cumsum" and len(args) > 1 and isinstance(args[1], int) and out.dim():
        return max(1, int(out.shape[args[1]]))          # the last element sums the whole dim
    biggest = max((a.numel() for a in tensors), default=1)
    return max(1, biggest // max(1, out.numel()))


def _magnitude(func: Any, args: tuple, kwargs: dict) -> Any:
    """The op applied to the absolute values of its floating inputs (and scalars): the size of the sum an
    accumulation passes through.  None where that does not run."""
    def absolute(x):
        if isinstance(x, torch.Tensor) and x.dtype.is_floating_point:
            return x.abs()
        if isinstance(x, float):
            return abs(x)
        if isinstance(x, (list, tuple)):
            return type(x)(absolute(v) for v in x)
        return x
    try:
        return func(*absolute(args), **{k: absolute(v) for k, v in kwargs.items()})
    except Exception:  # noqa: BLE001 - the op refuses the absolute values (an out= variant, an index op)
        return None


def _operands(args: tuple, kwargs: dict) -> Any:
    """``|a| + |alpha| |b|`` of an addition or subtraction (tensors or numbers); None where neither is a tensor."""
    a, b = (args + (0, 0))[:2]
    alpha = abs(kwargs.get("alpha", args[2] if len(args) > 2 and not isinstance(args[2], torch.Tensor) else 1))
    if not any(isinstance(v, torch.Tensor) for v in (a, b)):
        return None
    size = (lambda v: v.abs() if isinstance(v, torch.Tensor) else abs(v))
    try:
        return size(a) + alpha * size(b)
    except Exception:  # noqa: BLE001 - operands that do not broadcast as given (never for a valid add)
        return None


def _rounded(func: Any) -> bool:
    """Whether a probe rounds ``func``'s result: an accumulation or a computing pointwise op."""
    name = _name(func)
    return name in ACCUMULATIONS or (name not in EXACT and _arithmetic(func))


#: Casts: where the reference on native inputs and on float64 ones differ (a float64 run casts where a native one
#: has nothing to cast), so the two are matched op for op without them (:func:`stored_dtypes`).
CASTS = frozenset({"convert_element_type", "_to_copy", "to", "copy", "copy_"})
#: Unit roundoff of the dtypes eager stores values in below float32.
STORE_ROUNDOFF = {torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8,
                  **{d: torch.finfo(d).eps / 2 for d in FLOAT8}}


class _Decomposed(TorchDispatchMode):
    """A dispatch mode that runs composite ops as their decompositions and hands every other op to ``op``."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        decomposition = _decomposition(func)
        if decomposition is not None:
            with self:
                out = decomposition(*args, **kwargs)
            if out is not NotImplemented:
                return out
        return self.op(func, args, kwargs)

    def op(self, func, args: tuple, kwargs: dict) -> Any:
        raise NotImplementedError


class StoreRecorder(_Decomposed):
    """Runs the reference decomposed as a probe does and records, for every op a probe rounds, its name and the
    narrowest dtype eager holds its result in: the dtype it computes it in, or one a cast then rounds it to
    (a decomposition computes in float32 and casts its results to the input's bfloat16) -- :func:`stored_dtypes`."""

    def __init__(self):
        super().__init__()
        self.ops: list[list] = []
        self.made: dict[int, tuple[Any, int]] = {}     # id(result) -> (the result, its op's index in ops)

    def op(self, func, args: tuple, kwargs: dict) -> Any:
        out = func(*args, **kwargs)
        name = _name(func)
        first = out if isinstance(out, torch.Tensor) else next(
            (o for o in out if isinstance(o, torch.Tensor)), None) if isinstance(out, (tuple, list)) else None
        if name in CASTS:
            source = args[0] if args and isinstance(args[0], torch.Tensor) else None
            made = self.made.get(id(source)) if source is not None else None
            if made is not None and made[0] is source and first is not None and first.dtype in STORE_ROUNDOFF:
                entry = self.ops[made[1]]
                if STORE_ROUNDOFF[first.dtype] > STORE_ROUNDOFF.get(entry[1], 0.0):
                    entry[1] = first.dtype
        elif _rounded(func):
            self.ops.append([name, first.dtype if first is not None else None])
            if first is not None:
                self.made[id(first)] = (first, len(self.ops) - 1)
        return out


def stored_dtypes(reference: Callable[..., Any], native: dict[str, Any], upcast: dict[str, Any]) -> list | None:
    """The dtype eager stores each rounded op's result in, in the order a float64 probe meets them: the reference
    run on its ``native`` inputs and on the ``upcast`` ones must meet the same rounded ops (casts aside); None
    where they do not, or either raises (then every op rounds at float32's roundoff alone)."""
    runs = []
    for inputs in (native, upcast):
        recorder = StoreRecorder()
        kwargs = {k: v.detach().clone() if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
        try:
            with torch.random.fork_rng(devices=[]), recorder:
                reference(**kwargs)
        except Exception:  # noqa: BLE001 - no record: the plain probes
            return None
        runs.append(recorder.ops)
    if [n for n, _ in runs[0]] != [n for n, _ in runs[1]]:
        return None
    return [d for _, d in runs[0]]


class RoundingProbe(_Decomposed):
    """Runs the float64 reference rounding like a float32 machine with random directions (module docstring);
    with ``stored`` (:func:`stored_dtypes`), a result eager stores in float16 or bfloat16 is also rounded once
    at that dtype's roundoff of its own magnitude -- the store every implementation may make, not its
    accumulation, which stays at float32's."""

    def __init__(self, probe: int, roundoff: float, threshold: float, tiny: float, stored: list | None = None):
        super().__init__()
        self.probe, self.roundoff, self.threshold, self.tiny = probe, roundoff, threshold, tiny
        self.generator = torch.Generator().manual_seed(0x5EED + probe)
        self.stored, self.step = stored, 0

    def op(self, func, args: tuple, kwargs: dict) -> Any:
        name = _name(func)
        accumulation = name in ACCUMULATIONS
        if self.roundoff > UNIT_ROUNDOFF[torch.float64]:
            args, kwargs = tuple(map(_float32_scalar, args)), {k: _float32_scalar(v) for k, v in kwargs.items()}
        if not _rounded(func):
            return func(*args, **kwargs)
        store = 0.0
        if self.stored is not None and name not in CASTS:
            if self.step < len(self.stored):
                store = STORE_ROUNDOFF.get(self.stored[self.step], 0.0)
            self.step += 1
        # the sizes an op passes through, taken before it runs (an in-place op overwrites its operand)
        if accumulation:
            magnitudes = _magnitude(func, args, kwargs)
        elif name in ADDITIONS:
            magnitudes = _operands(args, kwargs)
        else:
            magnitudes = None
        out = func(*args, **kwargs)
        approximate = (self.roundoff > UNIT_ROUNDOFF[torch.float64] and isinstance(out, torch.Tensor)
                       and out.dtype.is_floating_point and name in _APPROXIMATE)
        if approximate:
            magnitudes = _approximate(name, args[0], out)
        terms = (lambda o: _terms(name, args, o)) if accumulation else (lambda o: 1)
        mutable = func._schema.is_mutable
        if isinstance(out, torch.Tensor):
            return self._round(out, magnitudes, terms, mutable, store, approximate)
        if isinstance(out, (tuple, list)):
            mags = magnitudes if isinstance(magnitudes, (tuple, list)) else [None] * len(out)
            return type(out)(self._round(o, m, terms, mutable, store) if isinstance(o, torch.Tensor) else o
                             for o, m in zip(out, mags))
        return out

    def _round(self, out: torch.Tensor, magnitude: Any, terms: Callable[[torch.Tensor], int],
               mutable: bool, store: float = 0.0, approximate: bool = False) -> torch.Tensor:
        if not out.dtype.is_floating_point or out.numel() == 0:
            return out
        size = out.abs()
        through = None
        if isinstance(magnitude, torch.Tensor):
            try:
                through = torch.maximum(size, magnitude.to(size.device, size.dtype).expand(out.shape))
            except RuntimeError:       # not the output's shape (an op returning several): its own size only
                through = None
        if through is not None:
            size = through * math.sqrt(terms(out))
        signs = torch.randint(0, 2, out.shape, generator=self.generator).to(out.device, out.dtype) * 2 - 1
        if approximate and self.probe < 2:
            # an approximate function errs the same way wherever its argument is alike: in the first two probes
            # every approximation moves up, then down, so that two of them in a chain (the exp and the log of a
            # log-sum-exp) add as they can on a GPU rather than cancel by chance in all four probes
            signs = torch.full_like(signs, 1.0 if self.probe == 0 else -1.0)
        step = signs * (self.roundoff * size + store * out.abs())
        # non-finite values stay as they are; an infinite magnitude (an inf input, a NaN) moves nothing
        new = torch.where(torch.isfinite(out) & torch.isfinite(step), out + step, out)
        if self.probe % 2 == 0:
            new = torch.where(new.abs() < self.tiny, torch.zeros_like(new), new)
        overflow = new.abs() >= self.threshold
        if through is not None and self.probe % 2 == 1:
            overflow |= torch.isfinite(through) & (through >= self.threshold)
        new = torch.where(overflow & torch.isfinite(new), torch.copysign(torch.full_like(new, math.inf), new), new)
        if mutable:
            return out.copy_(new)          # the op wrote into its argument: so does its rounding
        return new


def _approximate(name: str, x: Any, out: torch.Tensor) -> torch.Tensor:
    """The magnitude a GPU's approximate logarithm or exponential errs at (:data:`APPROX_ROUNDOFFS`)."""
    if name in LOGARITHMS:
        return out.abs().clamp_min(1.0) * APPROX_ROUNDOFFS
    reduction = x.abs() * (1.0 if name == "exp2" else math.log2(math.e)) if isinstance(x, torch.Tensor) else 0.0
    return out.abs() * (APPROX_ROUNDOFFS + reduction)


def _float32_scalar(value: Any) -> Any:
    """A Python float operand as a float32 machine holds it: Triton passes a float argument as float32 and
    eager computes a float32 op with its scalar cast to float32, so a constant the reference forms in double
    (``1 - beta``) is off by up to half a float32 ulp in every kernel -- in every element alike, a bias
    the random directions above do not model (a mixture ``beta p + (1 - beta) q`` whose coefficients sum to
    1 - 2^-26 shifts a divergence that cancels to 0 by one ulp of its terms).  Values past float32's range
    stay as they are."""
    if type(value) is float and math.isfinite(value) and abs(value) <= torch.finfo(torch.float32).max:
        return struct.unpack("f", struct.pack("f", value))[0]
    return value


class StepProbe(TorchDispatchMode):
    """Runs the reference with the floating operands of each step op (:data:`STEPS`, and a cast to an integer
    or bool dtype) moved by ``relative`` of their magnitude: the other side of a nearby boundary.  Whole
    numbers stay: they are exact (a rounding's result on its way to a cast, an index, a count), in a
    kernel as in eager, and moving them would flip every cast after a rounding."""

    def __init__(self, relative: float):
        super().__init__()
        self.relative = relative

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = _name(func)
        if name in STEPS or (name == "_to_copy" and _discrete_dtype(kwargs.get("dtype"))) or \
                (name == "copy_" and isinstance(args[0], torch.Tensor) and _discrete_dtype(args[0].dtype)):
            args = tuple(self._move(a) if i or name != "copy_" else a for i, a in enumerate(args))
            kwargs = {k: self._move(v) for k, v in kwargs.items()}
        return func(*args, **kwargs)

    def _move(self, x: Any) -> Any:
        if isinstance(x, torch.Tensor) and x.dtype.is_floating_point:
            return torch.where(torch.isfinite(x) & (x != x.round()), x + self.relative * x.abs(), x)
        return x


def _discrete_dtype(dtype: Any) -> bool:
    return isinstance(dtype, torch.dtype) and not dtype.is_floating_point and not dtype.is_complex


class Noise:
    """Per output (flattened like the reference's outputs): ``level`` -- the largest distance of a probe
    from the truth, 0 where the truth is not finite -- and ``may_overflow`` -- a probe was not finite where
    the truth is.  Entries are None for outputs that are not floating tensors.  ``discrete``: for integer
    and bool outputs, the :class:`Bounds` of each element over the truth and the probes -- an
    integer computed from floats (a rounding, a cast, an index) that flips under rounding noise sits at
    a discontinuity, where another legitimate order of rounding gives the other value."""

    def __init__(self, levels: list, may_overflow: list, discrete: list | None = None):
        self.levels, self.may_overflow = levels, may_overflow
        self.discrete = discrete if discrete is not None else [None] * len(levels)


def overflow_threshold(dtype: torch.dtype) -> float:
    """The smallest magnitude that rounds to inf in ``dtype``: its largest finite value plus half an ulp."""
    info = torch.finfo(dtype)
    return info.max + 2.0 ** math.floor(math.log2(info.max)) * info.eps / 2


def roundoff_for(dtypes: list[torch.dtype]) -> float:
    floating = [d for d in dtypes if d.is_floating_point]
    if floating and all(d == torch.float64 for d in floating):
        return UNIT_ROUNDOFF[torch.float64]
    return UNIT_ROUNDOFF_DEFAULT


def measure(reference: Callable[..., Any], inputs: dict[str, Any], truth: list, dtypes: list[torch.dtype],
            flatten: Callable[[Any], list], native: dict[str, Any] | None = None) -> Noise | None:
    """The rounding noise of ``reference`` at the float64 ``inputs`` (``truth`` is its flattened result there;
    ``dtypes`` the subject's floating input dtypes; ``native``: the inputs as eager got them, which say where
    eager stores a value in float16 or bfloat16 -- :func:`stored_dtypes`).  None where the inputs are too large
    or a probe raises: the verdict is then judged without it."""
    size = sum(v.numel() for v in inputs.values() if isinstance(v, torch.Tensor))
    if size > MAX_ELEMENTS:
        return None
    roundoff = roundoff_for(dtypes)
    if roundoff == UNIT_ROUNDOFF[torch.float64]:
        threshold, tiny = math.inf, 0.0
    else:
        threshold, tiny = overflow_threshold(torch.float32), torch.finfo(torch.float32).tiny
    levels: list = [None] * len(truth)
    overflow: list = [None] * len(truth)
    truth64 = [t.detach().cpu().double() if isinstance(t, torch.Tensor) and t.dtype.is_floating_point else None
               for t in truth]
    discrete = [Bounds.of(t) if is_discrete(t) else None for t in truth]
    if not _faithful(reference, inputs, truth64, flatten):
        return None
    stored = stored_dtypes(reference, native, inputs) if native is not None and roundoff != UNIT_ROUNDOFF[
        torch.float64] else None
    probes: list = [RoundingProbe(p, roundoff, threshold, tiny, stored) for p in range(PROBES)]
    if any(b is not None for b in discrete):
        probes += [StepProbe(roundoff * DISCRETE_ROUNDOFFS * d) for d in (1, -1)]
    for probe in probes:
        kwargs = {k: v.detach().clone() if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
        try:
            with torch.random.fork_rng(devices=[]), probe:
                out = flatten(reference(**kwargs))
        except Exception:  # noqa: BLE001 - a decomposition or the reference refuses the mode: no noise estimate
            return None
        for i, o in enumerate(out[:len(truth)]):
            if discrete[i] is not None and is_discrete(o) and o.shape == discrete[i].low.shape:
                discrete[i] = discrete[i].widen(o)
        if isinstance(probe, StepProbe):
            continue                   # a step probe bounds the discrete outputs only
        for i, (t64, o) in enumerate(zip(truth64, out)):
            if t64 is None or not (isinstance(o, torch.Tensor) and o.shape == t64.shape):
                continue
            o64 = o.detach().cpu().double()
            finite = torch.isfinite(t64)
            dist = torch.where(finite & torch.isfinite(o64), (o64 - t64).abs(), torch.zeros_like(t64))
            lost = finite & ~torch.isfinite(o64)
            levels[i] = dist if levels[i] is None else torch.maximum(levels[i], dist)
            overflow[i] = lost if overflow[i] is None else overflow[i] | lost
    return Noise(levels, overflow, discrete)


#: How far (relative to the output's largest magnitude) the decomposed reference may land from the truth with
#: no rounding added: float64 reassociation, never a different function.
FAITHFUL_RTOL = 1e-9
#: ... relative to at least this fraction of the largest magnitude among all outputs (:func:`_faithful`).
FAITHFUL_FLOOR = 1e-6


def _faithful(reference: Callable[..., Any], inputs: dict[str, Any], truth64: list,
              flatten: Callable[[Any], list]) -> bool:
    """Whether the reference, run as its decompositions with no rounding added, computes the truth.  A
    decomposition that does not reproduce its op (core ATen's of CPU flash attention returns the attention
    weights where its backward reads the logsumexp) would make every probe far off and excuse any
    candidate: then there is no noise estimate at all."""
    kwargs = {k: v.detach().clone() if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
    try:
        with torch.random.fork_rng(devices=[]), RoundingProbe(1, 0.0, math.inf, 0.0):
            out = flatten(reference(**kwargs))
    except Exception:  # noqa: BLE001 - as a probe that raises: no estimate
        return False
    largest = max((float(t[torch.isfinite(t)].abs().max()) for t in truth64
                   if t is not None and t.numel() and torch.isfinite(t).any()), default=0.0)
    for t64, o in zip(truth64, out):
        if t64 is None or not isinstance(o, torch.Tensor) or o.shape != t64.shape:
            continue
        o64 = o.detach().cpu().double()
        if not torch.equal(torch.isfinite(o64), torch.isfinite(t64)):
            return False
        finite = torch.isfinite(t64)
        if finite.any():
            # an output that cancels to (nearly) zero holds float64 reassociation noise of the values it cancelled,
            # not a scale of its own: a floor of FAITHFUL_FLOOR of the largest output keeps it from failing the check
            scale = max(float(t64[finite].abs().max()), FAITHFUL_FLOOR * largest)
            if float((o64[finite] - t64[finite]).abs().max()) > FAITHFUL_RTOL * scale:
                return False
    return True


def is_discrete(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and not x.dtype.is_floating_point and not x.dtype.is_complex


@dataclasses.dataclass(frozen=True)
class Bounds:
    """The lowest and highest value each element of a discrete (integer or bool) output was seen to take."""
    low: torch.Tensor
    high: torch.Tensor

    @classmethod
    def of(cls, value: torch.Tensor) -> "Bounds":
        value = value.detach().cpu()
        return cls(value, value)

    def widen(self, value: torch.Tensor) -> "Bounds":
        """These bounds taking in ``value`` (same shape) too."""
        value = value.detach().cpu().to(self.low.dtype)
        if self.low.dtype == torch.bool:
            return Bounds(self.low & value, self.high | value)
        return Bounds(torch.minimum(self.low, value), torch.maximum(self.high, value))

    def admit(self, value: torch.Tensor) -> torch.Tensor:
        """Per element, whether ``value`` lies within the bounds."""
        low, high = self.low.to(value.dtype), self.high.to(value.dtype)
        if value.dtype == torch.bool:
            return (value == low) | (value == high)
        return (value >= low) & (value <= high)
