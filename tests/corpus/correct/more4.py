"""A fourth batch of public kernel patterns: the KL divergence distillation loss (Liger), a cross entropy with
Gemma's logit softcap and a z-loss (Liger, PaLM), Gemma's RMSNorm with its (1 + w) weight over a 2-D row tile
(HF Gemma, Unsloth, Liger), the causal depthwise conv1d of Mamba (causal-conv1d) on a 3-D grid, fla's chunk-local
cumsum, a padded 2-D max pool (FlagGems), per-token-group int8 quantisation (SGLang, vLLM), the GQA key/value
head expansion (HF repeat_kv) under triton.autotune, a top-k logits mask by radix select (the samplers of vLLM and
SGLang, PyTorch's own topk) and a gradient-norm sum of squares through float32 atomics (apex's
multi_tensor_l2norm, clip_grad_norm_)."""
import torch
import torch.nn.functional as F
import tritondiff  # noqa: F401
import triton
import triton.language as tl
from hypothesis import strategies as st
from triton.language.extra import libdevice

from tritondiff import dim, subject, tensor

FLOATS = ("float32", "float16", "bfloat16")
LOGIT_VALUES = ("normal", "uniform_pos", "large_offset", "large", "near_max", "tiny", "zeros", "integer", "masked")


# ---------------------------------------------------------------- KL divergence loss (batchmean)

