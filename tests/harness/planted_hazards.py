"""Kernels with planted hazards (the bugs a plain output diff misses), each beside its correct twin."""
import itertools

import torch
import triton
import triton.language as tl

from tritondiff.harness import subject, tensor

VEC = dict(dims={"N": (0, 100_000)})
BLOCK = 4096


# ----------------------------------------------------------------------------- in-place autotuned update

@triton.jit
def _add_one_body(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1.0, mask=mask)


_CONFIGS = [triton.Config({"BLOCK": b}) for b in (1024, 2048, 4096)]
_add_one = triton.autotune(configs=_CONFIGS, key=["n"])(_add_one_body)
_add_one_restored = triton.autotune(configs=_CONFIGS, key=["n"], restore_value=["x_ptr"])(_add_one_body)


def _inplace(kernel, x):
    n = x.numel()
    kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, n)
    return x


_INPLACE = dict(reference=lambda x: x + 1, mutates=("x",), **VEC,
                inputs={"x": tensor(("N",), layouts=("contiguous",), nonfinite=False)})


@subject(**_INPLACE)
def inplace_autotuned_no_restore(x):
    """Planted: every tuning trial adds 1 again (no restore_value)."""
    return _inplace(_add_one, x)


@subject(**_INPLACE)
def inplace_autotuned_restored(x):
    return _inplace(_add_one_restored, x)


# ----------------------------------------------------------------------------- row sums into fresh memory

@triton.jit
def _row_sum_accumulate_kernel(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.load(out_ptr + row)                  # reads whatever the output buffer held
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.sum(tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=0.0))
    tl.store(out_ptr + row, acc)


def _row_sums(x, alloc):
    x = x.contiguous()
    out = alloc(x.shape[0], device=x.device, dtype=torch.float32)
    if x.shape[0]:
        _row_sum_accumulate_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), BLOCK=1024)
    return out


_ROWS = dict(reference=lambda x: x.sum(-1), dims={"M": (1, 64), "N": (1, 3000)},
             inputs={"x": tensor(("M", "N"), nonfinite=False)})


@subject(**_ROWS)
def accumulates_into_empty(x):
    """Planted: accumulates into torch.empty (right only when the allocator hands back zeros)."""
    return _row_sums(x, torch.empty)


@subject(**_ROWS)
def accumulates_into_zeros(x):
    return _row_sums(x, torch.zeros)


# ----------------------------------------------------------------------------- empty grid for N = 0

@triton.jit
def _sumsq_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
        acc += x * x
    tl.store(out_ptr, tl.sqrt(tl.sum(acc)))


_NORM = dict(reference=lambda x: torch.linalg.vector_norm(x), **VEC,
             inputs={"x": tensor(("N",), values=("normal", "uniform_pos", "integer"), nonfinite=False)})


@subject(**_NORM)
def norm_empty_grid_for_zero_size(x):
    """Planted: launches cdiv(N, BLOCK) programs, so N = 0 launches none and the output stays unwritten."""
    out = torch.empty((), device=x.device, dtype=torch.float32)
    n = x.numel()
    _sumsq_kernel[(triton.cdiv(n, 1 << 20),)](x.contiguous(), out, n, BLOCK=BLOCK)
    return out


@subject(**_NORM)
def norm_one_program(x):
    out = torch.empty((), device=x.device, dtype=torch.float32)
    _sumsq_kernel[(1,)](x.contiguous(), out, x.numel(), BLOCK=BLOCK)
    return out


# ----------------------------------------------------------------------------- input used as scratch

@triton.jit
def _prefix_in_place_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n, BLOCK):
        idx = start + offs
        acc += tl.load(x_ptr + idx, mask=idx < n, other=0.0)
        tl.store(x_ptr + idx, acc, mask=idx < n)       # planted: scribbles partials over the input
    tl.store(out_ptr, tl.sum(acc))


@subject(reference=lambda x: x.sum(), **VEC, inputs={"x": tensor(("N",), layouts=("contiguous",),
                                                               values=("uniform_pos",), nonfinite=False)})
def sum_using_input_as_scratch(x):
    out = torch.empty((), device=x.device, dtype=torch.float32)
    _prefix_in_place_kernel[(1,)](x, out, x.numel(), BLOCK=BLOCK)
    return out


@subject(reference=lambda x: x.sum(), **VEC, inputs={"x": tensor(("N",), layouts=("contiguous",),
                                                               values=("uniform_pos",), nonfinite=False)})
def sum_using_own_scratch(x):
    scratch = x.clone()
    out = torch.empty((), device=x.device, dtype=torch.float32)
    _prefix_in_place_kernel[(1,)](scratch, out, x.numel(), BLOCK=BLOCK)
    return out


# ----------------------------------------------------------------------------- unmasked tail

@triton.jit
def _double_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, MASK_STORE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.load(x_ptr + offs, mask=mask, other=0.0) * 2
    if MASK_STORE:
        tl.store(out_ptr + offs, y, mask=mask)
    else:
        tl.store(out_ptr + offs, y)                      # planted: the tail block writes past the end


