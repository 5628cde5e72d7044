"""More public kernel patterns: fused residual add + RMSNorm written back in place (vLLM, Liger), group norm,
the fused cross-entropy backward written over the logits (Liger), embedding backward with atomics, row top-k by
repeated max, bucketize by bisection, layer norm with a fused residual returning its statistics (flash-attn,
Apex), a reverse cumulative sum, SwiGLU backward and a cumulative product through a custom scan."""
import torch
import torch.nn.functional as F
import tritondiff  # noqa: F401
import triton
import triton.language as tl
from hypothesis import strategies as st

from tritondiff import dim, subject, tensor

FLOATS = ("float32", "float16", "bfloat16")
EPS = 1e-6


def _acc_dtype(t):
    """float32 for fp16 / bf16 / float32, float64 kept: the truth run's statistics stay in float64."""
    return torch.promote_types(t.dtype, torch.float32)


# ---------------------------------------------------------------- fused residual add + RMSNorm, in place

@triton.jit
def _add_rms_kernel(x_ptr, r_ptr, w_ptr, y_ptr, N, sx_row, sx_col, sr_row, sr_col, sy, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * sx_row + cols * sx_col, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(r_ptr + row * sr_row + cols * sr_col, mask=mask, other=0.0).to(tl.float32)
    # the residual stream keeps its own dtype: the sum is rounded to it, written back, and normalised as rounded
    s = (x + r).to(r_ptr.dtype.element_ty)
    tl.store(r_ptr + row * sr_row + cols * sr_col, s, mask=mask)
    s = s.to(tl.float32)
    rstd = 1 / tl.sqrt(tl.sum(s * s, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * sy + cols, (s * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def _add_rms_ref(x, residual, w):
    s = x + residual
    return F.rms_norm(s, (s.shape[-1],), w, EPS), s


@subject(reference=_add_rms_ref,
         inputs={"x": tensor(("M", "N"), dtypes=FLOATS), "residual": tensor(("M", "N"), dtype_like="x"),
                 "w": tensor(("N",), dtype_like="x")},
         dims={"M": (0, 64), "N": (1, 4096)}, mutates=("residual",))
def fused_add_rmsnorm_inplace(x, residual, w):
    """vLLM's / Liger's fused_add_rms_norm: ``residual += x`` in place (through its strides), then the RMSNorm of
    the new residual; returns the normalised rows and the updated residual."""
    M, N = x.shape
    w = w.contiguous()
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if M:
        _add_rms_kernel[(M,)](x, residual, w, y, N, x.stride(0), x.stride(1), residual.stride(0),
                              residual.stride(1), y.stride(0), EPS, BLOCK=triton.next_power_of_2(N))
    return y, residual


# ---------------------------------------------------------------- group norm

GN_EPS = 1e-5


@triton.jit
def _group_norm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, C, L, G, sxn, sxc, sxl, eps, BLOCK: tl.constexpr):
    # program (n, g) normalises the C // G channels of group g of sample n: C // G * L elements
    n = tl.program_id(0).to(tl.int64)
    g = tl.program_id(1)
    cpg = C // G
    size = cpg * L
    c0 = g * cpg
    x_base = x_ptr + n * sxn
    y_base = y_ptr + n * C * L
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for off in range(0, size, BLOCK):
        i = off + tl.arange(0, BLOCK)
        m = i < size
        c = c0 + i // L
        x = tl.load(x_base + c * sxc + (i % L) * sxl, mask=m, other=0.0).to(tl.float32)
        acc += x
    mean = tl.sum(acc, axis=0) / size
    # second pass over the centred values: no E[x^2] - E[x]^2 cancellation at a large offset
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for off in range(0, size, BLOCK):
        i = off + tl.arange(0, BLOCK)
        m = i < size
        c = c0 + i // L
        x = tl.load(x_base + c * sxc + (i % L) * sxl, mask=m, other=0.0).to(tl.float32)
        d = tl.where(m, x - mean, 0.0)
        acc += d * d
    rstd = 1 / tl.sqrt(tl.sum(acc, axis=0) / size + eps)
    for off in range(0, size, BLOCK):
        i = off + tl.arange(0, BLOCK)
        m = i < size
        c = c0 + i // L
        l = i % L
        x = tl.load(x_base + c * sxc + l * sxl, mask=m, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + c, mask=m, other=0.0).to(tl.float32)        # per-channel affine
        b = tl.load(b_ptr + c, mask=m, other=0.0).to(tl.float32)
        tl.store(y_base + c * L + l, ((x - mean) * rstd * w + b).to(y_ptr.dtype.element_ty), mask=m)


@subject(reference=lambda x, w, b, groups: F.group_norm(x, groups, w, b, GN_EPS),
         inputs={"x": tensor(("N", "C", "L"), dtypes=FLOATS), "w": tensor(("C",), dtype_like="x"),
                 "b": tensor(("C",), dtype_like="x"), "groups": dim("G")},
         dims={"N": (0, 8), "C": (1, 64), "L": (1, 1024), "G": (1, 16)}, where=lambda C, G: C % G == 0)
def group_norm_fwd(x, w, b, groups):
    """Group norm forward as Liger's and Apex's Triton kernels write it: one program per (sample, group), a
    two-pass mean and variance over the group's channels, then the per-channel weight and bias."""
    N, C, L = x.shape
    w, b = w.contiguous(), b.contiguous()
    y = torch.empty((N, C, L), dtype=x.dtype, device=x.device)
    if N and L:
        _group_norm_kernel[(N, groups)](x, w, b, y, C, L, groups, x.stride(0), x.stride(1), x.stride(2), GN_EPS,
                                        BLOCK=min(1024, triton.next_power_of_2(C // groups * L)))
    return y


# ---------------------------------------------------------------- cross-entropy backward over the logits

IGNORE = -1
LOGIT_VALUES = ("normal", "uniform_pos", "large_offset", "large", "near_max", "tiny", "zeros", "integer", "masked")


@triton.jit
def _ce_bwd_kernel(logits_ptr, labels_ptr, dy_ptr, V, s_row, s_col, s_label, ignore_index, n_valid,
                   BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    label = tl.load(labels_ptr + row * s_label)
    base = logits_ptr + row * s_row
    # pass 1: the row's max and sum of exponentials, online over the vocabulary
    m = -float("inf")
    s = 0.0
    for off in range(0, V, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(base + cols * s_col, mask=cols < V, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        shift = tl.where(m_new == -float("inf"), 0.0, m_new)
        s = s * tl.exp(m - shift) + tl.sum(tl.exp(x - shift), axis=0)
        m = m_new
    # d(mean loss)/d logits = (softmax - onehot) * dy / n_valid; an ignored row has coefficient 0, and stays
    # NaN where its softmax is (0 * NaN), as autograd's log_softmax backward leaves it
    coef = tl.where(label == ignore_index, 0.0, tl.load(dy_ptr).to(tl.float32) / n_valid)
    # pass 2: the gradient written over the logits it was computed from, element by element
    for off in range(0, V, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        mask = cols < V
        x = tl.load(base + cols * s_col, mask=mask, other=-float("inf")).to(tl.float32)
        p = tl.exp(x - m) / s
        # the one-hot term only at the label: 0 * coef elsewhere would turn an infinite dy into NaN
        grad = p * coef - tl.where(cols == label, coef, 0.0)
        tl.store(base + cols * s_col, grad.to(logits_ptr.dtype.element_ty), mask=mask)


def _ce_grad_ref(logits, labels, dy):
    logits = logits.detach().clone().requires_grad_(True)
    F.cross_entropy(logits, labels, ignore_index=IGNORE).backward(dy)
    return logits.grad


@subject(reference=_ce_grad_ref,
         inputs={"logits": tensor(("M", "V"), dtypes=FLOATS, values=LOGIT_VALUES),
                 "labels": tensor(("M",), dtypes=("int64",), low=-1, high="V"),
                 "dy": tensor((), dtype_like="logits")},
         dims={"M": (1, 64), "V": (2, 4096)}, mutates=("logits",))
def cross_entropy_bwd_inplace(logits, labels, dy):
    """Liger's fused cross entropy: the gradient of the mean loss (ignore_index, a scalar upstream gradient
    read on the device) written over the logits in place, through their strides, instead of a new buffer."""
    M, V = logits.shape
    n_valid = int((labels != IGNORE).sum())      # a host sync, as fused cross-entropy wrappers do
    _ce_bwd_kernel[(M,)](logits, labels, dy, V, logits.stride(0), logits.stride(1), labels.stride(0), IGNORE,
                         float(max(n_valid, 1)), BLOCK=min(1024, triton.next_power_of_2(V)))
    return logits


# ---------------------------------------------------------------- embedding backward with atomics

@triton.jit
def _emb_bwd_kernel(ids_ptr, dy_ptr, grad_ptr, D, s_ids, s_dy_row, s_dy_col, BLOCK_D: tl.constexpr):
    i = tl.program_id(0).to(tl.int64)
    tok = tl.load(ids_ptr + i * s_ids).to(tl.int64)
    for d0 in range(0, D, BLOCK_D):
        c = d0 + tl.arange(0, BLOCK_D)
        g = tl.load(dy_ptr + i * s_dy_row + c * s_dy_col, mask=c < D, other=0.0).to(tl.float32)
        # repeated token ids hit the same row of the table: the adds must be atomic
        tl.atomic_add(grad_ptr + tok * D + c, g, mask=c < D)


def _emb_grad_ref(ids, dy, num_embeddings):
    w = torch.zeros((num_embeddings, dy.shape[1]), dtype=dy.dtype, device=dy.device, requires_grad=True)
    F.embedding(ids, w).backward(dy)
    return w.grad


@subject(reference=_emb_grad_ref,
         inputs={"ids": tensor(("N",), dtypes=("int64", "int32"), low=0, high="V"),
                 "dy": tensor(("N", "D"), dtypes=FLOATS), "num_embeddings": dim("V")},
         dims={"N": (0, 2048), "V": (1, 4096), "D": (1, 256)}, deterministic=False)
def embedding_bwd_atomic(ids, dy, num_embeddings):
    """Embedding backward as Unsloth-style kernels do it: each token's upstream gradient atomically added into a
    zeroed float32 table row, cast to the gradient's dtype at the end."""
    N, D = dy.shape
    grad = torch.zeros((num_embeddings, D), dtype=torch.float32, device=dy.device)
    if N:
        _emb_bwd_kernel[(N,)](ids, dy, grad, D, ids.stride(0), dy.stride(0), dy.stride(1),
                              BLOCK_D=min(128, triton.next_power_of_2(D)))
    return grad.to(dy.dtype)


# ---------------------------------------------------------------- row top-k by repeated max

TOPK = 5


@triton.jit
def _topk_kernel(x_ptr, y_ptr, N, sm, sn, K: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    valid = cols < N
    x = tl.load(x_ptr + row * sm + cols * sn, mask=valid, other=0.0).to(tl.float32)
    is_nan = x != x
    alive = valid
    for k in tl.static_range(K):
        # torch.topk ranks NaN above everything: while one is left, it is the next value
        nan_left = alive & is_nan
        has_nan = tl.max(nan_left.to(tl.int32), axis=0) > 0
        best = tl.max(tl.where(alive & ~is_nan, x, -float("inf")), axis=0)
        pick = tl.where(has_nan, nan_left, alive & ~is_nan & (x == best))
        # retire one lane only (the first), so a tied value is taken once per copy
        first = tl.min(tl.where(pick, cols, BLOCK), axis=0)
        alive = alive & (cols != first)
        val = tl.where(has_nan, float("nan"), best)
        tl.store(y_ptr + row * K + k, val.to(y_ptr.dtype.element_ty))


@subject(reference=lambda x: torch.topk(x, TOPK, dim=-1).values,
         inputs={"x": tensor(("M", "N"), dtypes=FLOATS)},
         dims={"M": (0, 64), "N": (TOPK, 2048)})
def topk_values_rows(x):
    """Row top-k values (k a constexpr), sorted descending, by k rounds of max-and-retire as MoE routing kernels
    pick their experts; NaN ranks first, as in torch.topk."""
    M, N = x.shape
    y = torch.empty((M, TOPK), dtype=x.dtype, device=x.device)
    if M:
        _topk_kernel[(M,)](x, y, N, x.stride(0), x.stride(1), K=TOPK, BLOCK=triton.next_power_of_2(N))
    return y


# ---------------------------------------------------------------- bucketize by bisection

@triton.jit
def _bucketize_kernel(x_ptr, bd_ptr, out_ptr, N, B, n_iter, sxm, sxn, sb, RIGHT: tl.constexpr,
                      BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < N
    v = tl.load(x_ptr + row * sxm + cols * sxn, mask=mask, other=0)
    # per-lane [start, end) bisection, step for step ATen's lower/upper bound (mid = start + (end - start) / 2)
    start = tl.zeros((BLOCK,), dtype=tl.int64)
    end = tl.full((BLOCK,), B, dtype=tl.int64)
    for _ in range(n_iter):
        active = start < end
        mid = start + ((end - start) >> 1)
        b = tl.load(bd_ptr + mid * sb, mask=active & mask, other=0)
        if RIGHT:
            go_right = ~(b > v)        # negated comparisons, as ATen writes them: a NaN sends the search right
        else:
            go_right = ~(b >= v)
        start = tl.where(active & go_right, mid + 1, start)
        end = tl.where(active & ~go_right, mid, end)
    tl.store(out_ptr + row * N + cols, start, mask=mask)


@subject(reference=lambda x, boundaries, right: torch.bucketize(x, boundaries, right=right),
         inputs={"x": tensor(("M", "N"), dtypes=FLOATS + ("int32", "int64")),
                 "boundaries": tensor(("B",), dtype_like="x"), "right": st.booleans()},
         dims={"M": (0, 32), "N": (0, 2048), "B": (0, 1024)})
def bucketize_bisect(x, boundaries, right):
    """torch.bucketize as FlagGems' searchsorted kernel does it: a vectorised binary search per element over the
    boundaries, a fixed number of halving steps, int64 bucket ids."""
    M, N = x.shape
    B = boundaries.shape[0]
    out = torch.empty((M, N), dtype=torch.int64, device=x.device)
    if M and N:
        BLOCK = min(1024, triton.next_power_of_2(N))
        _bucketize_kernel[(M, triton.cdiv(N, BLOCK))](x, boundaries, out, N, B, B.bit_length(), x.stride(0),
                                                      x.stride(1), boundaries.stride(0), RIGHT=bool(right),
                                                      BLOCK=BLOCK)
    return out


# ---------------------------------------------------------------- layer norm with a fused residual

LN_EPS = 1e-5


@triton.jit
def _ln_residual_kernel(x_ptr, r_ptr, w_ptr, b_ptr, y_ptr, rout_ptr, mean_ptr, rstd_ptr, N, sx_row, sx_col,
                        sr_row, sr_col, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * sx_row + cols * sx_col, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(r_ptr + row * sr_row + cols * sr_col, mask=mask, other=0.0).to(tl.float32)
    # the residual output is stored in the input dtype and the statistics taken of it as stored
    h = (x + r).to(rout_ptr.dtype.element_ty)
    tl.store(rout_ptr + row * N + cols, h, mask=mask)
    h = h.to(tl.float32)
    mean = tl.sum(h, axis=0) / N
    d = tl.where(mask, h - mean, 0.0)
    rstd = 1 / tl.sqrt(tl.sum(d * d, axis=0) / N + eps)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * N + cols, (d * rstd * w + b).to(y_ptr.dtype.element_ty), mask=mask)


def _ln_residual_ref(x, residual, w, b):
    h = x + residual
    hf = h.to(_acc_dtype(h))
    mean = hf.mean(-1)
    rstd = torch.rsqrt(hf.var(-1, unbiased=False) + LN_EPS)
    return F.layer_norm(h, (h.shape[-1],), w, b, LN_EPS), h, mean, rstd


@subject(reference=_ln_residual_ref,
         inputs={"x": tensor(("M", "N"), dtypes=FLOATS), "residual": tensor(("M", "N"), dtype_like="x"),
                 "w": tensor(("N",), dtype_like="x"), "b": tensor(("N",), dtype_like="x")},
         dims={"M": (0, 64), "N": (1, 4096)})
def layernorm_residual_fwd(x, residual, w, b):
    """The fused add + LayerNorm forward of flash-attn's and Apex's norms: ``h = x + residual`` stored as the new
    residual stream (in the input dtype, as eager's sum is), LayerNorm of ``h`` as stored; returns
    (y, h, mean, rstd), the statistics in float32 for the backward."""
    M, N = x.shape
    w, b = w.contiguous(), b.contiguous()
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    h = torch.empty((M, N), dtype=residual.dtype, device=x.device)
    mean = torch.empty(M, dtype=torch.float32, device=x.device)
    rstd = torch.empty(M, dtype=torch.float32, device=x.device)
    if M:
        _ln_residual_kernel[(M,)](x, residual, w, b, y, h, mean, rstd, N, x.stride(0), x.stride(1),
                                  residual.stride(0), residual.stride(1), LN_EPS, BLOCK=triton.next_power_of_2(N))
    return y, h, mean, rstd


# ---------------------------------------------------------------- reverse cumulative sum

@triton.jit
def _rev_cumsum_kernel(x_ptr, y_ptr, N, sm, sn, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    carry = 0.0
    # blocks from the end of the row to its start; carry is the sum of everything right of the block
    for off in range(0, N, BLOCK):
        cols = N - off - BLOCK + tl.arange(0, BLOCK)          # the block's lanes in their natural order
        mask = cols >= 0
        x = tl.load(x_ptr + row * sm + cols * sn, mask=mask, other=0.0).to(tl.float32)
        # flip, prefix-sum, flip back: each lane gets the sum of itself and the lanes to its right; the padded
        # lanes (before the row's start) sit left of every real one and add nothing to them
        c = tl.flip(tl.cumsum(tl.flip(x, 0), axis=0), 0) + carry
        tl.store(y_ptr + row * N + cols, c.to(y_ptr.dtype.element_ty), mask=mask)
        carry += tl.sum(x, axis=0)


@subject(reference=lambda x: torch.flip(torch.cumsum(torch.flip(x, (-1,)), -1), (-1,)),
         inputs={"x": tensor(("M", "N"), dtypes=FLOATS)},
         dims={"M": (0, 64), "N": (0, 4096)})
def reverse_cumsum_rows(x):
    """A suffix sum along rows (discounted returns, reverse scans in linear-attention kernels): blocks walked
    from the row's end with a carry, each block flipped inside the kernel around tl.cumsum."""
    M, N = x.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if M and N:
        # tl.flip splits the block in halves: at least two lanes
        _rev_cumsum_kernel[(M,)](x, y, N, x.stride(0), x.stride(1),
                                 BLOCK=min(512, max(16, triton.next_power_of_2(N))))
    return y


# ---------------------------------------------------------------- SwiGLU backward

@triton.jit
def _swiglu_bwd_kernel(a_ptr, b_ptr, dy_ptr, da_ptr, db_ptr, N, sa_row, sa_col, sb_row, sb_col, sd_row, sd_col,
                       BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < N
    a = tl.load(a_ptr + row * sa_row + cols * sa_col, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + row * sb_row + cols * sb_col, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(dy_ptr + row * sd_row + cols * sd_col, mask=mask, other=0.0).to(tl.float32)
    sig = 1 / (1 + tl.exp(-a))
    silu = a * sig
    # y = silu(a) * b:  dy/da = b * sig * (1 + a * (1 - sig)),  dy/db = silu(a)
    da = dy * b * (sig * (1 + a * (1 - sig)))
    db = dy * silu
    tl.store(da_ptr + row * N + cols, da.to(da_ptr.dtype.element_ty), mask=mask)
    tl.store(db_ptr + row * N + cols, db.to(db_ptr.dtype.element_ty), mask=mask)


def _swiglu_grads_ref(a, b, dy):
    a, b = (t.detach().clone().requires_grad_(True) for t in (a, b))
    (F.silu(a) * b).backward(dy)
    return a.grad, b.grad


@subject(reference=_swiglu_grads_ref,
         inputs={"a": tensor(("M", "N"), dtypes=FLOATS), "b": tensor(("M", "N"), dtype_like="a"),
                 "dy": tensor(("M", "N"), dtype_like="a")},
         dims={"M": (0, 64), "N": (0, 4096)})
def swiglu_bwd(a, b, dy):
    """Liger's / Unsloth's SwiGLU backward: the sigmoid recomputed in float32 from the saved gate, the gradients
    of the gate and the up projection from the upstream gradient, on a (row, column block) grid."""
    M, N = a.shape
    da = torch.empty((M, N), dtype=a.dtype, device=a.device)
    db = torch.empty((M, N), dtype=a.dtype, device=a.device)
    if M and N:
        BLOCK = min(1024, triton.next_power_of_2(N))
        _swiglu_bwd_kernel[(M, triton.cdiv(N, BLOCK))](a, b, dy, da, db, N, a.stride(0), a.stride(1), b.stride(0),
                                                       b.stride(1), dy.stride(0), dy.stride(1), BLOCK=BLOCK)
    return da, db


# ---------------------------------------------------------------- cumulative product through a custom scan

@triton.jit
def _mul_combine(a, b):
    return a * b


@triton.jit
def _cumprod_kernel(x_ptr, y_ptr, N, sm, sn, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    # float64 products, as torch's CPU cumprod accumulates: a float32 running product overflows to inf on a run
    # of large factors where the true product is finite, and the next zero then makes inf * 0 = NaN, not 0
    carry = tl.full((), 1.0, tl.float64)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        mask = cols < N
        # padded lanes hold 1, the identity of the product
        x = tl.load(x_ptr + row * sm + cols * sn, mask=mask, other=1.0).to(tl.float64)
        p = tl.associative_scan(x, 0, _mul_combine)
        tl.store(y_ptr + row * N + cols, (carry * p).to(y_ptr.dtype.element_ty), mask=mask)
        carry = carry * tl.reduce(x, 0, _mul_combine)


@subject(reference=lambda x: torch.cumprod(x, -1), inputs={"x": tensor(("M", "N"), dtypes=FLOATS)},
         dims={"M": (0, 64), "N": (0, 2048)})
def cumprod_scan(x):
    """A row cumulative product through tl.associative_scan with a user-defined combine function (as scan
    kernels in FlagGems and Inductor write theirs), blocks chained by a carried product."""
    M, N = x.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if M and N:
        _cumprod_kernel[(M,)](x, y, N, x.stride(0), x.stride(1), BLOCK=min(256, triton.next_power_of_2(N)))
    return y
