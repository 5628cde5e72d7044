"""More buggy kernels (see bugs.py, bugs2.py, bugs3.py): rotary positions taken from the row index, log of a
softmax, a varlen segment read into the next one, a max padded with zeros, half-precision atomics for a gradient,
weight-gradient rows past M, a dequant scale applied twice and a sliding window one key too wide.  Every
subject here must FAIL."""
import torch
import torch.nn.functional as F
import tritondiff  # noqa: F401
import triton
import triton.language as tl
from hypothesis import strategies as st

from tritondiff import dim, subject, tensor

FLOATS = ("float32", "float16", "bfloat16")


# --------------------------------------------------------------------------- RoPE position from the row index
@triton.jit
def _rope_row_pos(x_ptr, cs_ptr, y_ptr, S, H, D, HALF, sxb, sxs, sxh, sxd, scp, scd,
                  BLOCK_H: tl.constexpr, BLOCK_P: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    b = pid // S
    s = pid % S
    pos = s                                      # BUG: the token's position is position_ids[b, s], not s
    i = tl.arange(0, BLOCK_P)
    pm = i < HALF
    cos = tl.load(cs_ptr + pos * scp + i * scd, mask=pm, other=0.0).to(tl.float32)
    sin = tl.load(cs_ptr + pos * scp + (i + HALF) * scd, mask=pm, other=0.0).to(tl.float32)
    h = tl.arange(0, BLOCK_H)
    m = (h[:, None] < H) & pm[None, :]
    base = x_ptr + b * sxb + s * sxs + h[:, None] * sxh
    x1 = tl.load(base + 2 * i[None, :] * sxd, mask=m, other=0.0).to(tl.float32)
    x2 = tl.load(base + (2 * i[None, :] + 1) * sxd, mask=m, other=0.0).to(tl.float32)
    out = y_ptr + pid * H * D + h[:, None] * D + 2 * i[None, :]
    tl.store(out, (x1 * cos[None, :] - x2 * sin[None, :]).to(y_ptr.dtype.element_ty), mask=m)
    tl.store(out + 1, (x2 * cos[None, :] + x1 * sin[None, :]).to(y_ptr.dtype.element_ty), mask=m)


def _rope_gptj_ref(x, position_ids, cos_sin_cache):
    half = x.shape[-1] // 2
    cs = cos_sin_cache[position_ids]
    cos, sin = cs[..., :half].unsqueeze(2), cs[..., half:].unsqueeze(2)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).flatten(-2)


@subject(reference=_rope_gptj_ref,
         inputs={"x": tensor(("B", "S", "H", "D"), dtypes=FLOATS),
                 "position_ids": tensor(("B", "S"), dtypes=("int64",), low=0, high="P"),
                 "cos_sin_cache": tensor(("P", "D"), dtype_like="x", low=-1.0, high=1.0)},
         dims={"B": (1, 4), "S": (1, 48), "H": (1, 8), "D": (2, 64), "P": (48, 512)},
         where=lambda D: D % 2 == 0)
