"""Layer norm as in Triton's tutorial: forward two-pass and Welford (Chan's combination of
per-block statistics), backward with dx per row and dw/db through per-program partial sums."""
import torch
import torch.nn.functional as F
import tritondiff  # noqa: F401
import triton
import triton.language as tl

from tritondiff import subject, tensor

FLOATS = ("float32", "float16", "bfloat16")
EPS = 1e-5
LN_INPUTS = {"x": tensor(("M", "N"), dtypes=FLOATS), "w": tensor(("N",), dtype_like="x"),
             "b": tensor(("N",), dtype_like="x")}
LN_DIMS = {"M": (0, 128), "N": (1, 4096)}


def _ln_ref(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b, EPS)


@triton.jit
def _ln_fwd_twopass(x_ptr, y_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, N, sx, sy, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_ptr += row * sx
    y_ptr += row * sy
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / N
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
        d = tl.where(cols < N, x - mean, 0.0)
        acc += d * d
    var = tl.sum(acc, axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        mask = cols < N
        w = tl.load(w_ptr + cols, mask=mask).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=mask).to(tl.float32)
        x = tl.load(x_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(y_ptr + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def _ln_forward(x, w, b):
    x = x.contiguous()
    w, b = w.contiguous(), b.contiguous()
    M, N = x.shape
    y = torch.empty_like(x)
    mean = torch.empty(M, dtype=torch.float32, device=x.device)
    rstd = torch.empty(M, dtype=torch.float32, device=x.device)
    if M:
        BLOCK = min(1024, triton.next_power_of_2(N))
        _ln_fwd_twopass[(M,)](x, y, w, b, mean, rstd, N, x.stride(0), y.stride(0), EPS, BLOCK=BLOCK)
    return y, mean, rstd


@subject(reference=_ln_ref, inputs=LN_INPUTS, dims=LN_DIMS)
def layernorm_fwd_twopass(x, w, b):
    return _ln_forward(x, w, b)[0]


@triton.jit
def _ln_fwd_welford(x_ptr, y_ptr, w_ptr, b_ptr, N, sx_row, sx_col, sy, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    # running (count, mean, M2), merged block by block with Chan et al.'s formula
    count = 0.0
    mean = 0.0
    m2 = 0.0
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(x_ptr + row * sx_row + cols * sx_col, mask=mask, other=0.0).to(tl.float32)
        n_b = tl.minimum(N - off, BLOCK).to(tl.float32)
        mean_b = tl.sum(x, axis=0) / n_b
        d = tl.where(mask, x - mean_b, 0.0)
        m2_b = tl.sum(d * d, axis=0)
        tot = count + n_b
        delta = mean_b - mean
        mean = mean + delta * (n_b / tot)
        m2 = m2 + m2_b + delta * delta * (count * n_b / tot)
        count = tot
    rstd = 1 / tl.sqrt(m2 / count + eps)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(x_ptr + row * sx_row + cols * sx_col, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=mask).to(tl.float32)
        tl.store(y_ptr + row * sy + cols, ((x - mean) * rstd * w + b).to(y_ptr.dtype.element_ty), mask=mask)


@subject(reference=_ln_ref, inputs=LN_INPUTS, dims=LN_DIMS)
def layernorm_fwd_welford(x, w, b):
    M, N = x.shape
    w, b = w.contiguous(), b.contiguous()
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if M:
        _ln_fwd_welford[(M,)](x, y, w, b, N, x.stride(0), x.stride(1), y.stride(0), EPS,
                              BLOCK=min(1024, triton.next_power_of_2(N)))
    return y


@triton.jit
def _ln_bwd_dx_partial(x_ptr, dy_ptr, dx_ptr, w_ptr, mean_ptr, rstd_ptr, dw_part_ptr, db_part_ptr,
                       M, N, G, BLOCK: tl.constexpr):
    # program g handles rows g, g + G, ... and owns row g of the (G, N) partial dw/db buffers
    g = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    dw_acc = tl.zeros((BLOCK,), dtype=tl.float32)
    db_acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for row in range(g, M, G):
        x = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + row * N + cols, mask=mask, other=0.0).to(tl.float32)
        mean = tl.load(mean_ptr + row)
        rstd = tl.load(rstd_ptr + row)
        xhat = tl.where(mask, (x - mean) * rstd, 0.0)
        wdy = w * dy
        c1 = tl.sum(xhat * wdy, axis=0) / N
        c2 = tl.sum(wdy, axis=0) / N
        dx = (wdy - (xhat * c1 + c2)) * rstd
        tl.store(dx_ptr + row * N + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        dw_acc += dy * xhat
        db_acc += dy
    tl.store(dw_part_ptr + g * N + cols, dw_acc, mask=mask)
    tl.store(db_part_ptr + g * N + cols, db_acc, mask=mask)


@triton.jit
def _ln_bwd_dwdb(dw_part_ptr, db_part_ptr, dw_ptr, db_ptr, G, N, BLOCK_G: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    cols = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    dw = tl.zeros((BLOCK_G, BLOCK_N), dtype=tl.float32)
    db = tl.zeros((BLOCK_G, BLOCK_N), dtype=tl.float32)
    for i in range(0, G, BLOCK_G):
        rows = i + tl.arange(0, BLOCK_G)
        m = (rows[:, None] < G) & (cols[None, :] < N)
        offs = rows[:, None] * N + cols[None, :]
        dw += tl.load(dw_part_ptr + offs, mask=m, other=0.0)
        db += tl.load(db_part_ptr + offs, mask=m, other=0.0)
    tl.store(dw_ptr + cols, tl.sum(dw, axis=0).to(dw_ptr.dtype.element_ty), mask=cols < N)
    tl.store(db_ptr + cols, tl.sum(db, axis=0).to(db_ptr.dtype.element_ty), mask=cols < N)


def _ln_grads_ref(x, w, b, dy):
    x, w, b = (t.detach().clone().requires_grad_(True) for t in (x, w, b))
    F.layer_norm(x, (x.shape[-1],), w, b, EPS).backward(dy)
    return x.grad, w.grad, b.grad


@subject(reference=_ln_grads_ref,
         inputs={**LN_INPUTS, "dy": tensor(("M", "N"), dtype_like="x")},
         dims={"M": (0, 128), "N": (1, 4096)})
def layernorm_bwd(x, w, b, dy):
    M, N = x.shape
    x = x.contiguous()
    dy = dy.contiguous()
    w = w.contiguous()
    _, mean, rstd = _ln_forward(x, w, b)
    dx = torch.empty_like(x)
    dw = torch.empty(N, dtype=w.dtype, device=w.device)
    db = torch.empty(N, dtype=w.dtype, device=w.device)
    G = max(1, min(M, 16))
    dw_part = torch.zeros((G, N), dtype=torch.float32, device=x.device)
    db_part = torch.zeros((G, N), dtype=torch.float32, device=x.device)
    _ln_bwd_dx_partial[(G,)](x, dy, dx, w, mean, rstd, dw_part, db_part, M, N, G,
                             BLOCK=triton.next_power_of_2(N))
    _ln_bwd_dwdb[(triton.cdiv(N, 128),)](dw_part, db_part, dw, db, G, N, BLOCK_G=16, BLOCK_N=128)
    return dx, dw, db
