"""Still more public kernel patterns: GPT-J (interleaved) rotary embedding gathered by position ids from a fused
cos/sin cache (HF, vLLM), a GeGLU over a packed gate/up projection (Liger, Unsloth), log-softmax of
temperature-scaled logits (vLLM's sampler), a looped online logsumexp (FlagGems), the Jensen-Shannon divergence
loss (Liger), a batched transpose through tl.trans, a batched matmul on a 3-D grid, the MoE combine as a weighted
index_add with atomics (vLLM, Unsloth), an int8 weight-only matmul (torchao, gemlite) and a varlen mean pool
over cu_seqlens segments (flash-attn's varlen layout)."""
import torch
import torch.nn.functional as F
import tritondiff  # noqa: F401
import triton
import triton.language as tl
from hypothesis import strategies as st

from tritondiff import dim, subject, tensor

FLOATS = ("float32", "float16", "bfloat16")
LOGIT_VALUES = ("normal", "uniform_pos", "large_offset", "large", "near_max", "tiny", "zeros", "integer", "masked")
TEMPERATURES = (1.0, 0.7, 0.3, 0.05)


# ---------------------------------------------------------------- GPT-J rotary embedding by position ids

@triton.jit
def _rope_gptj_kernel(x_ptr, pos_ptr, cs_ptr, y_ptr, S, H, D, HALF, sxb, sxs, sxh, sxd, spb, sps, scp, scd,
                      BLOCK_H: tl.constexpr, BLOCK_P: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    b = pid // S
    s = pid % S
    pos = tl.load(pos_ptr + b * spb + s * sps).to(tl.int64)
    # the cache row of that position: cos in its first half, sin in its second (vLLM's cos_sin_cache)
    i = tl.arange(0, BLOCK_P)
    pm = i < HALF
    cos = tl.load(cs_ptr + pos * scp + i * scd, mask=pm, other=0.0).to(tl.float32)
    sin = tl.load(cs_ptr + pos * scp + (i + HALF) * scd, mask=pm, other=0.0).to(tl.float32)
    d = tl.arange(0, 2 * BLOCK_P)
    for h0 in range(0, H, BLOCK_H):
        h = h0 + tl.arange(0, BLOCK_H)
        m = (h[:, None] < H) & (d[None, :] < D)
        x = tl.load(x_ptr + b * sxb + s * sxs + h[:, None] * sxh + d[None, :] * sxd, mask=m, other=0.0)
        # interleaved pairs (x[2i], x[2i+1]): split the last axis into its even and odd lanes
        x1, x2 = tl.split(tl.reshape(x.to(tl.float32), (BLOCK_H, BLOCK_P, 2)))
        y1 = x1 * cos[None, :] - x2 * sin[None, :]
        y2 = x2 * cos[None, :] + x1 * sin[None, :]
        y = tl.interleave(y1, y2)
        tl.store(y_ptr + pid * H * D + h[:, None] * D + d[None, :], y.to(y_ptr.dtype.element_ty), mask=m)


def _rope_gptj_ref(x, position_ids, cos_sin_cache):
    half = x.shape[-1] // 2
    cs = cos_sin_cache[position_ids]                       # (B, S, D)
    cos, sin = cs[..., :half].unsqueeze(2), cs[..., half:].unsqueeze(2)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).flatten(-2)


@subject(reference=_rope_gptj_ref,
         inputs={"x": tensor(("B", "S", "H", "D"), dtypes=FLOATS),
                 "position_ids": tensor(("B", "S"), dtypes=("int64", "int32"), low=0, high="P"),
                 "cos_sin_cache": tensor(("P", "D"), dtype_like="x", low=-1.0, high=1.0)},
         dims={"B": (0, 4), "S": (0, 48), "H": (1, 8), "D": (2, 128), "P": (1, 512)},
         where=lambda D: D % 2 == 0)
