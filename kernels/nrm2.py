"""``nrm2(x) = ||x||_2`` over every element of ``x``: deterministic, overflow-free, one read of ``x``.

Contract: the value of ``torch.linalg.vector_norm(x)`` (2-norm of the flattened
tensor) for float32 / float16 / bfloat16, returned as a 0-d tensor of x's dtype;
sums run in float32.  Registered as ``torch.ops.tritondiff.nrm2`` with a fake
implementation and autograd.

Algorithm (LAPACK ``nrm2`` in spirit, with power-of-two scales):

* A partial state is ``(k, s)`` meaning ``sum(x_i**2) = s * 2**(-2k)``: ``s`` is a
  sum of squares of values scaled by ``2**k``.  ``k`` is chosen from the largest
  magnitude seen so that scaled values lie below ``2**9``: squares stay far from
  float32 overflow however large ``x`` is (1e20 squared is 1e40, past float32's
  3.4e38), and tiny inputs are scaled up instead of underflowing.  Scaling by a
  power of two is exact, so the scaling adds no rounding error of its own.
* ``_nrm2_kernel``, one launch: a persistent grid of P programs; program p walks
  the tiles p, p + P, p + 2P, ...  Per tile it takes the tile's max |x|, and if
  that needs a smaller ``k`` it rescales its running sums once (online
  rescaling), then adds the scaled squares elementwise into a per-lane
  accumulator.  Full tiles load unmasked (vectorised); only the one ragged last
  tile is masked.  Each program writes its own ``(k_p, s_p)`` slot, then counts
  itself in on an arrival counter; the program that arrives last combines the P
  partials in a fixed order, ``K = min k_p``, ``S = sum s_p * 2**(2(K - k_p))``,
  ``||x|| = sqrt(S) * 2**-K``, and sets the counter back to zero.  Fixed grid,
  fixed tile order, fixed reduction trees: bitwise reproducible, whichever
  program finishes last.  One launch, not a partial and a finish kernel: at
  small N the host's launch is most of the call (issue #39).

inf and NaN fall out naturally: an inf tile gets the smallest scale and makes
``s`` inf; a NaN makes ``s`` NaN, and NaN + inf is NaN as in torch.

Gradient: ``d||x||/dx_i = x_i / ||x||``, so ``grad_x = g * x / ||x||``; at
``x = 0`` torch picks the subgradient 0, and so do we.
"""
from __future__ import annotations

import dataclasses
import functools

import torch
import triton
import triton.language as tl

from tritondiff.base import device as _device

from . import fast_path
from .launch import cdiv, launch, pow2_ceil
from .config import config, register_launch_names, sm_count, store_dtype
from .exc import UnsupportedInput

_SUPPORTED = (torch.float32, torch.float16, torch.bfloat16)
_MAX_PROGRAMS = 16384  # the finish kernel holds every partial in one tile


# --------------------------------------------------------------------------- kernels