def bug_rope_position_from_row_index(x, position_ids, cos_sin_cache):
    """GPT-J RoPE whose kernel derives each token's position from its flattened (batch, seq) row index
    (pid % seq_len) instead of reading position_ids: right for a batch of unpadded prompts starting at 0, wrong
    for left padding, packed sequences and decode steps after a KV cache (every position id not arange(S))."""
    B, S, H, D = x.shape
    y = torch.empty((B, S, H, D), dtype=x.dtype, device=x.device)
    _rope_row_pos[(B * S,)](x, cos_sin_cache, y, S, H, D, D // 2, *x.stride(), *cos_sin_cache.stride(),
                            BLOCK_H=triton.next_power_of_2(H), BLOCK_P=triton.next_power_of_2(D // 2))
    return y


# --------------------------------------------------------------------------- log-softmax as log(softmax)
@triton.jit
def _log_of_softmax(x_ptr, y_ptr, N, sxm, sxn, temperature, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * sxm + cols * sxn, mask=mask, other=-float("inf")).to(tl.float32) / temperature
    e = tl.exp(x - tl.max(x, axis=0))
    p = e / tl.sum(e, axis=0)
    tl.store(y_ptr + row * N + cols, tl.log(p).to(y_ptr.dtype.element_ty), mask=mask)   # BUG: log of an underflow


@subject(reference=lambda logits, temperature: torch.log_softmax(logits / temperature, dim=-1),
         inputs={"logits": tensor(("M", "V"), dtypes=FLOATS), "temperature": st.sampled_from((1.0, 0.7, 0.3, 0.05))},
         dims={"M": (1, 32), "V": (1, 4096)})
def bug_log_softmax_log_of_softmax(logits, temperature):
    """Sampler log-probabilities taken as tl.log of the softmax the kernel already had: fine at temperature
    1, but a sharp distribution (low temperature, confident logits) has probabilities below float32's
    exp range, whose log is -inf (a NaN-producing logprob downstream) where x - max - lse is finite."""
    M, V = logits.shape
    y = torch.empty((M, V), dtype=logits.dtype, device=logits.device)
    _log_of_softmax[(M,)](logits, y, V, logits.stride(0), logits.stride(1), float(temperature),
                          BLOCK=triton.next_power_of_2(V))
    return y


# --------------------------------------------------------------------------- varlen tile reads the next segment
@triton.jit
def _varlen_mean_overread(x_ptr, cu_ptr, out_ptr, T, D, sxt, sxd, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr):
    seg = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    cm = cols < D
    start = tl.load(cu_ptr + seg).to(tl.int64)
    end = tl.load(cu_ptr + seg + 1).to(tl.int64)
    acc = tl.zeros((BLOCK_D,), dtype=tl.float32)
    for t0 in range(start, end, BLOCK_T):
        t = t0 + tl.arange(0, BLOCK_T)
        m = (t[:, None] < T) & cm[None, :]       # BUG: bounded by the packed tensor's end, not the segment's
        x = tl.load(x_ptr + t[:, None] * sxt + cols[None, :] * sxd, mask=m, other=0.0).to(tl.float32)
        acc += tl.sum(x, axis=0)
    n = tl.maximum(end - start, 1).to(tl.float32)
    tl.store(out_ptr + seg * D + cols, (acc / n).to(out_ptr.dtype.element_ty), mask=cm)


def _cu_seqlens(cuts, total):
    edge = torch.tensor([0], dtype=torch.int64, device=cuts.device)
    last = torch.tensor([total], dtype=torch.int64, device=cuts.device)
    return torch.cat([edge, cuts.to(torch.int64).sort().values, last]).to(torch.int32)


def _varlen_mean_ref(x, cuts):
    cu = _cu_seqlens(cuts, x.shape[0]).tolist()
    rows = [x[s:e].mean(0) if e > s else torch.zeros_like(x[0]) for s, e in zip(cu[:-1], cu[1:])]
    return torch.stack(rows)


@subject(reference=_varlen_mean_ref,
         inputs={"x": tensor(("T", "D"), dtypes=FLOATS),
                 "cuts": tensor(("B",), dtypes=("int64", "int32"), low=0, high="T")},
         dims={"T": (1, 2048), "D": (1, 256), "B": (0, 16)})
def bug_varlen_reads_next_segment(x, cuts):
    """Varlen (cu_seqlens) mean pooling whose row tiles are masked against the total token count instead of
    the segment's end: the last tile of every segment but the last sums the first tokens of the next sequence
    (no out-of-bounds access, so no sanitizer sees it); right only when segment lengths are tile multiples."""
    T, D = x.shape
    cu = _cu_seqlens(cuts, T)
    nseg = cu.numel() - 1
    out = torch.empty((nseg, D), dtype=x.dtype, device=x.device)
    BLOCK_D = min(128, triton.next_power_of_2(D))
    _varlen_mean_overread[(nseg, triton.cdiv(D, BLOCK_D))](x, cu, out, T, D, x.stride(0), x.stride(1), BLOCK_T=32,
                                                           BLOCK_D=BLOCK_D)
    return out


# --------------------------------------------------------------------------- max over zero-padded lanes
@triton.jit
def _row_max_zero_pad(x_ptr, out_ptr, N, sxm, sxn, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * sxm + cols * sxn, mask=cols < N, other=0.0)   # BUG: the identity of max is -inf
    tl.store(out_ptr + row, tl.max(x, axis=0))


@subject(reference=lambda x: torch.amax(x, dim=-1), inputs={"x": tensor(("M", "N"), dtypes=FLOATS)},
         dims={"M": (1, 64), "N": (1, 1024)})
def bug_row_max_zero_padding(x):
    """Max pooling over the last dim (sentence-embedding max pool, a router's top-1 score) loading the padded
    lanes with other=0.0, copied from a sum kernel: a row whose values are all negative and whose length is
    not a power of two returns 0."""
    M, N = x.shape
    out = torch.empty(M, dtype=x.dtype, device=x.device)
    _row_max_zero_pad[(M,)](x, out, N, x.stride(0), x.stride(1), BLOCK=triton.next_power_of_2(N))
    return out


# --------------------------------------------------------------------------- half-precision atomics for a gradient
@triton.jit
def _bias_grad_atomic(dy_ptr, db_ptr, M, N, sm, sn, ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    r0 = tl.program_id(0) * ROWS
    for r in range(r0, tl.minimum(r0 + ROWS, M)):
        dy = tl.load(dy_ptr + r * sm + cols * sn, mask=cols < N, other=0.0)
        # BUG: each row's contribution is added straight into a gradient buffer of the parameter's half dtype,
        # so the running sum is rounded to it once per row
        tl.atomic_add(db_ptr + cols, dy, mask=cols < N)


# gradient-like values, long batches: the rounding of a running fp16 sum shows over the fp16 floors from about
# 500 rows (integer values sum exactly, an offset's rounding is systematic and small); the interpreter raises
# OverflowError where an fp16 atomic_add overflows (a GPU stores inf), so no overflowing families either
@subject(reference=lambda dy: dy.sum(0),
         inputs={"dy": tensor(("M", "N"), dtypes=("float32", "float16"), values=("normal", "uniform_pos"))},
         dims={"M": (512, 1000), "N": (16, 64)}, deterministic=False)
def bug_half_atomic_grad_accumulation(dy):
    """A bias gradient (the column sum of the upstream gradient) accumulated as a fused backward kernel written
    without the tutorial's partial-sum buffers does it: programs walk chunks of rows and atomic_add each row into
    a zeroed buffer of the parameter's half dtype, so the running sum is rounded to 11 bits (bf16: 8) once per
    row and a long batch loses the low digits that torch's float32-accumulated sum keeps.  On a GPU the bug is
    usually written with bf16; the interpreter has no bf16 atomics, so fp16 here (float32 draws are right)."""
    M, N = dy.shape
    db = torch.zeros(N, dtype=dy.dtype, device=dy.device)
    BLOCK_N = triton.next_power_of_2(N)
    _bias_grad_atomic[(triton.cdiv(M, 256), 1)](dy, db, M, N, dy.stride(0), dy.stride(1), ROWS=256, BLOCK_N=BLOCK_N)
    return db


# --------------------------------------------------------------------------- dw/db rows past M not masked
LN_EPS = 1e-5


@triton.jit
def _ln_dwdb_rows_unmasked(x_ptr, dy_ptr, mean_ptr, rstd_ptr, dw_ptr, db_ptr, M, N,
                           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    cm = cols < N
    dw = tl.zeros((BLOCK_N,), dtype=tl.float32)
    db = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for r0 in range(0, M, BLOCK_M):
        rows = r0 + tl.arange(0, BLOCK_M)
        # BUG: only the columns are masked; the last row block runs past M into whatever follows x and dy
        x = tl.load(x_ptr + rows[:, None] * N + cols[None, :], mask=cm[None, :], other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + rows[:, None] * N + cols[None, :], mask=cm[None, :], other=0.0).to(tl.float32)
        mean = tl.load(mean_ptr + rows)
        rstd = tl.load(rstd_ptr + rows)
        dw += tl.sum(dy * (x - mean[:, None]) * rstd[:, None], axis=0)
        db += tl.sum(dy, axis=0)
    tl.store(dw_ptr + cols, dw.to(dw_ptr.dtype.element_ty), mask=cm)
    tl.store(db_ptr + cols, db.to(db_ptr.dtype.element_ty), mask=cm)


def _ln_dwdb_ref(x, dy):
    x = x.detach().clone()
    w = torch.ones(x.shape[-1], dtype=x.dtype, device=x.device, requires_grad=True)
    b = torch.zeros(x.shape[-1], dtype=x.dtype, device=x.device, requires_grad=True)
    F.layer_norm(x, (x.shape[-1],), w, b, LN_EPS).backward(dy)
    return w.grad, b.grad


@subject(reference=_ln_dwdb_ref,
         inputs={"x": tensor(("M", "N"), dtypes=FLOATS), "dy": tensor(("M", "N"), dtype_like="x")},
         dims={"M": (1, 200), "N": (1, 256)})
def bug_ln_dwdb_rows_past_m_unmasked(x, dy):
    """The LayerNorm weight/bias gradient kernel of FlagGems-style backward passes (a program per column block
    walking all rows in BLOCK_M tiles, the saved float32 mean/rstd reused) with the row mask forgotten: tuned
    on M = batch * seq a multiple of BLOCK_M, any other M adds the rows past the end (garbage on a GPU, an
    out-of-bounds read the interpreter's address checks see)."""
    M, N = x.shape
    x, dy = x.contiguous(), dy.contiguous()
    xf = x.float()
    mean = xf.mean(-1)
    rstd = torch.rsqrt(xf.var(-1, unbiased=False) + LN_EPS)
    dw = torch.empty(N, dtype=x.dtype, device=x.device)
    db = torch.empty(N, dtype=x.dtype, device=x.device)
    _ln_dwdb_rows_unmasked[(triton.cdiv(N, 32),)](x, dy, mean, rstd, dw, db, M, N, BLOCK_M=16, BLOCK_N=32)
    return dw, db


# --------------------------------------------------------------------------- dequant scale applied twice
@triton.jit
def _w8_mm_scale_twice(a_ptr, w_ptr, s_ptr, c_ptr, M, N, K, sam, sak, swk, swn, ss, scm, scn,
                       BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    scale = tl.load(s_ptr + rn * ss, mask=rn < N, other=0.0).to(tl.float32)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        kk = k0 + tl.arange(0, BK)
        a = tl.load(a_ptr + rm[:, None] * sam + kk[None, :] * sak, mask=(rm[:, None] < M) & (kk[None, :] < K),
                    other=0.0)
        w = tl.load(w_ptr + kk[:, None] * swk + rn[None, :] * swn, mask=(kk[:, None] < K) & (rn[None, :] < N),
                    other=0)
        w = (w.to(tl.float32) * scale[None, :]).to(a.dtype)          # dequantised in the loop ...
        acc = tl.dot(a, w, acc, input_precision="ieee")
    acc = acc * scale[None, :]                   # BUG: ... and the epilogue scales the accumulator again
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@subject(reference=lambda a, w_int8, scale: a @ (w_int8.to(a.dtype) * scale),
         inputs={"a": tensor(("M", "K"), dtypes=FLOATS), "w_int8": tensor(("K", "N"), dtypes=("int8",)),
                 "scale": tensor(("N",), dtype_like="a", low=-0.05, high=0.05)},
         dims={"M": (1, 96), "N": (1, 96), "K": (1, 160)})
def bug_dequant_scale_applied_twice(a, w_int8, scale):
    """Int8 weight-only GEMM refactored from dequantise-then-dot to a scaled epilogue and left with both: the
    per-channel scale multiplies the weight tile in the K loop and the accumulator again, so every output is
    scaled by scale**2 (unnoticed where a test's scales are all 1)."""
    M, K = a.shape
    N = w_int8.shape[1]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    _w8_mm_scale_twice[(triton.cdiv(M, 32), triton.cdiv(N, 32))](a, w_int8, scale, c, M, N, K, a.stride(0),
                                                                 a.stride(1), w_int8.stride(0), w_int8.stride(1),
                                                                 scale.stride(0), c.stride(0), c.stride(1),
                                                                 BM=32, BN=32, BK=32)
    return c


# --------------------------------------------------------------------------- sliding window <= for <
@triton.jit
def _sliding_window_softmax(x_ptr, y_ptr, M, N, W, sxm, sxn, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    q = row + N - M                              # queries are the last M of the N positions
    k = tl.arange(0, BLOCK)
    # BUG: the window holds W keys, q - W < k <= q; "q - k <= W" keeps W + 1
    keep = (k < N) & (k <= q) & (q - k <= W)
    x = tl.load(x_ptr + row * sxm + k * sxn, mask=k < N, other=0.0).to(tl.float32)
    x = tl.where(keep, x, -float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * N + k, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=k < N)


def _sliding_window_ref(scores, window):
    M, N = scores.shape
    q = torch.arange(N - M, N, device=scores.device)[:, None]
    k = torch.arange(N, device=scores.device)[None, :]
    keep = (k <= q) & (k > q - window)
    return torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)


@subject(reference=_sliding_window_ref,
         inputs={"scores": tensor(("M", "N"), dtypes=FLOATS), "window": dim("W")},
         dims={"M": (1, 64), "N": (1, 512), "W": (1, 128)}, where=lambda M, N: M <= N)
def bug_sliding_window_one_too_wide(scores, window):
    """Sliding-window (Mistral-style local) causal attention probabilities with the window test written
    q - k <= W where the model means W keys (q - W < k <= q): every query far enough from the start attends
    to one key too many -- the off-by-one between window conventions behind several real mismatches
    between attention backends."""
    M, N = scores.shape
    y = torch.empty((M, N), dtype=scores.dtype, device=scores.device)
    _sliding_window_softmax[(M,)](scores, y, M, N, window, scores.stride(0), scores.stride(1),
                                  BLOCK=triton.next_power_of_2(N))
    return y
