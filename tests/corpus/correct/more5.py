"""A fifth batch of public kernel patterns: a GEMM's bias + GELU epilogue on a 2-D autotuned grid with an
EVEN_N heuristic (Megatron's bias_gelu fusion, Inductor's pointwise epilogues), batch-norm statistics of an NCHW
tensor by per-lane Welford and a Welford tree merge (Inductor's welford_reduce, apex's syncbn), instance norm
(F.instance_norm over each sample's planes), a CSR sparse matrix-vector product (one program per row, the
row's nonzeros walked in tiles, as the Triton SpMV ports and torch.sparse's Triton ops do), the paged-KV cache
gather of vLLM (a block table mapping logical to physical blocks), ALiBi-biased causal attention probabilities
with the slopes of the paper for any head count (BLOOM, MPT), a Mixtral router (softmax, top-2, the two
weights renormalised), a per-tensor absmax-scaled cast (the delayed-scaling fp8 recipe of Transformer Engine
and torchao, through a float32 atomic max), a bilinear upsample with both corner conventions (F.interpolate)
and a log-cumsum-exp scan through tl.associative_scan with a logaddexp combine (the log-space scans of
Mamba-style and CTC kernels)."""
import math

import torch
import torch.nn.functional as F
import tritondiff  # noqa: F401
import triton
import triton.language as tl
from hypothesis import strategies as st
from triton.language.extra import libdevice

from tritondiff import dim, subject, tensor

FLOATS = ("float32", "float16", "bfloat16")


def _acc(t):
    """The dtype a kernel accumulates in, as the reference should: float32 for half inputs, float64 stays."""
    return t.to(torch.promote_types(t.dtype, torch.float32))


# ---------------------------------------------------------------- bias + GELU epilogue, 2-D autotuned grid

@triton.autotune(configs=[triton.Config({"BLOCK_M": 16, "BLOCK_N": 64}, num_warps=4),
                          triton.Config({"BLOCK_M": 32, "BLOCK_N": 32}, num_warps=4),
                          triton.Config({"BLOCK_M": 8, "BLOCK_N": 128}, num_warps=2)],
                 key=["M", "N"])
@triton.heuristics({"EVEN_N": lambda args: args["N"] % args["BLOCK_N"] == 0})
@triton.jit
def _bias_gelu_kernel(x_ptr, b_ptr, y_ptr, M, N, sxm, sxn, sb, APPROX: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, EVEN_N: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rm = rows < M
    cm = cols < N
    m = rm[:, None] & cm[None, :]
    if EVEN_N:
        # the tile divides N: only the rows need a mask, the bias none
        x = tl.load(x_ptr + rows[:, None] * sxm + cols[None, :] * sxn, mask=rm[:, None], other=0.0)
        b = tl.load(b_ptr + cols * sb)
    else:
        x = tl.load(x_ptr + rows[:, None] * sxm + cols[None, :] * sxn, mask=m, other=0.0)
        b = tl.load(b_ptr + cols * sb, mask=cm, other=0.0)
    h = x.to(tl.float32) + b.to(tl.float32)[None, :]
    if APPROX:
        inner = 0.7978845608028654 * (h + 0.044715 * h * h * h)
        y = 0.5 * h * (1.0 + libdevice.tanh(inner))
    else:
        y = 0.5 * h * (1.0 + libdevice.erf(h * 0.7071067811865476))
    tl.store(y_ptr + rows[:, None] * N + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=m)


def _bias_gelu_ref(x, bias, approximate):
    return F.gelu(_acc(x) + _acc(bias), approximate="tanh" if approximate else "none").to(x.dtype)


@subject(reference=_bias_gelu_ref,
         inputs={"x": tensor(("M", "N"), dtypes=FLOATS), "bias": tensor(("N",), dtype_like="x"),
                 "approximate": st.booleans()},
         dims={"M": (0, 200), "N": (1, 300)})
def bias_gelu_epilogue_2d(x, bias, approximate):
    """Megatron's fused bias_gelu (and the epilogue Inductor emits after a linear layer): y = gelu(x + b) with
    the bias broadcast over rows, exact erf or the tanh approximation (a constexpr flag), the bias added in
    float32 before the activation; a 2-D (row block, column block) grid under triton.autotune, with an EVEN_N
    heuristic that drops the column mask when the tile divides N."""
    M, N = x.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if M:
        grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]), triton.cdiv(N, meta["BLOCK_N"]))  # noqa: E731
        _bias_gelu_kernel[grid](x, bias, y, M, N, x.stride(0), x.stride(1), bias.stride(0),
                                APPROX=bool(approximate))
    return y


