"""Embedding lookup, cumsum (tl.cumsum, one block and looped with a carry), argmax (looped,
torch's NaN and tie rules), seeded dropout, transpose and strided copies, int8 (de)quantization."""
import torch
import tritondiff  # noqa: F401
import triton
import triton.language as tl

from tritondiff import subject, tensor

FLOATS = ("float32", "float16", "bfloat16")


@triton.jit
def _embedding_kernel(ids_ptr, w_ptr, out_ptr, D, s_ids, s_wv, s_wd, BLOCK_D: tl.constexpr):
    i = tl.program_id(0)
    tok = tl.load(ids_ptr + i * s_ids)
    for d0 in range(0, D, BLOCK_D):
        c = d0 + tl.arange(0, BLOCK_D)
        v = tl.load(w_ptr + tok * s_wv + c * s_wd, mask=c < D)
        tl.store(out_ptr + i * D + c, v, mask=c < D)


@subject(reference=lambda ids, weight: torch.nn.functional.embedding(ids, weight),
         inputs={"ids": tensor(("N",), dtypes=("int64", "int32"), low=0, high="V"),
                 "weight": tensor(("V", "D"), dtypes=FLOATS)},
         dims={"N": (0, 2048), "V": (1, 50_000), "D": (1, 512)})
def embedding_lookup(ids, weight):
    N = ids.numel()
    D = weight.shape[1]
    out = torch.empty((N, D), dtype=weight.dtype, device=weight.device)
    if N:
        _embedding_kernel[(N,)](ids, weight, out, D, ids.stride(0), weight.stride(0), weight.stride(1),
                                BLOCK_D=min(256, triton.next_power_of_2(D)))
    return out


@triton.jit
def _cumsum_kernel(x_ptr, y_ptr, N, sm, sn, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    carry = 0.0
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * sm + cols * sn, mask=cols < N, other=0.0).to(tl.float32)
        c = tl.cumsum(x, axis=0) + carry
        tl.store(y_ptr + row * N + cols, c.to(y_ptr.dtype.element_ty), mask=cols < N)
        carry += tl.sum(x, axis=0)


def _cumsum(x, block):
    M, N = x.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if M and N:
        _cumsum_kernel[(M,)](x, y, N, x.stride(0), x.stride(1), BLOCK=block)
    return y


@subject(reference=lambda x: torch.cumsum(x, -1), inputs={"x": tensor(("M", "N"), dtypes=FLOATS)},
         dims={"M": (0, 256), "N": (0, 1024)})
def cumsum_rows(x):
    return _cumsum(x, triton.next_power_of_2(max(1, x.shape[1])))


@subject(reference=lambda x: torch.cumsum(x, -1), inputs={"x": tensor(("M", "N"), dtypes=FLOATS)},
         dims={"M": (0, 4), "N": (0, 1_100_000)})
def cumsum_looped(x):
    return _cumsum(x, 4096)


@triton.jit
def _argmax_kernel(x_ptr, out_ptr, N, sm, sn, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    best = -float("inf")
    best_i = 0
    found_nan = 0
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * sm + cols * sn, mask=cols < N, other=-float("inf")).to(tl.float32)
        is_nan = (x != x) & (cols < N)
        nan_i = tl.min(tl.where(is_nan, cols, N), axis=0)
        tile_max = tl.max(tl.where(is_nan, -float("inf"), x), axis=0)
        tile_i = tl.min(tl.where(x == tile_max, cols, N), axis=0)   # first index of the tile's max
        take_nan = (found_nan == 0) & (nan_i < N)
        take_max = (found_nan == 0) & (nan_i == N) & ((tile_max > best) | ((off == 0) & (tile_i < N)))
        best_i = tl.where(take_nan, nan_i, tl.where(take_max, tile_i, best_i))
        best = tl.where(take_max, tile_max, best)
        found_nan = tl.where(take_nan, 1, found_nan)
    tl.store(out_ptr + row, best_i.to(tl.int64))


@subject(reference=lambda x: torch.argmax(x, -1), inputs={"x": tensor(("M", "N"), dtypes=FLOATS)},
         dims={"M": (0, 8), "N": (1, 1_100_000)})
def argmax_looped(x):
    M, N = x.shape
    out = torch.empty(M, dtype=torch.int64, device=x.device)
    if M:
        _argmax_kernel[(M,)](x, out, N, x.stride(0), x.stride(1), BLOCK=4096)
    return out


P_DROP = 0.3