@triton.jit
def _kldiv_kernel(x_ptr, y_ptr, loss_ptr, V, sxm, sxv, sym, syv, LOG_TARGET: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for off in range(0, V, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        mask = cols < V
        x = tl.load(x_ptr + row * sxm + cols * sxv, mask=mask, other=0.0).to(tl.float32)   # log Q
        y = tl.load(y_ptr + row * sym + cols * syv, mask=mask, other=0.0).to(tl.float32)   # P or log P
        if LOG_TARGET:
            term = tl.exp(y) * (y - x)
        else:
            # xlogy(p, p) - p * log q: a zero target contributes 0, not 0 * log 0
            term = tl.where(y > 0, y * tl.log(y), 0.0) - y * x
        acc += tl.where(mask, term, 0.0)
    tl.store(loss_ptr + row, tl.sum(acc, axis=0))


@subject(reference=lambda input, target, log_target: F.kl_div(input, target, reduction="batchmean",
                                                              log_target=log_target),
         inputs={"input": tensor(("M", "V"), dtypes=FLOATS, high=0.0),
                 "target": tensor(("M", "V"), dtype_like="input", low=0.0, high=1.0),
                 "log_target": st.booleans()},
         dims={"M": (1, 32), "V": (1, 4096)})
def kl_div_batchmean(input, target, log_target):
    """Liger's KL divergence for distillation, F.kl_div(reduction='batchmean'): the student's log-probabilities
    against a target given as probabilities or (log_target, a constexpr branch) as log-probabilities, one
    program per row looping over the vocabulary in float32, the per-row sums reduced on the host."""
    M, V = input.shape
    rows = torch.empty(M, dtype=torch.float32, device=input.device)
    _kldiv_kernel[(M,)](input, target, rows, V, input.stride(0), input.stride(1), target.stride(0), target.stride(1),
                        LOG_TARGET=bool(log_target), BLOCK=min(1024, triton.next_power_of_2(V)))
    return (rows.sum() / M).to(input.dtype)


# ---------------------------------------------------------------- cross entropy with logit softcap and z-loss

IGNORE = -1


@triton.jit
def _ce_softcap_zloss_kernel(x_ptr, t_ptr, loss_ptr, V, sxm, sxv, st_, ignore_index, softcap, z_scale,
                             HAS_SOFTCAP: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    label = tl.load(t_ptr + row * st_)
    base = x_ptr + row * sxm
    m = -float("inf")
    d = 0.0
    for off in range(0, V, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(base + cols * sxv, mask=cols < V, other=-float("inf")).to(tl.float32)
        if HAS_SOFTCAP:
            x = softcap * libdevice.tanh(x / softcap)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        shift = tl.where(m_new == -float("inf"), 0.0, m_new)
        d = d * tl.exp(m - shift) + tl.sum(tl.exp(x - shift), axis=0)
        m = m_new
    lse = m + tl.log(d)
    ignored = label == ignore_index
    x_t = tl.load(base + tl.where(ignored, 0, label) * sxv).to(tl.float32)
    if HAS_SOFTCAP:
        x_t = softcap * libdevice.tanh(x_t / softcap)
    # PaLM's z-loss keeps log Z near 0: z_scale * lse^2 added to the negative log-likelihood
    loss = lse - x_t + z_scale * lse * lse
    tl.store(loss_ptr + row, tl.where(ignored, 0.0, loss))


def _ce_softcap_zloss_ref(logits, labels, softcap, z_scale):
    z = softcap * torch.tanh(logits / softcap) if softcap else logits
    nll = F.cross_entropy(z, labels, ignore_index=IGNORE, reduction="none")
    lse = torch.logsumexp(z, dim=-1)
    return nll + torch.where(labels != IGNORE, z_scale * lse.square(), torch.zeros_like(lse))


@subject(reference=_ce_softcap_zloss_ref,
         inputs={"logits": tensor(("M", "V"), dtypes=FLOATS, values=LOGIT_VALUES),
                 "labels": tensor(("M",), dtypes=("int64",), low=IGNORE, high="V"),
                 "softcap": st.sampled_from((0.0, 30.0, 15.0)), "z_scale": st.sampled_from((0.0, 1e-4, 1e-2))},
         dims={"M": (1, 16), "V": (1, 16384)})
def cross_entropy_softcap_zloss(logits, labels, softcap, z_scale):
    """Liger's cross entropy with its Gemma-2 options: the logits soft-capped as softcap * tanh(x / softcap)
    (a constexpr branch; libdevice's tanh) before an online log-sum-exp over vocabulary blocks, plus the z-loss
    (lse_square_scale) of PaLM; ignore_index rows lose 0; reduction='none', float32 per-row losses."""
    M, V = logits.shape
    loss = torch.empty(M, dtype=torch.float32, device=logits.device)
    _ce_softcap_zloss_kernel[(M,)](logits, labels, loss, V, logits.stride(0), logits.stride(1), labels.stride(0),
                                   IGNORE, float(softcap or 1.0), float(z_scale), HAS_SOFTCAP=bool(softcap),
                                   BLOCK=min(4096, triton.next_power_of_2(V)))
    return loss.to(logits.dtype)


# ---------------------------------------------------------------- Gemma RMSNorm, (1 + w), a 2-D row tile

GEMMA_EPS = 1e-6


@triton.jit
def _gemma_rmsnorm_kernel(x_ptr, w_ptr, y_ptr, M, N, sxm, sxn, sw, eps,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    rm = rows < M
    cm = cols < N
    m = rm[:, None] & cm[None, :]
    x = tl.load(x_ptr + rows[:, None] * sxm + cols[None, :] * sxn, mask=m, other=0.0).to(tl.float32)
    ms = tl.sum(x * x, axis=1) / N
    rstd = 1.0 / tl.sqrt(ms + eps)
    w = tl.load(w_ptr + cols * sw, mask=cm, other=0.0).to(tl.float32)
    # Gemma stores the weight as an offset from 1: the scale is (1 + w), added in float32
    y = x * rstd[:, None] * (1.0 + w[None, :])
    tl.store(y_ptr + rows[:, None] * N + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=m)


def _gemma_rmsnorm_ref(x, weight):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + GEMMA_EPS) * (1.0 + weight)


@subject(reference=_gemma_rmsnorm_ref,
         inputs={"x": tensor(("M", "N"), dtypes=FLOATS), "weight": tensor(("N",), dtype_like="x")},
         dims={"M": (0, 64), "N": (1, 4096)})
def rmsnorm_gemma_offset(x, weight):
    """Gemma's RMSNorm as HF, Unsloth and Liger (casting_mode='gemma') compute it: everything in float32,
    x * rsqrt(mean(x^2) + eps) * (1 + w), one rounding at the end; several short rows per program in a 2-D
    (rows, cols) tile, the row statistics reduced along axis 1."""
    M, N = x.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if M:
        BLOCK_N = triton.next_power_of_2(N)
        BLOCK_M = max(1, min(16, 4096 // BLOCK_N))
        _gemma_rmsnorm_kernel[(triton.cdiv(M, BLOCK_M),)](x, weight, y, M, N, x.stride(0), x.stride(1),
                                                          weight.stride(0), GEMMA_EPS, BLOCK_M=BLOCK_M,
                                                          BLOCK_N=BLOCK_N)
    return y


# ---------------------------------------------------------------- causal depthwise conv1d (Mamba)

@triton.jit
def _causal_conv1d_kernel(x_ptr, w_ptr, b_ptr, y_ptr, D, L, sxb, sxd, sxl, swd, swk, sb,
                          KW: tl.constexpr, SILU: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_L: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    d = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    t = tl.program_id(2) * BLOCK_L + tl.arange(0, BLOCK_L)
    dm = d < D
    acc = tl.zeros((BLOCK_D, BLOCK_L), dtype=tl.float32)
    acc += tl.load(b_ptr + d * sb, mask=dm, other=0.0).to(tl.float32)[:, None]
    for k in tl.static_range(KW):
        # output t sees inputs t - (KW - 1) .. t: left zero padding, never the future
        src = t - (KW - 1) + k
        w = tl.load(w_ptr + d * swd + k * swk, mask=dm, other=0.0).to(tl.float32)
        m = dm[:, None] & (src[None, :] >= 0) & (src[None, :] < L)
        xv = tl.load(x_ptr + b * sxb + d[:, None] * sxd + src[None, :] * sxl, mask=m, other=0.0).to(tl.float32)
        acc += w[:, None] * xv
    if SILU:
        acc = acc * tl.sigmoid(acc)
    om = dm[:, None] & (t[None, :] < L)
    tl.store(y_ptr + b * D * L + d[:, None] * L + t[None, :], acc.to(y_ptr.dtype.element_ty), mask=om)


def _causal_conv1d_ref(x, weight, bias, silu):
    width = weight.shape[1]
    y = F.conv1d(x, weight.unsqueeze(1), bias, padding=width - 1, groups=x.shape[1])[..., :x.shape[2]]
    return F.silu(y) if silu else y


CONV_INPUTS = {"x": tensor(("B", "D", "L"), dtypes=FLOATS), "weight": tensor(("D", "W"), dtype_like="x"),
               "bias": tensor(("D",), dtype_like="x"), "silu": st.booleans()}


@subject(reference=_causal_conv1d_ref, inputs=CONV_INPUTS, dims={"B": (1, 2), "D": (1, 32), "L": (1, 200),
                                                                 "W": (2, 4)})
def causal_conv1d_fwd(x, weight, bias, silu):
    """Mamba's short causal depthwise convolution (Dao's causal-conv1d, the Triton ports in vLLM and fla): a
    (batch, channel block, time block) 3-D grid, the width-W taps unrolled with tl.static_range, each tap's
    input masked to [0, L) so the left edge reads zeros, the optional SiLU a constexpr branch."""
    B, D, L = x.shape
    y = torch.empty((B, D, L), dtype=x.dtype, device=x.device)
    BLOCK_D, BLOCK_L = 16, 64
    _causal_conv1d_kernel[(B, triton.cdiv(D, BLOCK_D), triton.cdiv(L, BLOCK_L))](
        x, weight, bias, y, D, L, *x.stride(), *weight.stride(), bias.stride(0), KW=weight.shape[1],
        SILU=bool(silu), BLOCK_D=BLOCK_D, BLOCK_L=BLOCK_L)
    return y


# ---------------------------------------------------------------- chunk-local cumsum (fla)

@triton.jit
def _chunk_cumsum_kernel(g_ptr, o_ptr, T, H, sgb, sgt, sgh, CHUNK: tl.constexpr):
    i_t = tl.program_id(0)
    i_bh = tl.program_id(1)
    b = (i_bh // H).to(tl.int64)
    h = i_bh % H
    t = i_t * CHUNK + tl.arange(0, CHUNK)
    m = t < T
    g = tl.load(g_ptr + b * sgb + t * sgt + h * sgh, mask=m, other=0.0).to(tl.float32)
    # the prefix sum restarts at every chunk boundary: the decay within a chunk of chunked linear attention
    o = tl.cumsum(g, axis=0)
    tl.store(o_ptr + b * T * H + t * H + h, o.to(o_ptr.dtype.element_ty), mask=m)


def _chunk_cumsum_ref(g, chunk_size):
    return torch.cat([c.cumsum(dim=1) for c in g.split(chunk_size, dim=1)], dim=1)


@subject(reference=_chunk_cumsum_ref,
         inputs={"g": tensor(("B", "T", "H"), dtypes=FLOATS), "chunk_size": st.sampled_from((16, 32, 64))},
         dims={"B": (1, 2), "T": (1, 200), "H": (1, 4)})
def chunk_local_cumsum(g, chunk_size):
    """fla's chunk_local_cumsum (the scalar form that turns per-token log decays g of (B, T, H) into their
    running sums inside each chunk of chunked GLA / GDN): a (chunk, batch*head) grid, one tl.cumsum over the
    chunk's tokens read through the (B, T, H) strides, masked at T; float32 sums, one rounding."""
    B, T, H = g.shape
    o = torch.empty((B, T, H), dtype=g.dtype, device=g.device)
    _chunk_cumsum_kernel[(triton.cdiv(T, chunk_size), B * H)](g, o, T, H, *g.stride(), CHUNK=chunk_size)
    return o


# ---------------------------------------------------------------- 2-D max pool with padding

@triton.jit
def _max_pool2d_kernel(x_ptr, y_ptr, C, H, W, OH, OW, sxn, sxc, sxh, sxw,
                       K: tl.constexpr, S: tl.constexpr, P: tl.constexpr, BLOCK: tl.constexpr):
    nc = tl.program_id(0).to(tl.int64)
    n = nc // C
    c = nc % C
    o = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    om = o < OH * OW
    oh = o // OW
    ow = o % OW
    base = x_ptr + n * sxn + c * sxc
    acc = tl.full((BLOCK,), -float("inf"), dtype=tl.float32)
    for kh in tl.static_range(K):
        for kw in tl.static_range(K):
            ih = oh * S - P + kh
            iw = ow * S - P + kw
            # implicit -inf padding: a tap outside the image never wins
            m = om & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            v = tl.load(base + ih * sxh + iw * sxw, mask=m, other=-float("inf")).to(tl.float32)
            acc = tl.maximum(acc, v)
    tl.store(y_ptr + nc * OH * OW + o, acc.to(y_ptr.dtype.element_ty), mask=om)


POOL_DIMS = {"N": (1, 2), "C": (1, 4), "H": (1, 32), "W": (1, 32), "K": (2, 3), "S": (1, 2), "P": (0, 1)}


def _pool_ok(H, W, K, P):
    return 2 * P <= K and H + 2 * P >= K and W + 2 * P >= K


def _pool_launch(kernel, x, kernel_size, stride, padding):
    N, C, H, W = x.shape
    OH = (H + 2 * padding - kernel_size) // stride + 1
    OW = (W + 2 * padding - kernel_size) // stride + 1
    y = torch.empty((N, C, OH, OW), dtype=x.dtype, device=x.device)
    BLOCK = min(256, triton.next_power_of_2(OH * OW))
    kernel[(N * C, triton.cdiv(OH * OW, BLOCK))](x, y, C, H, W, OH, OW, *x.stride(), K=kernel_size, S=stride,
                                                 P=padding, BLOCK=BLOCK)
    return y


@subject(reference=lambda x, kernel_size, stride, padding: F.max_pool2d(x, kernel_size, stride, padding),
         inputs={"x": tensor(("N", "C", "H", "W"), dtypes=FLOATS), "kernel_size": dim("K"), "stride": dim("S"),
                 "padding": dim("P")},
         dims=POOL_DIMS, where=_pool_ok)
def max_pool2d_padded(x, kernel_size, stride, padding):
    """F.max_pool2d (floor mode) as FlagGems' pooling kernel writes it: a program per (image, channel) and
    block of flattened output positions, the K x K taps unrolled, the zero-free padding expressed as masked
    loads with other=-inf so a padded tap never wins the max."""
    return _pool_launch(_max_pool2d_kernel, x, kernel_size, stride, padding)


# ---------------------------------------------------------------- per-token-group int8 quantisation

@triton.jit
def _group_quant_kernel(x_ptr, q_ptr, s_ptr, N, G, NG, sxm, sxn, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    grp = tl.program_id(1)
    i = tl.arange(0, BLOCK)
    m = i < G
    cols = grp * G + i
    x = tl.load(x_ptr + row * sxm + cols * sxn, mask=m, other=0.0).to(tl.float32)
    amax = tl.maximum(tl.max(tl.abs(x), axis=0), eps)
    scale = amax / 127.0
    r = x / scale
    # round half to even (torch.round): floor, then compare the exact fractional part with one half
    fl = tl.floor(r)
    frac = r - fl
    odd = (fl - 2.0 * tl.floor(0.5 * fl)) != 0.0
    q = tl.where((frac > 0.5) | ((frac == 0.5) & odd), fl + 1.0, fl)
    q = tl.minimum(tl.maximum(q, -128.0), 127.0)
    tl.store(q_ptr + row * N + cols, q.to(tl.int8), mask=m)
    tl.store(s_ptr + row * NG + grp, scale)


GROUP_EPS = 1e-10


def _group_quant_ref(x, group_size):
    g = x.unflatten(-1, (-1, group_size))
    scale = g.abs().amax(-1, keepdim=True).clamp_min(GROUP_EPS) / 127
    q = torch.round(g / scale).clamp(-128, 127).to(torch.int8)
    return q.flatten(-2), scale.squeeze(-1).to(torch.float32)


@subject(reference=_group_quant_ref,
         inputs={"x": tensor(("M", "N"), dtypes=FLOATS, nonfinite=False), "group_size": dim("G")},
         dims={"M": (1, 8), "N": (8, 512), "G": (8, 128)}, where=lambda N, G: N % G == 0)
def per_token_group_quant_int8(x, group_size):
    """SGLang's and vLLM's per_token_group_quant (int8): each token's hidden vector cut into groups of
    group_size columns (any size: the block is the next power of two, masked), each group scaled by its own
    absmax / 127 (floored at eps), rounded half to even, float32 scales of shape (M, N / group_size)."""
    M, N = x.shape
    NG = N // group_size
    q = torch.empty((M, N), dtype=torch.int8, device=x.device)
    s = torch.empty((M, NG), dtype=torch.float32, device=x.device)
    _group_quant_kernel[(M, NG)](x, q, s, N, group_size, NG, x.stride(0), x.stride(1), GROUP_EPS,
                                 BLOCK=triton.next_power_of_2(group_size))
    return q, s


# ---------------------------------------------------------------- GQA key/value head expansion (autotuned)

@triton.autotune(configs=[triton.Config({"BLOCK_S": 16}, num_warps=2), triton.Config({"BLOCK_S": 32}, num_warps=4),
                          triton.Config({"BLOCK_S": 64}, num_warps=4)],
                 key=["S", "D"])
@triton.jit
def _repeat_kv_kernel(kv_ptr, out_ptr, KVH, S, D, N_REP, skb, skh, sks, skd,
                      BLOCK_S: tl.constexpr, BLOCK_D: tl.constexpr):
    pid = tl.program_id(0)
    b = (pid // (KVH * N_REP)).to(tl.int64)
    h = pid % (KVH * N_REP)
    kvh = h // N_REP                      # query head h shares the kv head of its group
    s = tl.program_id(1) * BLOCK_S + tl.arange(0, BLOCK_S)
    d = tl.arange(0, BLOCK_D)
    m = (s[:, None] < S) & (d[None, :] < D)
    v = tl.load(kv_ptr + b * skb + kvh * skh + s[:, None] * sks + d[None, :] * skd, mask=m)
    tl.store(out_ptr + pid.to(tl.int64) * S * D + s[:, None] * D + d[None, :], v, mask=m)


def _repeat_kv_launch(kernel, kv, n_rep):
    B, KVH, S, D = kv.shape
    out = torch.empty((B, KVH * n_rep, S, D), dtype=kv.dtype, device=kv.device)
    if out.numel():
        grid = lambda meta: (B * KVH * n_rep, triton.cdiv(S, meta["BLOCK_S"]))  # noqa: E731
        kernel[grid](kv, out, KVH, S, D, n_rep, *kv.stride(), BLOCK_D=triton.next_power_of_2(D))
    return out


@subject(reference=lambda kv, n_rep: torch.repeat_interleave(kv, n_rep, dim=1),
         inputs={"kv": tensor(("B", "KVH", "S", "D"), dtypes=FLOATS + ("int32",)), "n_rep": dim("R")},
         dims={"B": (0, 3), "KVH": (1, 4), "R": (1, 4), "S": (0, 64), "D": (1, 128)})
def repeat_kv_gqa(kv, n_rep):
    """HF's repeat_kv for grouped-query attention, (B, KVH, S, D) -> (B, KVH * n_rep, S, D), as a copy kernel:
    query head h reads kv head h // n_rep (consecutive query heads share one), the sequence tiled by an
    autotuned BLOCK_S (key S, D; the grid a lambda of the chosen config), strides of any layout."""
    return _repeat_kv_launch(_repeat_kv_kernel, kv, n_rep)


# ---------------------------------------------------------------- top-k logits mask by radix select

@triton.jit
def _float_key(x):
    # float32 -> int32 with the same order: flip the magnitude bits of negatives; -0.0 is made +0.0 first
    bits = (x + 0.0).to(tl.int32, bitcast=True)
    return tl.where(bits < 0, bits ^ 0x7FFFFFFF, bits)


@triton.jit
def _kth_largest_key(key, valid, k):
    # the largest t with #{key >= t} >= k, by bisection over the whole int32 range (32 steps, exact)
    lo = tl.full((), -2147483648, tl.int64)
    hi = tl.full((), 2147483647, tl.int64)
    for _ in range(32):
        mid = lo + (hi - lo + 1) // 2
        cnt = tl.sum((valid & (key.to(tl.int64) >= mid)).to(tl.int32), axis=0)
        ok = cnt >= k
        lo = tl.where(ok, mid, lo)
        hi = tl.where(ok, hi, mid - 1)
    return lo


@triton.jit
def _topk_mask_kernel(x_ptr, y_ptr, V, k, sxm, sxv, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    valid = cols < V
    x = tl.load(x_ptr + row * sxm + cols * sxv, mask=valid, other=-float("inf"))
    key = _float_key(x.to(tl.float32))
    kth = _kth_largest_key(key, valid, k)
    keep = key.to(tl.int64) >= kth               # ties with the k-th value are all kept, as torch's mask does
    y = tl.where(keep, x, -float("inf"))
    tl.store(y_ptr + row * V + cols, y, mask=valid)


def _topk_mask_ref(logits, k):
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, float("-inf"))


@subject(reference=_topk_mask_ref,
         inputs={"logits": tensor(("M", "V"), dtypes=FLOATS, values=LOGIT_VALUES), "k": dim("K")},
         dims={"M": (1, 8), "V": (1, 1024), "K": (1, 32)}, where=lambda V, K: K <= V)
def topk_mask_radix_select(logits, k):
    """The top-k filter of vLLM's and SGLang's samplers (logits below the k-th largest set to -inf) with the
    threshold found as PyTorch's own topk finds it, by radix select: floats mapped to order-preserving int32
    keys, the k-th largest key bisected bit by bit with counts over the row; every tie of the k-th kept."""
    M, V = logits.shape
    y = torch.empty((M, V), dtype=logits.dtype, device=logits.device)
    _topk_mask_kernel[(M,)](logits, y, V, k, logits.stride(0), logits.stride(1), BLOCK=triton.next_power_of_2(V))
    return y


# ---------------------------------------------------------------- gradient norm: sum of squares by atomics

@triton.jit
def _sumsq_kernel(g_ptr, acc_ptr, numel, ncols, s0, s1, BLOCK: tl.constexpr, ITERS: tl.constexpr):
    start = tl.program_id(0).to(tl.int64) * BLOCK * ITERS
    part = tl.zeros((BLOCK,), dtype=tl.float32)
    for it in range(ITERS):
        i = start + it * BLOCK + tl.arange(0, BLOCK)
        g = tl.load(g_ptr + (i // ncols) * s0 + (i % ncols) * s1, mask=i < numel, other=0.0).to(tl.float32)
        part += g * g
    # one float32 atomic per chunk into the zeroed total, as apex's multi_tensor_l2norm partial sums
    tl.atomic_add(acc_ptr, tl.sum(part, axis=0))


def _total_norm_ref(g1, g2):
    return torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g1), torch.linalg.vector_norm(g2)]))\
        .to(torch.float32)


def _sumsq_launch(kernel, acc, g, BLOCK=512, ITERS=8):
    if g.numel():
        ncols = g.shape[-1]
        s0 = g.stride(0) if g.dim() == 2 else 0
        kernel[(triton.cdiv(g.numel(), BLOCK * ITERS),)](g, acc, g.numel(), ncols, s0, g.stride(-1), BLOCK=BLOCK,
                                                         ITERS=ITERS)


@subject(reference=_total_norm_ref,
         inputs={"g1": tensor(("M", "N"), dtypes=FLOATS), "g2": tensor(("L",), dtype_like="g1")},
         dims={"M": (0, 64), "N": (0, 512), "L": (0, 20_000)}, deterministic=False)
def grad_total_norm_atomic(g1, g2):
    """The total gradient norm of clip_grad_norm_ over several parameters' gradients as apex's fused
    multi-tensor L2 norm gets it: every tensor cut into chunks, each program a float32 sum of squares of its
    chunk (2-D gradients through their strides) atomically added into one zeroed float32 total, sqrt on the
    host."""
    acc = torch.zeros(1, dtype=torch.float32, device=g1.device)
    _sumsq_launch(_sumsq_kernel, acc, g1)
    _sumsq_launch(_sumsq_kernel, acc, g2)
    return acc.sqrt()[0]