# ---------------------------------------------------------------- batch-norm statistics by Welford

@triton.jit
def _welford_combine(mean_a, m2_a, n_a, mean_b, m2_b, n_b):
    n = n_a + n_b
    delta = mean_b - mean_a
    w_b = tl.where(n == 0, 0.0, n_b / tl.maximum(n, 1.0))
    return mean_a + delta * w_b, m2_a + m2_b + delta * delta * n_a * w_b, n


@triton.jit
def _bn_stats_kernel(x_ptr, mean_ptr, var_ptr, N, HW, W, sxn, sxc, sxh, sxw, BLOCK: tl.constexpr):
    c = tl.program_id(0).to(tl.int64)
    lane_mean = tl.zeros((BLOCK,), dtype=tl.float32)
    lane_m2 = tl.zeros((BLOCK,), dtype=tl.float32)
    lane_n = tl.zeros((BLOCK,), dtype=tl.float32)
    for n in range(0, N):
        base = x_ptr + n * sxn + c * sxc
        for off in range(0, HW, BLOCK):
            p = off + tl.arange(0, BLOCK)
            m = p < HW
            x = tl.load(base + (p // W) * sxh + (p % W) * sxw, mask=m, other=0.0).to(tl.float32)
            # one Welford step per lane: count, running mean, running sum of squared deviations
            lane_n += m.to(tl.float32)
            delta = tl.where(m, x - lane_mean, 0.0)
            lane_mean += delta / tl.maximum(lane_n, 1.0)
            lane_m2 += tl.where(m, delta * (x - lane_mean), 0.0)
    mean, m2, cnt = tl.reduce((lane_mean, lane_m2, lane_n), 0, _welford_combine)
    tl.store(mean_ptr + c, mean)
    tl.store(var_ptr + c, m2 / cnt)


def _bn_stats_ref(x):
    var, mean = torch.var_mean(_acc(x), dim=(0, 2, 3), unbiased=False)
    return mean.to(torch.float32), var.to(torch.float32)


@subject(reference=_bn_stats_ref, inputs={"x": tensor(("N", "C", "H", "W"), dtypes=FLOATS)},
         dims={"N": (1, 4), "C": (1, 12), "H": (1, 24), "W": (1, 24)})
def batchnorm_stats_welford(x):
    """The statistics pass of a training-mode BatchNorm2d (apex's syncbn welford_mean_var, Inductor's
    welford_reduce): per channel, the mean and biased variance over (N, H, W) of an NCHW tensor, each of
    BLOCK lanes running its own Welford update over the (n, h*w) tiles, the lanes then merged pairwise by
    Chan's formula weighted by their counts (tl.reduce over a (mean, M2, count) tuple); float32 out."""
    N, C, H, W = x.shape
    mean = torch.empty(C, dtype=torch.float32, device=x.device)
    var = torch.empty(C, dtype=torch.float32, device=x.device)
    _bn_stats_kernel[(C,)](x, mean, var, N, H * W, W, *x.stride(), BLOCK=min(128, triton.next_power_of_2(H * W)))
    return mean, var


# ---------------------------------------------------------------- instance norm

IN_EPS = 1e-5


@triton.jit
def _instance_norm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, C, HW, W, sxn, sxc, sxh, sxw, sw, sb, eps,
                          BLOCK: tl.constexpr):
    nc = tl.program_id(0).to(tl.int64)
    n = nc // C
    c = nc % C
    base = x_ptr + n * sxn + c * sxc
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for off in range(0, HW, BLOCK):
        p = off + tl.arange(0, BLOCK)
        acc += tl.load(base + (p // W) * sxh + (p % W) * sxw, mask=p < HW, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / HW
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for off in range(0, HW, BLOCK):
        p = off + tl.arange(0, BLOCK)
        x = tl.load(base + (p // W) * sxh + (p % W) * sxw, mask=p < HW, other=0.0).to(tl.float32)
        d = tl.where(p < HW, x - mean, 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / HW + eps)      # biased variance, as every norm layer
    w = tl.load(w_ptr + c * sw).to(tl.float32)
    b = tl.load(b_ptr + c * sb).to(tl.float32)
    for off in range(0, HW, BLOCK):
        p = off + tl.arange(0, BLOCK)
        m = p < HW
        x = tl.load(base + (p // W) * sxh + (p % W) * sxw, mask=m, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(y_ptr + nc * HW + p, y.to(y_ptr.dtype.element_ty), mask=m)


@subject(reference=lambda x, weight, bias: F.instance_norm(x, weight=weight, bias=bias, eps=IN_EPS),
         inputs={"x": tensor(("N", "C", "H", "W"), dtypes=FLOATS), "weight": tensor(("C",), dtype_like="x"),
                 "bias": tensor(("C",), dtype_like="x")},
         dims={"N": (1, 3), "C": (1, 6), "H": (1, 40), "W": (1, 40)},
         where=lambda H, W: H * W > 1)          # F.instance_norm refuses planes of one element
def instance_norm_fwd(x, weight, bias):
    """InstanceNorm2d's forward (affine, no running stats: F.instance_norm) as style-transfer and diffusion
    repos write it in Triton: one program per (sample, channel) plane, a mean pass, a centred variance pass
    and a normalising pass over h*w tiles (strided NCHW addressing), the per-channel affine applied in
    float32."""
    N, C, H, W = x.shape
    y = torch.empty((N, C, H, W), dtype=x.dtype, device=x.device)
    _instance_norm_kernel[(N * C,)](x, weight, bias, y, C, H * W, W, *x.stride(), weight.stride(0), bias.stride(0),
                                    IN_EPS, BLOCK=min(256, triton.next_power_of_2(H * W)))
    return y


# ---------------------------------------------------------------- CSR sparse matrix-vector product

@triton.jit
def _csr_spmv_kernel(crow_ptr, col_ptr, val_ptr, x_ptr, y_ptr, scol, sval, sx, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    start = tl.load(crow_ptr + row).to(tl.int64)
    end = tl.load(crow_ptr + row + 1).to(tl.int64)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for off in range(start, end, BLOCK):
        k = off + tl.arange(0, BLOCK)
        m = k < end
        col = tl.load(col_ptr + k * scol, mask=m, other=0)
        v = tl.load(val_ptr + k * sval, mask=m, other=0.0).to(tl.float32)
        xv = tl.load(x_ptr + col * sx, mask=m, other=0.0).to(tl.float32)
        acc += v * xv
    tl.store(y_ptr + row, tl.sum(acc, axis=0).to(y_ptr.dtype.element_ty))


def _crow(cuts, nnz):
    """CSR row pointers from drawn cut points: 0, the sorted cuts, nnz (int32, as torch's crow_indices)."""
    zero = torch.zeros(1, dtype=torch.int64, device=cuts.device)
    last = torch.full((1,), nnz, dtype=torch.int64, device=cuts.device)
    return torch.cat([zero, cuts.to(torch.int64).sort().values, last]).to(torch.int32)


def _csr_spmv_ref(values, col, cuts, x):
    crow = _crow(cuts, values.shape[0]).long()
    rows = torch.repeat_interleave(torch.arange(crow.numel() - 1, device=x.device), crow.diff())
    y = torch.zeros(crow.numel() - 1, dtype=_acc(x).dtype, device=x.device)
    return y.index_add_(0, rows, _acc(values) * _acc(x)[col.long()]).to(values.dtype)


@subject(reference=_csr_spmv_ref,
         inputs={"values": tensor(("NNZ",), dtypes=FLOATS), "col": tensor(("NNZ",), dtypes=("int32", "int64"),
                                                                         low=0, high="K"),
                 "cuts": tensor(("R",), dtypes=("int32", "int64"), low=0, high="NNZ"),
                 "x": tensor(("K",), dtype_like="values")},
         dims={"NNZ": (1, 2000), "K": (1, 300), "R": (0, 64)})
def csr_spmv(values, col, cuts, x):
    """y = A @ x for a CSR matrix (crow_indices, col_indices, values) with R + 1 rows, some empty: one program
    per row loads its [crow[r], crow[r+1]) range and walks it in tiles, gathering x at the column indices
    (int32 or int64), products accumulated in float32 -- the scalar-row SpMV of the Triton sparse ports."""
    crow = _crow(cuts, values.shape[0])
    rows = crow.numel() - 1
    y = torch.empty(rows, dtype=values.dtype, device=values.device)
    _csr_spmv_kernel[(rows,)](crow, col, values, x, y, col.stride(0), values.stride(0), x.stride(0), BLOCK=64)
    return y


# ---------------------------------------------------------------- paged KV cache gather (block table)

@triton.jit
def _paged_gather_kernel(cache_ptr, table_ptr, lens_ptr, out_ptr, H, D, S, MAXB,
                         scb, scs, sch, scd, stb, stm, BS: tl.constexpr, BLOCK_S: tl.constexpr,
                         BLOCK_D: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    h = tl.program_id(2).to(tl.int64)
    s = tl.program_id(1) * BLOCK_S + tl.arange(0, BLOCK_S)
    d = tl.arange(0, BLOCK_D)
    seq_len = tl.load(lens_ptr + b)
    sm = s < S
    logical = s // BS
    phys = tl.load(table_ptr + b * stb + logical * stm, mask=sm & (logical < MAXB), other=0).to(tl.int64)
    slot = s % BS
    live = sm & (s < seq_len)
    m = live[:, None] & (d[None, :] < D)
    v = tl.load(cache_ptr + phys[:, None] * scb + slot[:, None] * scs + h * sch + d[None, :] * scd, mask=m,
                other=0.0)
    om = sm[:, None] & (d[None, :] < D)
    tl.store(out_ptr + ((b * S + s[:, None]) * H + h) * D + d[None, :], v, mask=om)


def _block_table(keys, B, MAXB):
    """A block table: B * MAXB distinct physical blocks in an order drawn from the keys (a stable argsort, so
    ties still give one order), as an allocator's free list hands them out."""
    return torch.argsort(keys.reshape(-1), stable=True)[:B * MAXB].reshape(B, MAXB).to(torch.int32)


def _seq_lens(lens, MAXB, BS):
    return (lens.to(torch.int64) % (MAXB * BS + 1)).to(torch.int32)


def _paged_gather_ref(cache, keys, lens, n_blocks):
    NB, BS, H, D = cache.shape
    B = lens.shape[0]
    table = _block_table(keys, B, n_blocks).long()
    seq = _seq_lens(lens, n_blocks, BS).long()
    s = torch.arange(n_blocks * BS, device=cache.device)
    out = cache[table[:, s // BS], s % BS]                   # (B, S, H, D)
    return out.masked_fill((s[None, :] >= seq[:, None])[:, :, None, None], 0)


@subject(reference=_paged_gather_ref,
         inputs={"cache": tensor(("NB", "BS", "H", "D"), dtypes=FLOATS), "keys": tensor(("NB",), dtypes=("int64",),
                                                                                       low=0, high=50),
                 "lens": tensor(("B",), dtypes=("int32", "int64"), low=0, high=1000), "n_blocks": dim("MAXB")},
         dims={"B": (1, 4), "MAXB": (1, 6), "NB": (1, 30), "BS": (1, 16), "H": (1, 4), "D": (1, 64)},
         where=lambda B, MAXB, NB: NB >= B * MAXB)
def paged_kv_gather(cache, keys, lens, n_blocks):
    """vLLM's paged KV cache read back into a dense (B, S, H, D) tensor (the gather its prefix-caching and
    attention fallbacks do): the cache is a pool of physical blocks of BS slots, each sequence owns n_blocks
    of them through its row of the block table (shuffled, a pool larger than needed), token s of sequence b
    lives in block table[b, s // BS], slot s % BS; positions past the sequence's length come back 0."""
    NB, BS, H, D = cache.shape
    B = lens.shape[0]
    table = _block_table(keys, B, n_blocks)
    seq = _seq_lens(lens, n_blocks, BS)
    S = n_blocks * BS
    out = torch.empty((B, S, H, D), dtype=cache.dtype, device=cache.device)
    BLOCK_S = 16
    _paged_gather_kernel[(B, triton.cdiv(S, BLOCK_S), H)](cache, table, seq, out, H, D, S, n_blocks, *cache.stride(),
                                                          *table.stride(), BS=BS, BLOCK_S=BLOCK_S,
                                                          BLOCK_D=triton.next_power_of_2(D))
    return out


# ---------------------------------------------------------------- ALiBi causal attention probabilities

def _alibi_slopes(n):
    """The ALiBi paper's slopes (ofirpress/attention_with_linear_biases): a geometric sequence from 2^(-8/n)
    for a power of two n; otherwise the closest lower power's slopes and every other slope of twice it."""
    def pow2(k):
        start = 2.0 ** (-(2.0 ** -(math.log2(k) - 3)))
        return [start * start ** i for i in range(k)]
    if math.log2(n).is_integer():
        return pow2(n)
    closest = 2 ** math.floor(math.log2(n))
    return pow2(closest) + _alibi_slopes(2 * closest)[0::2][:n - closest]


@triton.jit
def _alibi_softmax_kernel(s_ptr, p_ptr, H, M, N, ssb, ssh, ssm, ssn, sm_scale, P2: tl.constexpr,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    bh = tl.program_id(0).to(tl.int64)
    b = bh // H
    h = bh % H
    # slopes in the kernel: head h < P2 (the largest power of two <= H) takes 2^(-8 (h + 1) / P2), the rest
    # interleave between them: 2^(-4 (2 (h - P2) + 1) / P2)
    hf = h.to(tl.float32)
    slope = tl.where(h < P2, tl.exp2(-8.0 * (hf + 1.0) / P2), tl.exp2(-4.0 * (2.0 * (hf - P2) + 1.0) / P2))
    rows = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    rm = rows < M
    off = N - M                            # queries are the last M of N positions (a kv cache before them)
    qpos = rows + off
    ok = rm[:, None] & (cols[None, :] < N) & (cols[None, :] <= qpos[:, None])
    s = tl.load(s_ptr + b * ssb + h * ssh + rows[:, None] * ssm + cols[None, :] * ssn, mask=ok,
                other=0.0).to(tl.float32)
    dist = (cols[None, :] - qpos[:, None]).to(tl.float32)      # <= 0 where attended
    z = tl.where(ok, s * sm_scale + slope * dist, -float("inf"))
    mx = tl.max(z, axis=1)
    mx = tl.where(mx == -float("inf"), 0.0, mx)
    e = tl.exp(z - mx[:, None])
    p = e / tl.sum(e, axis=1)[:, None]
    om = rm[:, None] & (cols[None, :] < N)
    tl.store(p_ptr + bh * M * N + rows[:, None] * N + cols[None, :], p.to(p_ptr.dtype.element_ty), mask=om)


def _alibi_ref(scores, sm_scale):
    B, H, M, N = scores.shape
    s = _acc(scores)
    slopes = torch.tensor(_alibi_slopes(H), dtype=s.dtype, device=s.device)
    qpos = torch.arange(M, device=s.device)[:, None] + (N - M)
    kpos = torch.arange(N, device=s.device)[None, :]
    z = s * sm_scale + slopes[:, None, None] * (kpos - qpos).to(s.dtype)
    z = z.masked_fill(kpos > qpos, float("-inf"))
    return torch.softmax(z, dim=-1).to(scores.dtype)


@subject(reference=_alibi_ref,
         inputs={"scores": tensor(("B", "H", "M", "N"), dtypes=FLOATS, nonfinite=False),
                 "sm_scale": st.sampled_from((1.0, 0.125, 0.0883883))},
         dims={"B": (1, 2), "H": (1, 12), "M": (1, 48), "N": (1, 96)}, where=lambda M, N: M <= N)
def alibi_causal_softmax(scores, sm_scale):
    """Attention probabilities of an ALiBi model (BLOOM, MPT): softmax over keys of scale * q.k plus the
    head's linear distance penalty slope_h * (j - i), causal, the M queries being the last M of N positions;
    the slopes computed in the kernel for any head count (the paper's interleaving for non-powers of two,
    BLOOM-560m's 16 heads and MPT's, but also 12); a (batch*head, query block) grid over 2-D tiles."""
    B, H, M, N = scores.shape
    p = torch.empty((B, H, M, N), dtype=scores.dtype, device=scores.device)
    BLOCK_M = 16
    _alibi_softmax_kernel[(B * H, triton.cdiv(M, BLOCK_M))](scores, p, H, M, N, *scores.stride(), float(sm_scale),
                                                            P2=2 ** int(math.floor(math.log2(H))), BLOCK_M=BLOCK_M,
                                                            BLOCK_N=triton.next_power_of_2(N))
    return p


# ---------------------------------------------------------------- MoE router: softmax, top-2, renormalise

@triton.jit
def _router_top2_kernel(x_ptr, w_ptr, idx_ptr, T, E, sxt, sxe, BLOCK_T: tl.constexpr, BLOCK_E: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    cols = tl.arange(0, BLOCK_E)
    rm = rows < T
    cm = cols < E
    m = rm[:, None] & cm[None, :]
    x = tl.load(x_ptr + rows[:, None].to(tl.int64) * sxt + cols[None, :] * sxe, mask=m,
                other=-float("inf")).to(tl.float32)
    mx = tl.max(x, axis=1)
    e = tl.where(m, tl.exp(x - mx[:, None]), 0.0)
    p = e / tl.sum(e, axis=1)[:, None]
    # top-2 on the logits (softmax is monotone), ties to the lower expert as torch.argmax
    i1 = tl.argmax(tl.where(m, x, -float("inf")), axis=1, tie_break_left=True)
    x2 = tl.where(m & (cols[None, :] != i1[:, None]), x, -float("inf"))
    i2 = tl.argmax(x2, axis=1, tie_break_left=True)
    chosen = (cols[None, :] == i1[:, None]) | (cols[None, :] == i2[:, None])
    pk = tl.where(chosen & m, p, 0.0)
    w = pk / tl.sum(pk, axis=1)[:, None]             # the two weights renormalised to sum to 1
    tl.store(w_ptr + rows[:, None] * E + cols[None, :], w, mask=m)
    tl.store(idx_ptr + rows * 2, i1.to(tl.int64), mask=rm)
    tl.store(idx_ptr + rows * 2 + 1, i2.to(tl.int64), mask=rm)


def _router_ref(logits):
    x = _acc(logits)
    p = torch.softmax(x, dim=-1)
    i1 = torch.argmax(x, dim=-1)
    i2 = torch.argmax(x.scatter(-1, i1[:, None], float("-inf")), dim=-1)
    idx = torch.stack([i1, i2], dim=-1)
    top = p.gather(-1, idx)
    w = torch.zeros_like(p).scatter(-1, idx, top / top.sum(-1, keepdim=True))
    return w.to(torch.float32), idx


@subject(reference=_router_ref, inputs={"logits": tensor(("T", "E"), dtypes=FLOATS, nonfinite=False)},
         dims={"T": (1, 200), "E": (2, 64)})
def moe_router_top2(logits):
    """Mixtral's router (HF MixtralSparseMoeBlock, vLLM's fused_topk with renormalize=True): softmax over the
    experts in float32, the two largest chosen (ties to the lower expert index), their weights renormalised
    to sum to 1; returns the dense (T, E) combine weights (zero off the chosen two) and the (T, 2) expert ids;
    a 2-D tile of tokens per program, any expert count (8, 60, 2)."""
    T, E = logits.shape
    w = torch.empty((T, E), dtype=torch.float32, device=logits.device)
    idx = torch.empty((T, 2), dtype=torch.int64, device=logits.device)
    BLOCK_T = 16
    _router_top2_kernel[(triton.cdiv(T, BLOCK_T),)](logits, w, idx, T, E, logits.stride(0), logits.stride(1),
                                                    BLOCK_T=BLOCK_T, BLOCK_E=triton.next_power_of_2(E))
    return w, idx


# ---------------------------------------------------------------- per-tensor absmax-scaled cast

QMAX = {False: 448.0, True: 57344.0}    # float8 e4m3's / e5m2's largest finite value: the range absmax maps to
SCALE_EPS = 1e-12


@triton.jit
def _absmax_kernel(x_ptr, amax_ptr, numel, N, sxm, sxn, BLOCK: tl.constexpr):
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = i < numel
    x = tl.load(x_ptr + (i // N) * sxm + (i % N) * sxn, mask=m, other=0.0).to(tl.float32)
    tl.atomic_max(amax_ptr, tl.max(tl.abs(x), axis=0))      # |x| >= 0: float max through the int ordering


@triton.jit
def _scaled_cast_kernel(x_ptr, amax_ptr, q_ptr, scale_ptr, numel, N, sxm, sxn, qmax, eps, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    i = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = i < numel
    scale = tl.maximum(tl.load(amax_ptr), eps) / qmax
    x = tl.load(x_ptr + (i // N) * sxm + (i % N) * sxn, mask=m, other=0.0).to(tl.float32)
    q = tl.minimum(tl.maximum(x / scale, -qmax), qmax)
    tl.store(q_ptr + i, q.to(q_ptr.dtype.element_ty), mask=m)
    if pid == 0:
        tl.store(scale_ptr, scale)


def _fp8(e5m2):
    return torch.float8_e5m2 if e5m2 else torch.float8_e4m3fn


def _scaled_cast_ref(x, e5m2):
    xa = _acc(x)
    qmax = QMAX[e5m2]
    scale = xa.abs().amax().clamp_min(SCALE_EPS) / qmax
    q = (xa / scale).clamp(-qmax, qmax)
    return q.to(_fp8(e5m2)), scale.to(torch.float32)


@subject(reference=_scaled_cast_ref,
         inputs={"x": tensor(("M", "N"), dtypes=FLOATS, nonfinite=False), "e5m2": st.booleans()},
         dims={"M": (1, 64), "N": (1, 300)})
def absmax_scaled_cast(x, e5m2):
    """Per-tensor dynamic scaling as Transformer Engine's and torchao's float8 recipes do it: one kernel takes
    the tensor's absmax through a float32 tl.atomic_max into a zeroed scalar, a second divides by
    scale = absmax / qmax, clamps to +-qmax and casts to float8 (e4m3 or e5m2), returning (q, scale)."""
    M, N = x.shape
    numel = M * N
    amax = torch.zeros(1, dtype=torch.float32, device=x.device)
    q = torch.empty((M, N), dtype=_fp8(e5m2), device=x.device)
    scale = torch.empty((), dtype=torch.float32, device=x.device)
    BLOCK = 1024
    grid = (triton.cdiv(numel, BLOCK),)
    _absmax_kernel[grid](x, amax, numel, N, x.stride(0), x.stride(1), BLOCK=BLOCK)
    _scaled_cast_kernel[grid](x, amax, q, scale, numel, N, x.stride(0), x.stride(1), QMAX[e5m2], SCALE_EPS,
                              BLOCK=BLOCK)
    return q, scale


# ---------------------------------------------------------------- bilinear upsample

@triton.jit
def _src_index(dst, scale, in_size, ALIGN: tl.constexpr):
    if ALIGN:
        src = dst.to(tl.float32) * scale
    else:
        # half-pixel centres: the output pixel's centre mapped back, clamped at 0 (torch's area_pixel_compute)
        src = tl.maximum((dst.to(tl.float32) + 0.5) * scale - 0.5, 0.0)
    i0 = tl.minimum(src.to(tl.int32), in_size - 1)         # src >= 0: truncation is floor
    i1 = tl.minimum(i0 + 1, in_size - 1)
    lam = src - i0.to(tl.float32)
    return i0, i1, lam


@triton.jit
def _bilinear_kernel(x_ptr, y_ptr, C, H, W, OH, OW, sxn, sxc, sxh, sxw, scale_h, scale_w,
                     ALIGN: tl.constexpr, BLOCK: tl.constexpr):
    nc = tl.program_id(0).to(tl.int64)
    n = nc // C
    c = nc % C
    o = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    om = o < OH * OW
    oh = o // OW
    ow = o % OW
    h0, h1, lh = _src_index(oh, scale_h, H, ALIGN)
    w0, w1, lw = _src_index(ow, scale_w, W, ALIGN)
    base = x_ptr + n * sxn + c * sxc
    x00 = tl.load(base + h0 * sxh + w0 * sxw, mask=om, other=0.0).to(tl.float32)
    x01 = tl.load(base + h0 * sxh + w1 * sxw, mask=om, other=0.0).to(tl.float32)
    x10 = tl.load(base + h1 * sxh + w0 * sxw, mask=om, other=0.0).to(tl.float32)
    x11 = tl.load(base + h1 * sxh + w1 * sxw, mask=om, other=0.0).to(tl.float32)
    top = x00 * (1.0 - lw) + x01 * lw
    bot = x10 * (1.0 - lw) + x11 * lw
    y = top * (1.0 - lh) + bot * lh
    tl.store(y_ptr + nc * OH * OW + o, y.to(y_ptr.dtype.element_ty), mask=om)


def _bilinear_scale(in_size, out_size, align):
    if align:
        return (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    return in_size / out_size


@subject(reference=lambda x, out_h, out_w, align_corners: F.interpolate(x, size=(out_h, out_w), mode="bilinear",
                                                                        align_corners=align_corners),
         inputs={"x": tensor(("N", "C", "H", "W"), dtypes=FLOATS), "out_h": dim("OH"), "out_w": dim("OW"),
                 "align_corners": st.booleans()},
         dims={"N": (1, 2), "C": (1, 3), "H": (1, 24), "W": (1, 24), "OH": (1, 48), "OW": (1, 48)})
def bilinear_upsample2d(x, out_h, out_w, align_corners):
    """F.interpolate(mode='bilinear') to any output size (up or down) as segmentation and diffusion decoders'
    Triton ports write it: one program per (plane, output pixel block), each output pixel's source
    coordinate from the corner convention (align_corners maps corner to corner, otherwise half-pixel
    centres clamped at 0), the four neighbours clamped at the last row/column, blended in float32."""
    N, C, H, W = x.shape
    y = torch.empty((N, C, out_h, out_w), dtype=x.dtype, device=x.device)
    BLOCK = min(256, triton.next_power_of_2(out_h * out_w))
    _bilinear_kernel[(N * C, triton.cdiv(out_h * out_w, BLOCK))](
        x, y, C, H, W, out_h, out_w, *x.stride(), _bilinear_scale(H, out_h, align_corners),
        _bilinear_scale(W, out_w, align_corners), ALIGN=bool(align_corners), BLOCK=BLOCK)
    return y


# ---------------------------------------------------------------- log-cumsum-exp scan

@triton.jit
def _logaddexp(a, b):
    mx = tl.maximum(a, b)
    mn = tl.minimum(a, b)
    # exp(mn - mx) <= 1 never overflows; equal operands (-inf and -inf, inf and inf) give mx + log 2, not
    # the NaN of -inf - -inf
    d = tl.where(mx == mn, 0.0, mn - mx)
    return mx + libdevice.log1p(tl.exp(d))


@triton.jit
def _logcumsumexp_kernel(x_ptr, y_ptr, L, sxm, sxl, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    carry = tl.full((), -float("inf"), tl.float32)
    for off in range(0, L, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        mask = cols < L
        x = tl.load(x_ptr + row * sxm + cols * sxl, mask=mask, other=-float("inf")).to(tl.float32)
        local = tl.associative_scan(x, 0, _logaddexp)
        out = _logaddexp(carry, local)
        tl.store(y_ptr + row * L + cols, out.to(y_ptr.dtype.element_ty), mask=mask)
        # the running prefix is non-decreasing: its largest valid element is the last, the next tile's carry
        carry = tl.max(tl.where(mask, out, -float("inf")), axis=0)


@subject(reference=lambda x: torch.logcumsumexp(x, dim=-1),
         inputs={"x": tensor(("M", "L"), dtypes=FLOATS, values=("normal", "uniform_pos", "large_offset", "large",
                                                               "near_max", "tiny", "zeros", "integer", "masked"))},
         dims={"M": (1, 16), "L": (1, 600)})
def logcumsumexp_scan(x):
    """torch.logcumsumexp along rows: a tl.associative_scan whose combine is a stable logaddexp
    (max + log1p(exp(min - max)), equal infinities kept) inside each 128-wide tile, the tiles chained by the running
    prefix carried in float32 -- the log-space scans of CTC and selective-scan kernels."""
    M, L = x.shape
    y = torch.empty((M, L), dtype=x.dtype, device=x.device)
    _logcumsumexp_kernel[(M,)](x, y, L, x.stride(0), x.stride(1), BLOCK=min(128, triton.next_power_of_2(L)))
    return y