def rope_gptj_position_ids(x, position_ids, cos_sin_cache):
    """Rotary embedding in the GPT-J (interleaved pairs) form, the cos/sin of each token gathered by its position
    id from one fused (max_pos, head_dim) cache, as vLLM's rotary kernel with is_neox=False and HF's
    position_ids do it: a (batch, seq) grid, heads in blocks, pairs split with tl.reshape/tl.split and written
    back with tl.interleave."""
    B, S, H, D = x.shape
    y = torch.empty((B, S, H, D), dtype=x.dtype, device=x.device)
    if B * S:
        BLOCK_P = triton.next_power_of_2(D // 2)
        _rope_gptj_kernel[(B * S,)](x, position_ids, cos_sin_cache, y, S, H, D, D // 2, *x.stride(),
                                    *position_ids.stride(), *cos_sin_cache.stride(),
                                    BLOCK_H=min(triton.next_power_of_2(H), max(1, 2048 // (2 * BLOCK_P))),
                                    BLOCK_P=BLOCK_P)
    return y


# ---------------------------------------------------------------- GeGLU over a packed gate/up projection

@triton.jit
def _geglu_kernel(x_ptr, y_ptr, N, sxm, sxn, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < N
    # the fused up projection writes [gate | up] side by side: the gate is column c, its up value column N + c
    a = tl.load(x_ptr + row * sxm + cols * sxn, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(x_ptr + row * sxm + (cols + N) * sxn, mask=mask, other=0.0).to(tl.float32)
    u = 0.7978845608028654 * (a + 0.044715 * a * a * a)
    gelu = a * tl.sigmoid(2 * u)                          # 0.5 * a * (1 + tanh(u)), tanh(u) = 2 sigmoid(2u) - 1
    tl.store(y_ptr + row * N + cols, (gelu * b).to(y_ptr.dtype.element_ty), mask=mask)


def _geglu_ref(x):
    a, b = x.chunk(2, dim=-1)
    return F.gelu(a, approximate="tanh") * b


@subject(reference=_geglu_ref, inputs={"x": tensor(("M", "N2"), dtypes=FLOATS)},
         dims={"M": (0, 64), "N2": (0, 4096)}, where=lambda N2: N2 % 2 == 0)
def geglu_packed(x):
    """GeGLU (tanh GELU of the gate times the up projection) as Liger's and Unsloth's kernels compute it, here
    reading gate and up from the two halves of one packed (M, 2N) projection output through its strides;
    float32 math, one rounding to the output dtype."""
    M, N2 = x.shape
    N = N2 // 2
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if M and N:
        BLOCK = min(1024, triton.next_power_of_2(N))
        _geglu_kernel[(M, triton.cdiv(N, BLOCK))](x, y, N, x.stride(0), x.stride(1), BLOCK=BLOCK)
    return y


# ---------------------------------------------------------------- log-softmax of temperature-scaled logits

@triton.jit
def _log_softmax_kernel(x_ptr, y_ptr, N, sxm, sxn, temperature, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * sxm + cols * sxn, mask=mask, other=-float("inf")).to(tl.float32)
    x = x / temperature
    m = tl.max(x, axis=0)
    z = x - m
    lse = tl.log(tl.sum(tl.exp(z), axis=0))
    # x - max - log(sum): never log(softmax), which is -inf wherever exp(z) underflows
    tl.store(y_ptr + row * N + cols, (z - lse).to(y_ptr.dtype.element_ty), mask=mask)


@subject(reference=lambda logits, temperature: torch.log_softmax(logits / temperature, dim=-1),
         inputs={"logits": tensor(("M", "V"), dtypes=FLOATS, values=LOGIT_VALUES),
                 "temperature": st.sampled_from(TEMPERATURES)},
         dims={"M": (0, 32), "V": (1, 8192)})
def log_softmax_temperature(logits, temperature):
    """The log-probabilities of vLLM's sampler: logits divided by the request's temperature, then a row
    log-softmax in one block per row (the tutorial softmax's layout) as x - max - log(sum(exp))."""
    M, V = logits.shape
    y = torch.empty((M, V), dtype=logits.dtype, device=logits.device)
    if M:
        _log_softmax_kernel[(M,)](logits, y, V, logits.stride(0), logits.stride(1), float(temperature),
                                  BLOCK=triton.next_power_of_2(V))
    return y


# ---------------------------------------------------------------- logsumexp, looped and online

@triton.jit
def _logsumexp_kernel(x_ptr, out_ptr, N, sxm, sxn, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    m = -float("inf")
    s = 0.0
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * sxm + cols * sxn, mask=cols < N, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        # an infinite running max shifts by 0 (torch.logsumexp's rule): -inf - -inf and inf - inf are NaN
        shift = tl.where(tl.abs(m_new) == float("inf"), 0.0, m_new)
        s = s * tl.exp(m - shift) + tl.sum(tl.exp(x - shift), axis=0)
        m = m_new
    shift = tl.where(tl.abs(m) == float("inf"), 0.0, m)
    tl.store(out_ptr + row, (shift + tl.log(s)).to(out_ptr.dtype.element_ty))


@subject(reference=lambda x: torch.logsumexp(x, dim=-1),
         inputs={"x": tensor(("M", "N"), dtypes=FLOATS, values=LOGIT_VALUES)},
         dims={"M": (0, 16), "N": (0, 20_000)})
def logsumexp_online_looped(x):
    """Row logsumexp as FlagGems' and the attention kernels' statistics pass computes it: one program per row,
    blocks of the row folded into a running (max, rescaled sum) pair, log taken once at the end."""
    M, N = x.shape
    out = torch.empty(M, dtype=x.dtype, device=x.device)
    if M:
        _logsumexp_kernel[(M,)](x, out, N, x.stride(0), x.stride(1), BLOCK=1024)
    return out


# ---------------------------------------------------------------- Jensen-Shannon divergence loss

@triton.jit
def _jsd_kernel(x_ptr, y_ptr, loss_ptr, V, sxm, sxv, sym, syv, beta, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for off in range(0, V, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        mask = cols < V
        x = tl.load(x_ptr + row * sxm + cols * sxv, mask=mask, other=0.0).to(tl.float32)   # log Q (student)
        y = tl.load(y_ptr + row * sym + cols * syv, mask=mask, other=0.0).to(tl.float32)   # log P (teacher)
        q = tl.exp(x)
        p = tl.exp(y)
        log_m = tl.log(beta * p + (1 - beta) * q)
        term = beta * p * (y - log_m) + (1 - beta) * q * (x - log_m)
        acc += tl.where(mask, term, 0.0)
    tl.store(loss_ptr + row, tl.sum(acc, axis=0))


def _jsd_ref(student_logp, teacher_logp, beta):
    p, q = teacher_logp.exp(), student_logp.exp()
    log_m = torch.log(beta * p + (1 - beta) * q)
    loss = beta * p * (teacher_logp - log_m) + (1 - beta) * q * (student_logp - log_m)
    return loss.sum() / student_logp.shape[0]


@subject(reference=_jsd_ref,
         inputs={"student_logp": tensor(("M", "V"), dtypes=FLOATS, high=0.0),
                 "teacher_logp": tensor(("M", "V"), dtype_like="student_logp", high=0.0),
                 "beta": st.sampled_from((0.1, 0.5, 0.9))},
         dims={"M": (1, 32), "V": (1, 4096)})
def jsd_loss(student_logp, teacher_logp, beta):
    """Liger's generalised Jensen-Shannon divergence for distillation: log-probabilities in, the mixture
    M = beta P + (1 - beta) Q formed in float32, per-row losses reduced on the host (batchmean)."""
    M, V = student_logp.shape
    rows = torch.empty(M, dtype=torch.float32, device=student_logp.device)
    _jsd_kernel[(M,)](student_logp, teacher_logp, rows, V, student_logp.stride(0), student_logp.stride(1),
                      teacher_logp.stride(0), teacher_logp.stride(1), float(beta),
                      BLOCK=min(1024, triton.next_power_of_2(V)))
    return (rows.sum() / M).to(student_logp.dtype)


# ---------------------------------------------------------------- batched transpose through tl.trans

@triton.jit
def _trans_kernel(x_ptr, y_ptr, M, N, sxb, sxm, sxn, BM: tl.constexpr, BN: tl.constexpr):
    b = tl.program_id(2).to(tl.int64)
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    x = tl.load(x_ptr + b * sxb + rm[:, None] * sxm + rn[None, :] * sxn, mask=(rm[:, None] < M) & (rn[None, :] < N))
    # the tile turned in registers, so the store walks the output's rows contiguously
    t = tl.trans(x)
    tl.store(y_ptr + b * M * N + rn[:, None] * M + rm[None, :], t, mask=(rn[:, None] < N) & (rm[None, :] < M))


@subject(reference=lambda x: x.transpose(-1, -2).contiguous(),
         inputs={"x": tensor(("B", "M", "N"), dtypes=FLOATS + ("int32", "int8"))},
         dims={"B": (0, 4), "M": (0, 300), "N": (0, 300)})
def transpose_batched_trans(x):
    """A batched (B, M, N) -> (B, N, M) transpose as layout kernels write it: a (tile, tile, batch) grid, the
    tile read through the input's strides and turned with tl.trans before a coalesced store."""
    B, M, N = x.shape
    y = torch.empty((B, N, M), dtype=x.dtype, device=x.device)
    if B and M and N:
        _trans_kernel[(triton.cdiv(M, 32), triton.cdiv(N, 64), B)](x, y, M, N, *x.stride(), BM=32, BN=64)
    return y


# ---------------------------------------------------------------- batched matmul on a 3-D grid

@triton.jit
def _bmm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sab, sam, sak, sbb, sbk, sbn, scb, scm, scn,
                BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    bid = tl.program_id(2).to(tl.int64)
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    a_base = a_ptr + bid * sab
    b_base = b_ptr + bid * sbb
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        kk = k0 + tl.arange(0, BK)
        a = tl.load(a_base + rm[:, None] * sam + kk[None, :] * sak, mask=(rm[:, None] < M) & (kk[None, :] < K),
                    other=0.0)
        b = tl.load(b_base + kk[:, None] * sbk + rn[None, :] * sbn, mask=(kk[:, None] < K) & (rn[None, :] < N),
                    other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    tl.store(c_ptr + bid * scb + rm[:, None] * scm + rn[None, :] * scn, acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@subject(reference=lambda a, b: torch.bmm(a, b),
         inputs={"a": tensor(("B", "M", "K"), dtypes=FLOATS), "b": tensor(("B", "K", "N"), dtype_like="a")},
         dims={"B": (0, 6), "M": (1, 100), "N": (1, 100), "K": (0, 100)})
def bmm_3d_grid(a, b):
    """torch.bmm as the batched-GEMM kernels of attention and MoE code write it: program_id(2) the batch, every
    operand through its own batch/row/column strides, a float32 tl.dot accumulator."""
    B, M, K = a.shape
    N = b.shape[2]
    c = torch.empty((B, M, N), dtype=a.dtype, device=a.device)
    if B:
        _bmm_kernel[(triton.cdiv(M, 32), triton.cdiv(N, 32), B)](a, b, c, M, N, K, *a.stride(), *b.stride(),
                                                                 *c.stride(), BM=32, BN=32, BK=32)
    return c


# ---------------------------------------------------------------- MoE combine: weighted index_add by atomics

@triton.jit
def _moe_combine_kernel(src_ptr, idx_ptr, w_ptr, out_ptr, D, ss_row, ss_col, s_idx, s_w, BLOCK_D: tl.constexpr):
    i = tl.program_id(0).to(tl.int64)
    tok = tl.load(idx_ptr + i * s_idx).to(tl.int64)
    gate = tl.load(w_ptr + i * s_w).to(tl.float32)
    for d0 in range(0, D, BLOCK_D):
        c = d0 + tl.arange(0, BLOCK_D)
        v = tl.load(src_ptr + i * ss_row + c * ss_col, mask=c < D, other=0.0).to(tl.float32)
        # a token's top-k expert rows land on the same output row from different programs
        tl.atomic_add(out_ptr + tok * D + c, gate * v, mask=c < D)


def _moe_combine_ref(expert_out, token_idx, weights, num_tokens):
    out = torch.zeros((num_tokens, expert_out.shape[1]), dtype=expert_out.dtype, device=expert_out.device)
    return out.index_add_(0, token_idx, expert_out * weights[:, None])


@subject(reference=_moe_combine_ref,
         inputs={"expert_out": tensor(("R", "D"), dtypes=FLOATS),
                 "token_idx": tensor(("R",), dtypes=("int64", "int32"), low=0, high="T"),
                 "weights": tensor(("R",), dtype_like="expert_out"), "num_tokens": dim("T")},
         dims={"R": (0, 1024), "T": (1, 512), "D": (1, 256)}, deterministic=False)
def moe_combine_weighted(expert_out, token_idx, weights, num_tokens):
    """The MoE combine (un-permute and reduce) of vLLM's and Unsloth's fused MoE: each expert output row scaled
    by its routing weight and atomically added into its token's row of a zeroed float32 buffer, cast to the
    activations' dtype at the end."""
    R, D = expert_out.shape
    out = torch.zeros((num_tokens, D), dtype=torch.float32, device=expert_out.device)
    if R:
        _moe_combine_kernel[(R,)](expert_out, token_idx, weights, out, D, expert_out.stride(0), expert_out.stride(1),
                                  token_idx.stride(0), weights.stride(0), BLOCK_D=min(128, triton.next_power_of_2(D)))
    return out.to(expert_out.dtype)


# ---------------------------------------------------------------- int8 weight-only matmul

@triton.jit
def _w8_mm_kernel(a_ptr, w_ptr, s_ptr, c_ptr, M, N, K, sam, sak, swk, swn, ss, scm, scn,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        kk = k0 + tl.arange(0, BK)
        a = tl.load(a_ptr + rm[:, None] * sam + kk[None, :] * sak, mask=(rm[:, None] < M) & (kk[None, :] < K),
                    other=0.0)
        w = tl.load(w_ptr + kk[:, None] * swk + rn[None, :] * swn, mask=(kk[:, None] < K) & (rn[None, :] < N),
                    other=0)
        # int8 -> the activation dtype is exact (|q| <= 128); the per-channel scale waits for the epilogue
        acc = tl.dot(a, w.to(a.dtype), acc, input_precision="ieee")
    scale = tl.load(s_ptr + rn * ss, mask=rn < N, other=0.0).to(tl.float32)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, (acc * scale[None, :]).to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def _w8_mm_ref(a, w_int8, scale):
    return a @ (w_int8.to(a.dtype) * scale)


W8_INPUTS = {"a": tensor(("M", "K"), dtypes=FLOATS), "w_int8": tensor(("K", "N"), dtypes=("int8",)),
             "scale": tensor(("N",), dtype_like="a", low=-0.05, high=0.05)}


def _w8_launch(kernel, a, w_int8, scale):
    M, K = a.shape
    N = w_int8.shape[1]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    kernel[(triton.cdiv(M, 32), triton.cdiv(N, 32))](a, w_int8, scale, c, M, N, K, a.stride(0), a.stride(1),
                                                     w_int8.stride(0), w_int8.stride(1), scale.stride(0),
                                                     c.stride(0), c.stride(1), BM=32, BN=32, BK=32)
    return c


@subject(reference=_w8_mm_ref, inputs=W8_INPUTS, dims={"M": (1, 96), "N": (1, 96), "K": (1, 160)})
def int8_weight_only_matmul(a, w_int8, scale):
    """Weight-only int8 GEMM (torchao's int8 weight-only, gemlite's W8A16): the int8 weight tile converted to the
    activation dtype inside the K loop, a float32 tl.dot accumulator, the per-output-channel scale applied once
    to the accumulator in the epilogue."""
    return _w8_launch(_w8_mm_kernel, a, w_int8, scale)


# ---------------------------------------------------------------- varlen mean pool over cu_seqlens

@triton.jit
def _varlen_mean_kernel(x_ptr, cu_ptr, out_ptr, D, sxt, sxd, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr):
    seg = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    cm = cols < D
    start = tl.load(cu_ptr + seg).to(tl.int64)
    end = tl.load(cu_ptr + seg + 1).to(tl.int64)
    acc = tl.zeros((BLOCK_D,), dtype=tl.float32)
    for t0 in range(start, end, BLOCK_T):
        t = t0 + tl.arange(0, BLOCK_T)
        m = (t[:, None] < end) & cm[None, :]          # the segment's own tokens, not the next one's
        x = tl.load(x_ptr + t[:, None] * sxt + cols[None, :] * sxd, mask=m, other=0.0).to(tl.float32)
        acc += tl.sum(x, axis=0)
    n = tl.maximum(end - start, 1).to(tl.float32)      # an empty segment pools to 0
    tl.store(out_ptr + seg * D + cols, (acc / n).to(out_ptr.dtype.element_ty), mask=cm)


def _cu_seqlens(cuts, total):
    """cu_seqlens from drawn cut points: 0, the sorted cuts, the total token count (int32, as flash-attn's)."""
    edge = torch.tensor([0], dtype=torch.int64, device=cuts.device)
    last = torch.tensor([total], dtype=torch.int64, device=cuts.device)
    return torch.cat([edge, cuts.to(torch.int64).sort().values, last]).to(torch.int32)


def _varlen_mean_ref(x, cuts):
    cu = _cu_seqlens(cuts, x.shape[0]).tolist()
    rows = [x[s:e].mean(0) if e > s else torch.zeros_like(x[0]) for s, e in zip(cu[:-1], cu[1:])]
    return torch.stack(rows)


VARLEN_INPUTS = {"x": tensor(("T", "D"), dtypes=FLOATS), "cuts": tensor(("B",), dtypes=("int64", "int32"),
                                                                          low=0, high="T")}
VARLEN_DIMS = {"T": (1, 2048), "D": (1, 256), "B": (0, 16)}


def _varlen_launch(kernel, x, cuts):
    T, D = x.shape
    cu = _cu_seqlens(cuts, T)
    nseg = cu.numel() - 1
    out = torch.empty((nseg, D), dtype=x.dtype, device=x.device)
    BLOCK_D = min(128, triton.next_power_of_2(D))
    kernel[(nseg, triton.cdiv(D, BLOCK_D))](x, cu, out, D, x.stride(0), x.stride(1), BLOCK_T=32, BLOCK_D=BLOCK_D)
    return out


@subject(reference=_varlen_mean_ref, inputs=VARLEN_INPUTS, dims=VARLEN_DIMS)
def varlen_mean_pool(x, cuts):
    """Mean pooling of packed variable-length sequences (flash-attn's varlen layout: tokens of all sequences
    concatenated, segment b being rows cu_seqlens[b]:cu_seqlens[b+1]), one program per (segment, column
    block), the segment walked in row tiles masked at its own end."""
    return _varlen_launch(_varlen_mean_kernel, x, cuts)
