"""Atomics: a histogram accumulated into an existing count table, and a row scatter-add
(index_add) with float atomics."""
import torch
import tritondiff  # noqa: F401
import triton
import triton.language as tl

from tritondiff import subject, tensor


@triton.jit
def _hist_kernel(ids_ptr, counts_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    ids = tl.load(ids_ptr + offs, mask=mask, other=0)
    tl.atomic_add(counts_ptr + ids, tl.full((BLOCK,), 1, tl.int64), mask=mask)


@subject(reference=lambda ids, counts: counts + torch.bincount(ids, minlength=counts.shape[0]),
         inputs={"ids": tensor(("N",), dtypes=("int64",), low=0, high="B"),
                 "counts": tensor(("B",), dtypes=("int64",), low=0, high=1000)},
         dims={"N": (0, 1_100_000), "B": (1, 4096)})
def histogram_atomic(ids, counts):
    out = counts.clone()
    n = ids.numel()
    if n:
        _hist_kernel[(triton.cdiv(n, 4096),)](ids.contiguous(), out, n, BLOCK=4096)
    return out


@triton.jit
def _scatter_add_kernel(src_ptr, idx_ptr, out_ptr, D, s_src, s_src_d, s_idx, BLOCK_D: tl.constexpr):
    i = tl.program_id(0)
    row = tl.load(idx_ptr + i * s_idx)
    cols = tl.arange(0, BLOCK_D)
    for d0 in range(0, D, BLOCK_D):
        c = d0 + cols
        v = tl.load(src_ptr + i * s_src + c * s_src_d, mask=c < D, other=0.0)
        tl.atomic_add(out_ptr + row * D + c, v.to(tl.float32), mask=c < D)


@subject(reference=lambda base, idx, src: base.index_add(0, idx, src),
         inputs={"base": tensor(("M", "D")), "idx": tensor(("N",), dtypes=("int64",), low=0, high="M"),
                 "src": tensor(("N", "D"), dtype_like="base")},
         dims={"M": (1, 512), "N": (0, 2048), "D": (1, 256)}, deterministic=False)
def scatter_add_rows(base, idx, src):
    out = base.contiguous().clone()
    N, D = src.shape
    if N:
        _scatter_add_kernel[(N,)](src, idx, out, D, src.stride(0), src.stride(1), idx.stride(0),
                                  BLOCK_D=min(128, triton.next_power_of_2(D)))
    return out