@triton.jit
def _keep_mask_kernel(mask_ptr, n, seed, p, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    keep = tl.rand(seed, offs) > p
    tl.store(mask_ptr + offs, keep.to(tl.int8), mask=offs < n)


def _keep_mask(n, seed, device):
    m = torch.empty(n, dtype=torch.int8, device=device)
    if n:
        _keep_mask_kernel[(triton.cdiv(n, 1024),)](m, n, seed, P_DROP, BLOCK=1024)
    return m.bool()


def _dropout_ref(x, seed):
    # the same Philox stream, drawn by a standalone mask kernel; the rest in torch
    keep = _keep_mask(x.numel(), int(seed), x.device).view(x.shape)
    return torch.where(keep, x / (1 - P_DROP), torch.zeros((), dtype=x.dtype))


@triton.jit
def _dropout_kernel(x_ptr, y_ptr, n, seed, p, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    keep = tl.rand(seed, offs) > p
    tl.store(y_ptr + offs, tl.where(keep, x / (1 - p), 0.0).to(y_ptr.dtype.element_ty), mask=mask)


@subject(reference=_dropout_ref,
         inputs={"x": tensor(("M", "N"), dtypes=FLOATS), "seed": tensor((), dtypes=("int32",), low=0, high=2**30)},
         dims={"M": (0, 256), "N": (0, 2048)})
def dropout_seeded(x, seed):
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    if n:
        _dropout_kernel[(triton.cdiv(n, 2048),)](x, y, n, int(seed), P_DROP, BLOCK=2048)
    return y


@triton.jit
def _transpose_kernel(x_ptr, y_ptr, M, N, sxm, sxn, sym, syn, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    m = (rm[:, None] < M) & (rn[None, :] < N)
    x = tl.load(x_ptr + rm[:, None] * sxm + rn[None, :] * sxn, mask=m)
    tl.store(y_ptr + rn[None, :] * sym + rm[:, None] * syn, x, mask=m)


@subject(reference=lambda x: x.t().contiguous(), inputs={"x": tensor(("M", "N"), dtypes=FLOATS + ("int32",))},
         dims={"M": (0, 1024), "N": (0, 1024)})
def transpose_copy(x):
    M, N = x.shape
    y = torch.empty((N, M), dtype=x.dtype, device=x.device)
    if M and N:
        _transpose_kernel[(triton.cdiv(M, 64), triton.cdiv(N, 64))](x, y, M, N, x.stride(0), x.stride(1),
                                                                    y.stride(0), y.stride(1), BM=64, BN=64)
    return y


@triton.jit
def _copy3d_kernel(x_ptr, y_ptr, B, M, N, sb, sm, sn, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    total = B * M * N
    b = offs // (M * N)
    r = offs % (M * N)
    i = r // N
    j = r % N
    v = tl.load(x_ptr + b * sb + i * sm + j * sn, mask=offs < total)
    tl.store(y_ptr + offs, v, mask=offs < total)


@subject(reference=lambda x: x.contiguous(), inputs={"x": tensor(("B", "M", "N"), dtypes=FLOATS)},
         dims={"B": (0, 8), "M": (0, 256), "N": (0, 512)})
def strided_copy_3d(x):
    B, M, N = x.shape
    y = torch.empty((B, M, N), dtype=x.dtype, device=x.device)
    if y.numel():
        _copy3d_kernel[(triton.cdiv(y.numel(), 4096),)](x, y, B, M, N, *x.stride(), BLOCK=4096)
    return y


@triton.jit
def _quant_kernel(x_ptr, q_ptr, s_ptr, N, sm, sn, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * sm + cols * sn, mask=cols < N, other=0.0).to(tl.float32)
    amax = tl.max(tl.abs(x), axis=0)
    scale = tl.where(amax == 0, 1.0, amax / 127.0)
    r = x / scale
    fl = tl.floor(r)
    diff = r - fl
    even = (fl - 2.0 * tl.floor(fl * 0.5)) == 0.0
    q = tl.where(diff > 0.5, fl + 1.0, tl.where(diff < 0.5, fl, tl.where(even, fl, fl + 1.0)))   # round half to even, as torch.round
    q = tl.minimum(tl.maximum(q, -127.0), 127.0)
    tl.store(q_ptr + row * N + cols, q.to(tl.int8), mask=cols < N)
    tl.store(s_ptr + row, scale)


def _quant_ref(x):
    xf = x.float()
    amax = xf.abs().amax(-1, keepdim=True)
    scale = torch.where(amax == 0, torch.ones_like(amax), amax / 127.0)
    q = torch.round(xf / scale).clamp(-127, 127).to(torch.int8)
    return q, scale.squeeze(-1)


@subject(reference=_quant_ref,
         inputs={"x": tensor(("M", "N"), dtypes=FLOATS, nonfinite=False)},
         dims={"M": (0, 256), "N": (1, 4096)})
def int8_quantize_rowwise(x):
    M, N = x.shape
    q = torch.empty((M, N), dtype=torch.int8, device=x.device)
    s = torch.empty(M, dtype=torch.float32, device=x.device)
    if M:
        _quant_kernel[(M,)](x, q, s, N, x.stride(0), x.stride(1), BLOCK=triton.next_power_of_2(N))
    return q, s


@triton.jit
def _dequant_kernel(q_ptr, s_ptr, y_ptr, N, sqm, sqn, ss, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    q = tl.load(q_ptr + row * sqm + cols * sqn, mask=cols < N, other=0).to(tl.float32)
    s = tl.load(s_ptr + row * ss)
    tl.store(y_ptr + row * N + cols, q * s, mask=cols < N)


@subject(reference=lambda q, scale: q.float() * scale.float()[:, None],
         inputs={"q": tensor(("M", "N"), dtypes=("int8",), low=-127, high=127),
                 "scale": tensor(("M",), dtypes=("float32",), low=1e-6, high=10.0, nonfinite=False)},
         dims={"M": (0, 256), "N": (0, 4096)})
def int8_dequantize_rowwise(q, scale):
    M, N = q.shape
    y = torch.empty((M, N), dtype=torch.float32, device=q.device)
    if M and N:
        _dequant_kernel[(M, triton.cdiv(N, 1024))](q, scale, y, N, q.stride(0), q.stride(1), scale.stride(0),
                                                   BLOCK=1024)
    return y