_DOUBLE = dict(reference=lambda x: x * 2, **VEC, inputs={"x": tensor(("N",), nonfinite=False)})


@subject(**_DOUBLE)
def double_unmasked_tail(x):
    out = torch.empty_like(x)
    n = x.numel()
    if n:
        _double_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024, MASK_STORE=False)
    return out


@subject(**_DOUBLE)
def double_masked(x):
    out = torch.empty_like(x, memory_format=torch.contiguous_format)
    n = x.numel()
    if n:
        _double_kernel[(triton.cdiv(n, 1024),)](x.contiguous(), out, n, BLOCK=1024, MASK_STORE=True)
    return out


# ----------------------------------------------------------------------------- unmasked tail read (bounds off)

SUM_BLOCK = 128        # < tensors.GUARD_ELEMENTS: an unmasked tail reads at most BLOCK - 1 canary elements


@triton.jit
def _block_sums_kernel(x_ptr, partial_ptr, n, BLOCK: tl.constexpr, MASK_LOAD: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if MASK_LOAD:
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    else:
        x = tl.load(x_ptr + offs)                        # planted: the tail block reads past the end
    tl.store(partial_ptr + tl.program_id(0), tl.sum(x.to(tl.float32)))


def _block_sums(x, *, mask_load=True):
    n = x.numel()
    partial = torch.empty(triton.cdiv(n, SUM_BLOCK), device=x.device, dtype=torch.float32)
    if n:
        _block_sums_kernel[(partial.numel(),)](x, partial, n, BLOCK=SUM_BLOCK, MASK_LOAD=mask_load)
    return partial


_SUM = dict(reference=lambda x: x.sum(), **VEC,
            inputs={"x": tensor(("N",), dtypes=("float32",), layouts=("contiguous", "offset"),
                                values=("uniform_pos",), nonfinite=False)})


@subject(**_SUM, disable=("bounds",))    # the interpreter's lane checker would see it first; the canary must
def sum_unmasked_tail_read(x):
    return _block_sums(x, mask_load=False).sum()


@subject(**_SUM, disable=("bounds",))
def sum_masked_tail_read(x):
    return _block_sums(x, mask_load=True).sum()


# ----------------------------------------------------------------------------- order of a final sum

_SHUFFLES = itertools.count()


def _shuffled(partial):
    # stands for atomics (or a work queue) combining partials in whatever order programs finish; each call
    # its own permutation from a private generator (the global RNG's state depended on which tests ran
    # before in the process: in one gate run two calls happened to agree and the plant went unseen)
    g = torch.Generator().manual_seed(next(_SHUFFLES))
    return partial[torch.randperm(partial.numel(), generator=g, device="cpu").to(partial.device)]


@subject(**_SUM)
def sum_partials_in_random_order(x):
    """Planted: float additions in a different order each call, declared deterministic (the default)."""
    return _shuffled(_block_sums(x)).sum()


@subject(**_SUM, deterministic=False)
def sum_partials_in_random_order_declared(x):
    return _shuffled(_block_sums(x)).sum()


@subject(**_SUM)
def sum_partials_in_order(x):
    return _block_sums(x).sum()


# ----------------------------------------------------------------------------- workspace kept across calls

_WORKSPACES: dict = {}


@triton.jit
def _sum_into_kernel(x_ptr, acc_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(acc_ptr, tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0)))


_sum_into_autotuned = triton.autotune(configs=[triton.Config({"BLOCK": b}) for b in (128, 256, 512)], key=["n"],
                                      reset_to_zero=["acc_ptr"])(_sum_into_kernel)


def _workspace(x):
    key = (x.numel(), x.device)
    if key not in _WORKSPACES:
        _WORKSPACES[key] = torch.zeros(1, device=x.device, dtype=torch.float32)
    return _WORKSPACES[key]


@subject(**_SUM, deterministic=False)
def sum_into_kept_workspace(x):
    """Planted: a workspace cached per size and zeroed only when first allocated: right on the first
    call of each size, the sum of all calls so far after that."""
    acc = _workspace(x)
    _sum_into_kernel[(triton.cdiv(x.numel(), SUM_BLOCK),)](x, acc, x.numel(), BLOCK=SUM_BLOCK)
    return acc[0].clone()


@subject(**_SUM, deterministic=False)
def sum_into_kept_workspace_zeroed(x):
    acc = _workspace(x).zero_()
    _sum_into_kernel[(triton.cdiv(x.numel(), SUM_BLOCK),)](x, acc, x.numel(), BLOCK=SUM_BLOCK)
    return acc[0].clone()


@subject(**_SUM, deterministic=False)
def sum_into_workspace_zeroed_by_autotuner(x):
    """Planted: relies on reset_to_zero to clear a cached workspace, but the autotuner resets only while
    it tunes: the tuning call is right, every cached call adds onto the last result."""
    acc = _workspace(x)
    n = x.numel()
    _sum_into_autotuned[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, acc, n)
    return acc[0].clone()