@triton.jit
def _nrm2_kernel(x_ptr, ws_ptr, count_ptr, out_ptr, N, BLOCK: tl.constexpr, BLOCK_P: tl.constexpr):
    # Program p of P walks tiles p, p + P, ... and writes k_p to ws[p], s_p to ws[P + p]; the last to arrive
    # combines them into out.
    #
    # State (k, acc): the sum of squares so far is sum(acc) * 2**(-2k).
    # Per tile, with m = max|x| of the tile and e its binary exponent
    # (m in [2**e, 2**(e+1))), the scale 2**k_t with k_t = 8 - e maps m into
    # [2**8, 2**9); zero and subnormals read as e = -127, inf and NaN as e = 128,
    # and the clamp to [-126, 127] keeps 2**k a normal float32.  Squares of
    # scaled values are < 2**18, so acc cannot overflow below 2**110 elements.
    # If k_t < k (a larger magnitude) acc is first rescaled once:
    #   acc * 2**(2k) -> acc * 2**(2k_t) = acc * (2**(k_t - k))**2
    # (the factor underflows only for terms below 2**-252 of the new max, which
    # float32 could not hold anyway).  Then acc += (x * 2**k)**2, elementwise.
    # 2**j for integer j in [-126, 127] is built from its float32 bits (biased
    # exponent j + 127 in bits 23..30): exact, no libm.
    #
    # The helpers are written inline: each nested @triton.jit call costs
    # milliseconds in the interpreter.
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    offs = tl.arange(0, BLOCK)
    k = tl.full((), 127, tl.int32)  # 127 = "nothing seen yet" (largest scale)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    # N is 64-bit when it is >= 2**31, and then so are the tile counts and the
    # loop index: tile * BLOCK never wraps.
    # n_tiles = ceil(N / BLOCK) as (N - 1) // BLOCK + 1 (N >= 1: the wrapper returns early at N = 0), not
    # (N + BLOCK - 1) // BLOCK, which wraps for an int32 N near 2**31.
    n_full = N // BLOCK
    n_tiles = (N - 1) // BLOCK + 1
    for tile in tl.range(pid, n_tiles, num_programs):
        if tile < n_full:  # uniform branch: only the ragged last tile pays for a mask
            x = tl.load(x_ptr + tile * BLOCK + offs).to(tl.float32)
        else:
            x = tl.load(x_ptr + tile * BLOCK + offs, mask=offs < N - tile * BLOCK, other=0.0).to(tl.float32)
        m_bits = tl.max(tl.abs(x), axis=0).to(tl.int32, bitcast=True)
        k_tile = tl.minimum(tl.maximum(8 - (((m_bits >> 23) & 0xFF) - 127), -126), 127)
        if k_tile < k:
            f = ((tl.maximum(k_tile - k, -126) + 127) << 23).to(tl.float32, bitcast=True)
            acc = acc * f * f
            k = k_tile
        xs = x * ((k + 127) << 23).to(tl.float32, bitcast=True)
        acc += xs * xs
    tl.store(ws_ptr + pid, k.to(tl.float32))  # a small integer: exact in float32
    tl.store(ws_ptr + num_programs + pid, tl.sum(acc, axis=0))
    # Count in.  The barrier puts every thread's stores before the count, whose acq_rel atomic publishes them
    # at GPU scope (a release) and, in the last program, orders its reads after every other program's stores
    # (an acquire); those reads bypass L1 (.cg), where a line of an earlier call may linger.
    tl.debug_barrier()
    arrived = tl.atomic_add(count_ptr, 1, sem="acq_rel")
    if arrived == num_programs - 1:
        tl.debug_barrier()
        # Combine the P partials (k_p, s_p) in one fixed-order tile:
        #   K = min_p k_p   (the scale of the largest magnitude)
        #   S = sum_p s_p * 2**(2(K - k_p))   (every term brought to scale 2**K)
        #   ||x|| = sqrt(S) * 2**-K
        # 2**-K spans [2**-127, 2**126]: applied as two in-range factors.
        slots = tl.arange(0, BLOCK_P)
        mask = slots < num_programs
        ks = tl.load(ws_ptr + slots, mask=mask, other=127.0, cache_modifier=".cg").to(tl.int32)
        s = tl.load(ws_ptr + num_programs + slots, mask=mask, other=0.0, cache_modifier=".cg")
        k_min = tl.min(ks, axis=0)
        f = ((tl.maximum(k_min - ks, -126) + 127) << 23).to(tl.float32, bitcast=True)
        total = tl.sum(s * f * f, axis=0)
        half = (-k_min) >> 1
        norm = tl.sqrt_rn(total) * ((half + 127) << 23).to(tl.float32, bitcast=True)
        norm = norm * ((-k_min - half + 127) << 23).to(tl.float32, bitcast=True)
        tl.store(out_ptr, norm.to(out_ptr.dtype.element_ty))
        tl.store(count_ptr, 0)          # left zero for the next call


