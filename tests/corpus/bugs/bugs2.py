"""More buggy kernels (see bugs.py): backward strides, loop bounds, reduction axes, races,
uninitialised outputs, mutated inputs, transposed gradients and the E[x^2]-E[x]^2 variance."""
import torch
import torch.nn.functional as F
import tritondiff  # noqa: F401
import triton
import triton.language as tl

from tritondiff import subject, tensor

FLOATS = ("float32", "float16", "bfloat16")


# --------------------------------------------------------------------------- non-contiguous grad_output
@triton.jit
def _softmax_bwd(y_ptr, dy_ptr, dx_ptr, N, s_row, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < N
    y = tl.load(y_ptr + row * s_row + cols, mask=m, other=0.0).to(tl.float32)
    dy = tl.load(dy_ptr + row * s_row + cols, mask=m, other=0.0).to(tl.float32)   # BUG: y's strides for dy
    dx = y * (dy - tl.sum(y * dy, 0))
    tl.store(dx_ptr + row * s_row + cols, dx.to(dx_ptr.dtype.element_ty), mask=m)


def _softmax_grad_ref(x, dy):
    x = x.detach().clone().requires_grad_(True)
    torch.softmax(x, -1).backward(dy)
    return x.grad


@subject(reference=_softmax_grad_ref,
         inputs={"x": tensor(("M", "N"), dtypes=FLOATS), "dy": tensor(("M", "N"), dtype_like="x")},
         dims={"M": (1, 64), "N": (1, 1024)})
def bug_backward_grad_output_noncontiguous(x, dy):
    """autograd.Function backwards that make the saved activations contiguous but take grad_output
    as it comes (it is often an expanded or transposed view) and index it with the activation's strides."""
    y = torch.softmax(x.float(), -1).to(x.dtype).contiguous()
    dx = torch.empty_like(y)
    M, N = y.shape
    _softmax_bwd[(M,)](y, dy, dx, N, y.stride(0), BLOCK=triton.next_power_of_2(N))
    return dx


# --------------------------------------------------------------------------- off-by-one loop bound
@triton.jit
def _rowsum_offbyone(x_ptr, y_ptr, N, sm, sn, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), tl.float32)
    for off in range(0, N - 1, BLOCK):          # BUG: N - 1 skips the last tile when N % BLOCK == 1
        cols = off + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * sm + cols * sn, mask=cols < N, other=0.0).to(tl.float32)
    tl.store(y_ptr + row, tl.sum(acc, 0).to(y_ptr.dtype.element_ty))


@subject(reference=lambda x: x.sum(-1), inputs={"x": tensor(("M", "N"), dtypes=FLOATS)},
         dims={"M": (1, 64), "N": (1, 8192)})
def bug_off_by_one_loop_bound(x):
    """Loop bounds written as range(0, N - 1, BLOCK) or cdiv(N - 1, BLOCK): the last element is only
    dropped when it starts a tile of its own (N % BLOCK == 1) -- a boundary the fuzzer has to hit."""
    M, N = x.shape
    y = torch.empty(M, dtype=x.dtype, device=x.device)
    _rowsum_offbyone[(M,)](x, y, N, x.stride(0), x.stride(1), BLOCK=256)
    return y


# --------------------------------------------------------------------------- wrong reduction axis
@triton.jit
def _colmean_wrong_axis(x_ptr, y_ptr, M, N, sm, sn, B: tl.constexpr):
    cols = tl.program_id(0) * B + tl.arange(0, B)
    acc = tl.zeros((B,), tl.float32)
    for m0 in range(0, M, B):
        rows = m0 + tl.arange(0, B)
        msk = (rows[:, None] < M) & (cols[None, :] < N)
        x = tl.load(x_ptr + rows[:, None] * sm + cols[None, :] * sn, mask=msk, other=0.0).to(tl.float32)
        acc += tl.sum(x, axis=1)                # BUG: sums across columns; the column sum is axis=0
    tl.store(y_ptr + cols, (acc / M).to(y_ptr.dtype.element_ty), mask=cols < N)


@subject(reference=lambda x: x.mean(0), inputs={"x": tensor(("M", "N"), dtypes=FLOATS)},
         dims={"M": (1, 2048), "N": (1, 256)})
def bug_wrong_reduction_axis(x):
    """Square tiles hide an axis mix-up: the shapes line up, so nothing raises, and the kernel returns
    row-block sums where column means were wanted."""
    M, N = x.shape
    y = torch.empty(N, dtype=x.dtype, device=x.device)
    _colmean_wrong_axis[(triton.cdiv(N, 32),)](x, y, M, N, x.stride(0), x.stride(1), B=32)
    return y


