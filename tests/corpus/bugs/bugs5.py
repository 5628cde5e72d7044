"""More buggy kernels (see bugs.py .. bugs4.py): a causal conv1d whose time tiles drop their left halo, a softcap
applied after the max subtraction, a GQA kv head picked by h % n_kv, label smoothing spread over V - 1
classes, a pool's edge mask written <=, a sum of squares accumulated in the gradients' half dtype, a top-k mask
that drops ties and a KL loss reading its target through the input's strides.  Every subject here must FAIL."""
import torch
import torch.nn.functional as F
import tritondiff  # noqa: F401
import triton
import triton.language as tl
from hypothesis import strategies as st
from triton.language.extra import libdevice

from tritondiff import dim, subject, tensor

FLOATS = ("float32", "float16", "bfloat16")


# --------------------------------------------------------------------------- causal conv1d: tile halo zeroed
@triton.jit
def _causal_conv1d_no_halo(x_ptr, w_ptr, b_ptr, y_ptr, D, L, sxb, sxd, sxl, swd, swk, sb,
                           KW: tl.constexpr, SILU: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_L: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    d = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    t0 = tl.program_id(2) * BLOCK_L
    t = t0 + tl.arange(0, BLOCK_L)
    dm = d < D
    acc = tl.zeros((BLOCK_D, BLOCK_L), dtype=tl.float32)
    acc += tl.load(b_ptr + d * sb, mask=dm, other=0.0).to(tl.float32)[:, None]
    for k in tl.static_range(KW):
        src = t - (KW - 1) + k
        w = tl.load(w_ptr + d * swd + k * swk, mask=dm, other=0.0).to(tl.float32)
        # BUG: the causal padding is tested against the tile's first step, not the sequence's: every tile but
        # the first zeroes the KW - 1 inputs before it (its halo) instead of reading them
        m = dm[:, None] & (src[None, :] >= t0) & (src[None, :] < L)
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


@subject(reference=_causal_conv1d_ref,
         inputs={"x": tensor(("B", "D", "L"), dtypes=FLOATS), "weight": tensor(("D", "W"), dtype_like="x"),
                 "bias": tensor(("D",), dtype_like="x"), "silu": st.booleans()},
         dims={"B": (1, 2), "D": (1, 32), "L": (1, 200), "W": (2, 4)})
def bug_conv1d_tile_halo_zeroed(x, weight, bias, silu):
    """Mamba's causal depthwise conv1d tiled over time in 64-step blocks, with the left-padding mask written
    against the tile start: the sequence's own left edge is right and every sequence up to 64 steps long
    (a unit test's, a decode step's) matches, but from step 64 on each tile's first W - 1 outputs miss the
    inputs of the previous tile."""
    B, D, L = x.shape
    y = torch.empty((B, D, L), dtype=x.dtype, device=x.device)
    BLOCK_D, BLOCK_L = 16, 64
    _causal_conv1d_no_halo[(B, triton.cdiv(D, BLOCK_D), triton.cdiv(L, BLOCK_L))](
        x, weight, bias, y, D, L, *x.stride(), *weight.stride(), bias.stride(0), KW=weight.shape[1],
        SILU=bool(silu), BLOCK_D=BLOCK_D, BLOCK_L=BLOCK_L)
    return y


# --------------------------------------------------------------------------- softcap after the max subtraction
@triton.jit
def _softcap_softmax_late(x_ptr, y_ptr, N, sxm, sxn, softcap, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * sxm + cols * sxn, mask=mask, other=-float("inf")).to(tl.float32)
    m = tl.max(x, axis=0)
    # BUG: the cap is a function of the score, tanh(x / c) * c; capping the shifted score x - max gives a
    # different function whenever the scores are not small against the cap
    z = softcap * libdevice.tanh((x - m) / softcap)
    e = tl.exp(z)
    tl.store(y_ptr + row * N + cols, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=mask)


@subject(reference=lambda scores, softcap: torch.softmax(softcap * torch.tanh(scores / softcap), dim=-1),
         inputs={"scores": tensor(("M", "N"), dtypes=FLOATS), "softcap": st.sampled_from((50.0, 30.0, 20.0))},
         dims={"M": (1, 64), "N": (1, 1024)})
def bug_softcap_after_max_subtraction(scores, softcap):
    """Gemma-2 attention probabilities (scores soft-capped as c * tanh(s / c), c = 50, then a softmax) from a
    kernel that moved the cap behind the usual max subtraction to reuse its register: tanh is nearly linear
    for |s| << c, so small unit-test scores agree to a few parts in a thousand, but real pre-cap scores of
    tens, or any row at an offset, come out nearly uncapped."""
    M, N = scores.shape
    y = torch.empty((M, N), dtype=scores.dtype, device=scores.device)
    _softcap_softmax_late[(M,)](scores, y, N, scores.stride(0), scores.stride(1), float(softcap),
                                BLOCK=triton.next_power_of_2(N))
    return y


# --------------------------------------------------------------------------- GQA kv head by h % n_kv
@triton.jit
def _repeat_kv_mod(kv_ptr, out_ptr, KVH, S, D, N_REP, skb, skh, sks, skd, BLOCK_S: tl.constexpr,
                   BLOCK_D: tl.constexpr):
    pid = tl.program_id(0)
    b = (pid // (KVH * N_REP)).to(tl.int64)
    h = pid % (KVH * N_REP)
    kvh = h % KVH                         # BUG: repeat_interleave groups consecutive heads: h // N_REP
    s = tl.program_id(1) * BLOCK_S + tl.arange(0, BLOCK_S)
    d = tl.arange(0, BLOCK_D)
    m = (s[:, None] < S) & (d[None, :] < D)
    v = tl.load(kv_ptr + b * skb + kvh * skh + s[:, None] * sks + d[None, :] * skd, mask=m)
    tl.store(out_ptr + pid.to(tl.int64) * S * D + s[:, None] * D + d[None, :], v, mask=m)


@subject(reference=lambda kv, n_rep: torch.repeat_interleave(kv, n_rep, dim=1),
         inputs={"kv": tensor(("B", "KVH", "S", "D"), dtypes=FLOATS + ("int32",)), "n_rep": dim("R")},
         dims={"B": (1, 3), "KVH": (1, 4), "R": (1, 4), "S": (1, 64), "D": (1, 128)})
def bug_gqa_kv_head_modulo(kv, n_rep):
    """HF's repeat_kv for grouped-query attention with the kv head of query head h computed as h % n_kv_heads
    (the tiling of torch.Tensor.repeat) where the model groups consecutive query heads (h // n_rep, as
    repeat_interleave): identical for MHA (n_rep 1) and MQA (one kv head), wrong for every real GQA shape."""
    B, KVH, S, D = kv.shape
    out = torch.empty((B, KVH * n_rep, S, D), dtype=kv.dtype, device=kv.device)
    _repeat_kv_mod[(B * KVH * n_rep, triton.cdiv(S, 32))](kv, out, KVH, S, D, n_rep, *kv.stride(), BLOCK_S=32,
                                                          BLOCK_D=triton.next_power_of_2(D))
    return out


# --------------------------------------------------------------------------- label smoothing over V - 1 classes
@triton.jit
def _ce_smooth_v_minus_1(x_ptr, t_ptr, loss_ptr, V, sxm, sxv, st_, ignore_index, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    label = tl.load(t_ptr + row * st_)
    base = x_ptr + row * sxm
    m = -float("inf")
    d = 0.0
    total = 0.0
    for off in range(0, V, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(base + cols * sxv, mask=cols < V, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        shift = tl.where(m_new == -float("inf"), 0.0, m_new)
        d = d * tl.exp(m - shift) + tl.sum(tl.exp(x - shift), axis=0)
        m = m_new
        total += tl.sum(tl.where(cols < V, x, 0.0), axis=0)
    lse = m + tl.log(d)
    ignored = label == ignore_index
    x_t = tl.load(base + tl.where(ignored, 0, label) * sxv).to(tl.float32)
    # BUG: the smoothing mass eps goes to the V - 1 wrong classes (eps / (V - 1) each, the "uniform over the
    # other classes" convention); torch's label_smoothing mixes the one-hot with a uniform over all V classes
    smooth = (V * lse - total - (lse - x_t)) / (V - 1)
    loss = (1.0 - eps) * (lse - x_t) + eps * smooth
    tl.store(loss_ptr + row, tl.where(ignored, 0.0, loss).to(loss_ptr.dtype.element_ty))


@subject(reference=lambda logits, labels, label_smoothing: F.cross_entropy(logits, labels, ignore_index=-1,
                                                                           label_smoothing=label_smoothing,
                                                                           reduction="none"),
         inputs={"logits": tensor(("M", "V"), dtypes=FLOATS),
                 "labels": tensor(("M",), dtypes=("int64",), low=-1, high="V"),
                 "label_smoothing": st.sampled_from((0.1, 0.05, 0.2))},
         dims={"M": (1, 32), "V": (2, 8192)})
def bug_label_smoothing_over_v_minus_1(logits, labels, label_smoothing):
    """A fused cross entropy with label smoothing that gives each wrong class eps / (V - 1) and the label
    1 - eps (the convention of several papers) while F.cross_entropy(label_smoothing=eps) gives every class
    eps / V: over a 32k or 128k vocabulary the two agree to a few parts per million, so a large-vocabulary
    test barely sees it; on a classifier's handful of classes the loss is off by percents."""
    M, V = logits.shape
    loss = torch.empty(M, dtype=logits.dtype, device=logits.device)
    _ce_smooth_v_minus_1[(M,)](logits, labels, loss, V, logits.stride(0), logits.stride(1), labels.stride(0), -1,
                               float(label_smoothing), BLOCK=min(4096, triton.next_power_of_2(V)))
    return loss


# --------------------------------------------------------------------------- max pool edge mask <= W
@triton.jit
def _max_pool2d_edge_le(x_ptr, y_ptr, C, H, W, OH, OW, sxn, sxc, sxh, sxw,
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
            # BUG: iw <= W admits the padded column just past the right edge (the next row's first pixel)
            m = om & (ih >= 0) & (ih < H) & (iw >= 0) & (iw <= W)
            v = tl.load(base + ih * sxh + iw * sxw, mask=m, other=-float("inf")).to(tl.float32)
            acc = tl.maximum(acc, v)
    tl.store(y_ptr + nc * OH * OW + o, acc.to(y_ptr.dtype.element_ty), mask=om)


def _pool_ok(H, W, K, P):
    return 2 * P <= K and H + 2 * P >= K and W + 2 * P >= K


@subject(reference=lambda x, kernel_size, stride, padding: F.max_pool2d(x, kernel_size, stride, padding),
         inputs={"x": tensor(("N", "C", "H", "W"), dtypes=FLOATS), "kernel_size": dim("K"), "stride": dim("S"),
                 "padding": dim("P")},
         dims={"N": (1, 2), "C": (1, 4), "H": (1, 32), "W": (1, 32), "K": (2, 3), "S": (1, 2), "P": (0, 1)},
         where=_pool_ok)
def bug_maxpool_edge_mask_le(x, kernel_size, stride, padding):
    """A padded F.max_pool2d whose right-edge test reads iw <= W: unpadded pooling never reaches column W, so
    the VGG/ResNet-stem test without padding passes; with padding a window hanging over the right edge takes
    the padded column as real and compares the next row's first pixel (past the end of the tensor in the last
    row of the last plane)."""
    N, C, H, W = x.shape
    OH = (H + 2 * padding - kernel_size) // stride + 1
    OW = (W + 2 * padding - kernel_size) // stride + 1
    y = torch.empty((N, C, OH, OW), dtype=x.dtype, device=x.device)
    BLOCK = min(256, triton.next_power_of_2(OH * OW))
    _max_pool2d_edge_le[(N * C, triton.cdiv(OH * OW, BLOCK))](x, y, C, H, W, OH, OW, *x.stride(), K=kernel_size,
                                                              S=stride, P=padding, BLOCK=BLOCK)
    return y


# --------------------------------------------------------------------------- sum of squares in the half dtype
@triton.jit
def _sumsq_half_acc(g_ptr, acc_ptr, numel, sg, BLOCK: tl.constexpr, ITERS: tl.constexpr):
    start = tl.program_id(0).to(tl.int64) * BLOCK * ITERS
    # BUG: the per-lane partial sums live in the gradients' dtype, rounded to 8 (bf16) or 11 (fp16) bits after
    # every chunk step; float32 inputs, or a chunk of one step, are right
    part = tl.zeros((BLOCK,), dtype=g_ptr.dtype.element_ty)
    for it in range(0, tl.cdiv(tl.minimum(numel - start, BLOCK * ITERS), BLOCK)):
        i = start + it * BLOCK + tl.arange(0, BLOCK)
        g = tl.load(g_ptr + i * sg, mask=i < numel, other=0.0)
        part += g * g
    tl.atomic_add(acc_ptr, tl.sum(part.to(tl.float32), axis=0))


@subject(reference=lambda grad: torch.linalg.vector_norm(grad).to(torch.float32),
         inputs={"grad": tensor(("L",), dtypes=FLOATS)},
         dims={"L": (1024, 32_768)}, deterministic=False)
def bug_sumsq_accumulates_in_half(grad):
    """The gradient L2 norm of a clip_grad_norm_ kernel whose chunk loop keeps its per-lane running sums of
    squares in the gradient's own bf16/fp16 (the accumulator declared with the pointer's element type): with
    apex's 65536-element chunks each of 32 lanes adds up to 2048 squares (a 32k gradient: 1024), and once a
    lane's sum has grown to a few hundred the small squares round away (bf16 keeps 8 bits, fp16 11), so a
    long half-precision gradient's norm is off by percents while float32 gradients, and short ones, are
    fine."""
    acc = torch.zeros(1, dtype=torch.float32, device=grad.device)
    L = grad.numel()
    BLOCK, ITERS = 32, 2048
    _sumsq_half_acc[(triton.cdiv(L, BLOCK * ITERS),)](grad, acc, L, grad.stride(0), BLOCK=BLOCK, ITERS=ITERS)
    return acc.sqrt()[0]


# --------------------------------------------------------------------------- top-k mask drops ties
@triton.jit
def _float_key(x):
    bits = (x + 0.0).to(tl.int32, bitcast=True)
    return tl.where(bits < 0, bits ^ 0x7FFFFFFF, bits)


@triton.jit
def _kth_largest_key(key, valid, k):
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
def _topk_mask_strict(x_ptr, y_ptr, V, k, sxm, sxv, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    valid = cols < V
    x = tl.load(x_ptr + row * sxm + cols * sxv, mask=valid, other=-float("inf"))
    key = _float_key(x.to(tl.float32))
    # BUG: "keep what beats the first dropped value": the (k+1)-th largest as the threshold and a strict >,
    # which equals ">= the k-th" only when those two values differ -- a tie across the cut drops them all
    first_out = _kth_largest_key(key, valid, k + 1)
    keep = (key.to(tl.int64) > first_out) | (k >= V)
    tl.store(y_ptr + row * V + cols, tl.where(keep, x, -float("inf")), mask=valid)


def _topk_mask_ref(logits, k):
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, float("-inf"))


@subject(reference=_topk_mask_ref,
         inputs={"logits": tensor(("M", "V"), dtypes=FLOATS), "k": dim("K")},
         dims={"M": (1, 8), "V": (1, 1024), "K": (1, 32)}, where=lambda V, K: K <= V)
def bug_topk_mask_drops_ties(logits, k):
    """A sampler's top-k filter by radix select that thresholds on the first value it drops, the (k+1)-th
    largest, keeping logits strictly above it: identical for distinct logits (every random-normal test), but
    logits tied across the cut -- quantised or fp16/bf16 logits, a repeated token's -- are all masked and
    fewer than k tokens (none, when every logit is equal) stay sampleable."""
    M, V = logits.shape
    y = torch.empty((M, V), dtype=logits.dtype, device=logits.device)
    _topk_mask_strict[(M,)](logits, y, V, k, logits.stride(0), logits.stride(1), BLOCK=triton.next_power_of_2(V))
    return y


# --------------------------------------------------------------------------- KL target read with input strides
@triton.jit
def _kldiv_target_input_strides(x_ptr, y_ptr, out_ptr, V, sxm, sxv, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < V
    x = tl.load(x_ptr + row * sxm + cols * sxv, mask=mask, other=0.0).to(tl.float32)
    # BUG: the target is addressed with the input's strides (one pair passed for "the same-shaped" pair)
    y = tl.load(y_ptr + row * sxm + cols * sxv, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * V + cols, (tl.exp(y) * (y - x)).to(out_ptr.dtype.element_ty), mask=mask)


@subject(reference=lambda input, target: F.kl_div(input, target, reduction="none", log_target=True),
         inputs={"input": tensor(("M", "V"), dtypes=FLOATS, high=0.0),
                 "target": tensor(("M", "V"), dtype_like="input", high=0.0)},
         dims={"M": (1, 32), "V": (1, 4096)})
def bug_kl_div_target_input_strides(input, target):
    """Liger-style pointwise KL divergence (log_target=True, reduction='none', the per-token terms a
    distillation loss masks before reducing) whose kernel takes one (row, col) stride pair for both
    same-shaped operands: right whenever student and teacher log-probabilities share a layout (both fresh
    log_softmax outputs), wrong when the teacher's is a transposed or sliced view."""
    M, V = input.shape
    out = torch.empty((M, V), dtype=input.dtype, device=input.device)
    BLOCK = min(1024, triton.next_power_of_2(V))
    _kldiv_target_input_strides[(M, triton.cdiv(V, BLOCK))](input, target, out, V, input.stride(0), input.stride(1),
                                                            BLOCK=BLOCK)
    return out