# --------------------------------------------------------------------------- launch


@dataclasses.dataclass(frozen=True)
class Nrm2Launch:
    """Launch parameters of the partial kernel (override with ``launch_overrides={"nrm2": {...}}``)."""

    block_bytes: int  # bytes of x per tile: BLOCK = block_bytes // itemsize elements
    values_per_thread: int  # elements a thread holds per tile: num_warps = BLOCK / (32 * values_per_thread)
    warps_per_sm: int  # persistent grid: SMs * warps_per_sm / num_warps programs (at most one per tile)


# One table per architecture.  sm90 (H100/H200): 16 KiB tiles, 16 values a
# thread (four 16-byte loads in flight for float32) compile to ~64 registers,
# so 32 warps (4 programs of 8 warps) are resident per SM in a single wave.
# Interpreter: few, large tiles, since each program instance costs milliseconds.
_LAUNCH = {
    "interpreter": Nrm2Launch(block_bytes=1 << 20, values_per_thread=1 << 18, warps_per_sm=4),
    "sm90": Nrm2Launch(block_bytes=16384, values_per_thread=16, warps_per_sm=32),
    "default": Nrm2Launch(block_bytes=16384, values_per_thread=16, warps_per_sm=32),
}
register_launch_names("nrm2")


#: (device, stream) -> (partials workspace, arrival counter), allocated once: the kernel overwrites the
#: partials before it reads them and leaves the counter zero, and calls on one stream run one after another.
#: At most _SCRATCH_STREAMS entries (a program that makes streams by the thousand): the oldest is dropped, its
#: memory back to the caching allocator, which reuses a block on its own stream only, after the kernels there.
_SCRATCH: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}
_SCRATCH_STREAMS = 64
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def _scratch(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """The workspace (room for ``_MAX_PROGRAMS`` partials) and zeroed arrival counter of the current stream."""
    index = device.index if device.index is not None else 0
    key = (device.type, index, _raw_stream(index) if device.type == "cuda" and _raw_stream else None)
    found = _SCRATCH.get(key)
    if found is None:
        if len(_SCRATCH) >= _SCRATCH_STREAMS:
            del _SCRATCH[next(iter(_SCRATCH))]
        found = _SCRATCH[key] = (torch.empty(2 * _MAX_PROGRAMS, dtype=torch.float32, device=device),
                                 torch.zeros(1, dtype=torch.int32, device=device))
    return found


@functools.lru_cache(maxsize=256)
def _plan(n: int, itemsize: int, lp: Nrm2Launch, sms: int, interpreter: bool) -> tuple[int, int, int]:
    """(programs, BLOCK, num_warps) of the kernel over ``n`` elements."""
    block = pow2_ceil(max(lp.block_bytes // itemsize, 1))
    if interpreter:  # a smaller tile wastes less numpy work on small inputs
        block = min(block, pow2_ceil(n))
    num_warps = max(1, min(16, block // (32 * lp.values_per_thread)))
    per_sm = max(1, lp.warps_per_sm // num_warps)
    return max(1, min(sms * per_sm, cdiv(n, block), _MAX_PROGRAMS)), block, num_warps


def _launch_nrm2(flat: torch.Tensor) -> torch.Tensor:
    """Run the kernel on a contiguous 1-D tensor; returns the 0-d norm in flat's dtype."""
    n = flat.numel()
    if n == 0:
        return torch.zeros((), dtype=flat.dtype, device=flat.device)
    device = flat.device
    out = torch.empty((), dtype=store_dtype(flat.dtype), device=device)
    programs, block, num_warps = _plan(n, flat.element_size(), config.launch("nrm2", _LAUNCH, device),
                                       sm_count(device), _device.is_interpreter())
    ws, count = _scratch(device)
    launch(_nrm2_kernel, (programs,), flat, ws, count, out, n, BLOCK=block, BLOCK_P=pow2_ceil(programs),
           num_warps=num_warps)
    return out if out.dtype == flat.dtype else out.to(flat.dtype)


def _flatten(x: torch.Tensor) -> torch.Tensor:
    """A 1-D view of x's elements in memory order, copying only when x is not dense.

    The norm does not depend on element order, so a permuted dense layout (a
    transpose, a channels-last tensor) is read through its storage without a copy.
    """
    if x.is_contiguous():
        return x.view(-1)
    order = sorted(range(x.dim()), key=lambda d: x.stride(d), reverse=True)
    permuted = x.permute(order)
    if permuted.is_contiguous():
        return permuted.view(-1)
    return x.contiguous().view(-1)


def _check_input(x: object) -> None:
    if not isinstance(x, torch.Tensor):
        raise UnsupportedInput(f"nrm2: x must be a torch.Tensor, got {type(x).__name__}", argument="x")
    if x.dtype not in _SUPPORTED:
        raise UnsupportedInput(
            f"nrm2: x has dtype {x.dtype}; supported are float32, float16 and bfloat16 "
            f"(cast with x.float() first)", argument="x")
    want = _device.torch_device().type
    if x.device.type != want:
        raise UnsupportedInput(
            f"nrm2: x is on {x.device} but kernels run on {want} ({_device.describe()}); "
            f"move x with x.to({want!r}) or choose the device with TRITONDIFF_DEVICE", argument="x")


# --------------------------------------------------------------------------- reference


def nrm2_reference(x: torch.Tensor) -> torch.Tensor:
    """Eager reference: the float64 2-norm of every element, cast to x's dtype."""
    return torch.linalg.vector_norm(x.double()).to(x.dtype)


# --------------------------------------------------------------------------- registration


@torch.library.custom_op("tritondiff::nrm2", mutates_args=())
def _nrm2_op(x: torch.Tensor) -> torch.Tensor:
    _check_input(x)
    return _launch_nrm2(_flatten(x))


@_nrm2_op.register_fake
def _nrm2_fake(x: torch.Tensor) -> torch.Tensor:
    _check_input(x)
    return x.new_empty(())


def _nrm2_setup_context(ctx, inputs, output) -> None:
    (x,) = inputs
    ctx.save_for_backward(x, output)


def _nrm2_backward(ctx, grad: torch.Tensor) -> torch.Tensor:
    # grad_x = g * x / ||x||, and 0 where ||x|| = 0 (torch's subgradient choice).
    # The denominator is made safe before dividing so a second derivative
    # through the masked branch is 0, not 0 * inf = NaN.  Computed in float32.
    x, norm = ctx.saved_tensors
    norm32 = norm.float()
    zero = norm32 == 0
    safe_norm = torch.where(zero, torch.ones_like(norm32), norm32)
    # x / ||x|| first (O(1) even for subnormal x; g / ||x|| could overflow), then times g;
    # g * 0 (not a plain 0) at x = 0, so a NaN / inf incoming gradient stays NaN there, as in torch
    direction = torch.where(zero, torch.zeros_like(x, dtype=torch.float32), x.float() / safe_norm)
    return (grad.float() * direction).to(x.dtype)


_nrm2_op.register_autograd(_nrm2_backward, setup_context=_nrm2_setup_context)


class _Nrm2Function(torch.autograd.Function):
    """The eager fast path (kernels/fast_path.py): the op's launcher and backward, no dispatcher."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        out = _launch_nrm2(_flatten(x))
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        return _nrm2_backward(ctx, grad)


def nrm2(x: torch.Tensor) -> torch.Tensor:
    """``||x||_2`` of every element of ``x`` as a 0-d tensor of x's dtype (see the module docstring)."""
    _check_input(x)
    if fast_path.plain_eager(x):
        return _Nrm2Function.apply(x) if fast_path.needs_grad(x) else _launch_nrm2(_flatten(x))
    return _nrm2_op(x)