# --------------------------------------------------------------------------- non-atomic read-modify-write
@triton.jit
def _hist_racy(ids_ptr, counts_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    ids = tl.load(ids_ptr + offs, mask=mask, other=0)
    c = tl.load(counts_ptr + ids, mask=mask)
    tl.store(counts_ptr + ids, c + 1, mask=mask)   # BUG: duplicates (in a block, or across programs) lose updates


@subject(reference=lambda ids, B: torch.bincount(ids, minlength=B.shape[0]),
         inputs={"ids": tensor(("N",), dtypes=("int64",), low=0, high="K"),
                 "B": tensor(("K",), dtypes=("int32",), low=0, high=0)},
         dims={"N": (1, 100_000), "K": (1, 1024)})
def bug_race_nonatomic_rmw(ids, B):
    """Histogram / scatter kernels that load, add and store instead of tl.atomic_add: colliding
    indices overwrite each other.  (B only carries the bin count.)"""
    counts = torch.zeros(B.shape[0], dtype=torch.int64, device=ids.device)
    _hist_racy[(triton.cdiv(ids.numel(), 1024),)](ids.contiguous(), counts, ids.numel(), BLOCK=1024)
    return counts


# --------------------------------------------------------------------------- uninitialised output
@triton.jit
def _relu_sparse_store(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(y_ptr + offs, x, mask=(offs < n) & (x > 0))   # BUG: zeros never written; y came from torch.empty


@subject(reference=lambda x: torch.relu(x), inputs={"x": tensor(("N",), dtypes=FLOATS)}, dims={"N": (1, 100_000)})
def bug_uninitialized_output(x):
    """'Works on my machine' reports: a kernel skips stores it thinks are zero, and the output from
    torch.empty happens to be zeroed memory until the caching allocator hands back a used block."""
    x = x.contiguous()
    y = torch.empty_like(x)
    _relu_sparse_store[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    return y


# --------------------------------------------------------------------------- input mutated in place
@triton.jit
def _softmax_scratch(x_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * N + cols, mask=cols < N, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, 0))
    tl.store(x_ptr + row * N + cols, (e / tl.sum(e, 0)).to(x_ptr.dtype.element_ty), mask=cols < N)   # BUG: in place


@subject(reference=lambda x: torch.softmax(x, -1), inputs={"x": tensor(("M", "N"), dtypes=FLOATS, layouts=("contiguous",))},
         dims={"M": (1, 64), "N": (1, 1024)})
def bug_input_mutated_in_place(x):
    """Kernels written in place to save memory (x is reused as the output) and shipped behind a
    functional API: the caller's tensor is overwritten."""
    M, N = x.shape
    _softmax_scratch[(M,)](x, N, BLOCK=triton.next_power_of_2(N))
    return x


# --------------------------------------------------------------------------- transposed gradient
@triton.jit
def _mm_nt(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), tl.float32)
    for k0 in range(0, K, BK):
        kk = k0 + tl.arange(0, BK)
        a = tl.load(a_ptr + rm[:, None] * sam + kk[None, :] * sak, mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * sbk + rn[None, :] * sbn, mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def _mm(a, b):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=torch.float32, device=a.device)
    _mm_nt[(triton.cdiv(M, 32), triton.cdiv(N, 32))](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0),
                                                       b.stride(1), BM=32, BN=32, BK=32)
    return c


def _linear_wgrad_ref(x, w, dy):
    w = w.detach().clone().requires_grad_(True)
    (x @ w).backward(dy)
    return w.grad


@subject(reference=_linear_wgrad_ref,
         inputs={"x": tensor(("T", "K"), dtypes=("float32",)), "w": tensor(("K", "N"), dtypes=("float32",)),
                 "dy": tensor(("T", "N"), dtypes=("float32",))},
         dims={"T": (1, 128), "K": (1, 128), "N": (1, 128)})
def bug_transposed_gradient(x, w, dy):
    """Hand-written linear backwards that compute dW as dy^T @ x (shape N x K) and then reshape it to
    w's K x N shape instead of transposing: the shapes agree, the values do not."""
    dw = _mm(dy.t(), x)                  # (N, K)
    return dw.reshape(w.shape)           # BUG: reshape where a transpose was needed


# --------------------------------------------------------------------------- E[x^2] - E[x]^2 variance
@triton.jit
def _ln_onepass(x_ptr, y_ptr, N, sm, sn, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * sm + cols * sn, mask=cols < N, other=0.0).to(tl.float32)
    mean = tl.sum(x, 0) / N
    var = tl.sum(x * x, 0) / N - mean * mean     # BUG: catastrophic cancellation when |mean| >> std
    var = tl.maximum(var, 0.0)
    y = (x - mean) / tl.sqrt(var + eps)
    tl.store(y_ptr + row * N + cols, y.to(y_ptr.dtype.element_ty), mask=cols < N)


@subject(reference=lambda x: F.layer_norm(x, (x.shape[-1],), eps=1e-5), inputs={"x": tensor(("M", "N"), dtypes=FLOATS)},
         dims={"M": (1, 64), "N": (1, 4096)})
def bug_variance_cancellation(x):
    """One-pass layer norms that take var = E[x^2] - E[x]^2 in fp32: inputs with a large common offset
    lose every significant digit of the variance (sometimes negative, clamped to 0)."""
    M, N = x.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    _ln_onepass[(M,)](x, y, N, x.stride(0), x.stride(1), 1e-5, BLOCK=triton.next_power_of_2(N))
    return y


# --------------------------------------------------------------------------- masked lanes default to 0 in a max
@triton.jit
def _softmax_other_zero(x_ptr, y_ptr, N, sm, sn, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * sm + cols * sn, mask=cols < N, other=0.0).to(tl.float32)   # BUG: other=0 not -inf
    e = tl.exp(x - tl.max(x, 0))
    tl.store(y_ptr + row * N + cols, (e / tl.sum(e, 0)).to(y_ptr.dtype.element_ty), mask=cols < N)


@subject(reference=lambda x: torch.softmax(x, -1), inputs={"x": tensor(("M", "N"), dtypes=FLOATS)},
         dims={"M": (1, 64), "N": (1, 1024)})
def bug_masked_lanes_zero_in_softmax(x):
    """Softmax kernels that pad the masked lanes with 0 instead of -inf: the padding enters the
    denominator as exp(0 - max), so every row whose width is not a power of two is off."""
    M, N = x.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    _softmax_other_zero[(M,)](x, y, N, x.stride(0), x.stride(1), BLOCK=triton.next_power_of_2(N))
    return y