@subject(**_SUM, deterministic=False)
def sum_into_workspace_zeroed_by_caller(x):
    acc = _workspace(x).zero_()
    n = x.numel()
    _sum_into_autotuned[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, acc, n)
    return acc[0].clone()


# ----------------------------------------------------------------------------- one autotune config wrong

@triton.jit
def _triple_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, UNROLL: tl.constexpr, FORGETS_UNROLL: tl.constexpr):
    if FORGETS_UNROLL:
        base = tl.program_id(0) * BLOCK                  # planted: programs overlap when UNROLL > 1
    else:
        base = tl.program_id(0) * BLOCK * UNROLL
    for u in tl.static_range(UNROLL):
        offs = base + u * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n, other=0.0) * 3, mask=offs < n)


_UNROLL_CONFIGS = [triton.Config({"BLOCK": 256, "UNROLL": 1}), triton.Config({"BLOCK": 128, "UNROLL": 2}),
                   triton.Config({"BLOCK": 512, "UNROLL": 1})]
_triple_autotuned = triton.autotune(configs=_UNROLL_CONFIGS, key=["n"])(_triple_kernel)


def _triple(x, forgets_unroll):
    x = x.contiguous()
    out = torch.zeros_like(x)
    n = x.numel()
    if n:
        _triple_autotuned[lambda meta: (triton.cdiv(n, meta["BLOCK"] * meta["UNROLL"]),)](
            x, out, n, FORGETS_UNROLL=forgets_unroll)
    return out


_TRIPLE = dict(reference=lambda x: x * 3, **VEC,
               inputs={"x": tensor(("N",), values=("normal", "uniform_pos"), nonfinite=False)})


@subject(**_TRIPLE)
def triple_one_config_wrong(x):
    """Planted: the UNROLL=2 config leaves the last part of the output unwritten (the others are right)."""
    return _triple(x, True)


@subject(**_TRIPLE)
def triple_every_config_right(x):
    return _triple(x, False)


# ----------------------------------------------------------------------------- a hunter switched off

@subject(reference=lambda x: x.sum(), **VEC, disable=("mutation",),
         inputs={"x": tensor(("N",), layouts=("contiguous",), values=("uniform_pos",), nonfinite=False)})
def sum_using_input_as_scratch_unchecked(x):
    """sum_using_input_as_scratch with the mutation hunter switched off by the subject."""
    out = torch.empty((), device=x.device, dtype=torch.float32)
    _prefix_in_place_kernel[(1,)](x, out, x.numel(), BLOCK=BLOCK)
    return out


# ----------------------------------------------------------------------------- crash and hang

@triton.jit
def _wild_load_kernel(x_ptr, out_ptr, WILD: tl.constexpr):
    offs = tl.arange(0, 16).to(tl.int64)
    if WILD:
        offs = offs + 0x10000000000                      # planted: far outside any allocation
    tl.store(out_ptr + offs, tl.load(x_ptr + offs))


_SIXTEEN = dict(reference=lambda x: x.clone(), dims={}, inputs={"x": tensor((16,), layouts=("contiguous",))})


@subject(**_SIXTEEN, disable=("bounds",))               # with the sanitizer off the wild load really happens
def wild_load_segfaults(x):
    out = torch.empty_like(x)
    _wild_load_kernel[(1,)](x, out, WILD=True)
    return out


@subject(**_SIXTEEN)
def tame_load(x):
    out = torch.empty_like(x)
    _wild_load_kernel[(1,)](x, out, WILD=False)
    return out


@triton.jit
def _spin_kernel(flag_ptr, out_ptr):
    flag = tl.load(flag_ptr, volatile=True)
    while flag == 0:                                     # planted: waits for a flag nobody sets
        flag = tl.load(flag_ptr, volatile=True)
    tl.store(out_ptr, flag)


_FLAG = dict(reference=lambda x: torch.ones((), dtype=torch.int32), dims={},
             inputs={"x": tensor((1,), dtypes=("int32",))})


@subject(**_FLAG)
def waits_forever(x):
    flag = torch.zeros(1, dtype=torch.int32, device=x.device)
    out = torch.empty((), dtype=torch.int32, device=x.device)
    _spin_kernel[(1,)](flag, out)
    return out


@subject(**_FLAG)
def flag_already_set(x):
    flag = torch.ones(1, dtype=torch.int32, device=x.device)
    out = torch.empty((), dtype=torch.int32, device=x.device)
    _spin_kernel[(1,)](flag, out)
    return out


# ----------------------------------------------------------------------------- dumps of compiled code

def _sin_plus_one(x):
    return x.sin() + 1


@subject(reference=lambda x: x.sin() + 2, dims={"N": (1, 64)},
         inputs={"x": tensor(("N",), dtypes=("float32",), values=("normal",), nonfinite=False)})
def compiled_against_wrong_reference(x):
    """Planted (in the reference, so every example fails): a tiny program through the compiler, whose
    failure dump must hold the compiler's counters and artifacts wherever the example ran."""
    from tritondiff.harness.subjects.compiler import run_compiled  # the compiler (and dynamo) only when this subject runs

    return run_compiled(_sin_plus_one, x)
