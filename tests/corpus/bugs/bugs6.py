"""More buggy kernels (see bugs.py .. bugs5.py): a Welford merge that weights a masked tail tile as if full,
an instance norm with Bessel's correction, a paged-KV read that takes the logical block for the physical
one, ALiBi slopes from the power-of-two formula for every head count, a top-2 router that never renormalises,
a bilinear resize without the half-pixel offset, a log-cumsum-exp scan whose carry forgets the tiles before
the last and a partial rotary embedding that pairs dimensions across half the head instead of half the
rotary part.  Every subject here must FAIL."""
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


# --------------------------------------------------------------------------- Welford merge, tile counted as full
@triton.jit
def _bn_stats_tile_merge(x_ptr, mean_ptr, var_ptr, N, HW, W, sxn, sxc, sxh, sxw, BLOCK: tl.constexpr):
    c = tl.program_id(0).to(tl.int64)
    mean = tl.zeros((), dtype=tl.float32)
    m2 = tl.zeros((), dtype=tl.float32)
    cnt = tl.zeros((), dtype=tl.float32)
    for n in range(0, N):
        base = x_ptr + n * sxn + c * sxc
        for off in range(0, HW, BLOCK):
            p = off + tl.arange(0, BLOCK)
            m = p < HW
            x = tl.load(base + (p // W) * sxh + (p % W) * sxw, mask=m, other=0.0).to(tl.float32)
            valid = tl.sum(m.to(tl.float32), axis=0)
            t_mean = tl.sum(x, axis=0) / valid
            t_m2 = tl.sum(tl.where(m, (x - t_mean) * (x - t_mean), 0.0), axis=0)
            # BUG: Chan's merge of the running (mean, M2, count) with this tile's weights the tile by its
            # nominal size BLOCK; only a full tile holds BLOCK elements, a masked tail holds `valid`
            t_n = BLOCK * 1.0
            tot = cnt + t_n
            delta = t_mean - mean
            mean += delta * (t_n / tot)
            m2 += t_m2 + delta * delta * cnt * (t_n / tot)
            cnt = tot
    tl.store(mean_ptr + c, mean)
    tl.store(var_ptr + c, m2 / cnt)


def _bn_stats_ref(x):
    var, mean = torch.var_mean(_acc(x), dim=(0, 2, 3), unbiased=False)
    return mean.to(torch.float32), var.to(torch.float32)


@subject(reference=_bn_stats_ref, inputs={"x": tensor(("N", "C", "H", "W"), dtypes=FLOATS)},
         dims={"N": (1, 4), "C": (1, 12), "H": (1, 24), "W": (1, 24)})
def bug_welford_merge_tile_counted_full(x):
    """BatchNorm2d training statistics (mean and biased variance per channel over N, H, W) by Chan's parallel
    Welford merge of h*w tiles into a running (mean, M2, count), each tile's statistics exact but its weight
    in the merge its nominal size, BLOCK = min(128, next_pow2(h*w)): every tile is full when h*w is a multiple
    of the block (16x16, 32x32 feature maps, the power-of-two test image), and then it is exact; for 7x7, 14x14
    or 28x28 maps the tail tile counts as full, over-weighting its mean and inflating the count."""
    N, C, H, W = x.shape
    mean = torch.empty(C, dtype=torch.float32, device=x.device)
    var = torch.empty(C, dtype=torch.float32, device=x.device)
    _bn_stats_tile_merge[(C,)](x, mean, var, N, H * W, W, *x.stride(), BLOCK=min(128, triton.next_power_of_2(H * W)))
    return mean, var


# --------------------------------------------------------------------------- instance norm, unbiased variance
IN_EPS = 1e-5


@triton.jit
def _instance_norm_unbiased(x_ptr, w_ptr, b_ptr, y_ptr, C, HW, W, sxn, sxc, sxh, sxw, sw, sb, eps,
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
    # BUG: Bessel's correction (torch.var's default, unbiased=True); normalisation layers divide by HW
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / (HW - 1) + eps)
    w = tl.load(w_ptr + c * sw).to(tl.float32)
    b = tl.load(b_ptr + c * sb).to(tl.float32)
    for off in range(0, HW, BLOCK):
        p = off + tl.arange(0, BLOCK)
        m = p < HW
        x = tl.load(base + (p // W) * sxh + (p % W) * sxw, mask=m, other=0.0).to(tl.float32)
        tl.store(y_ptr + nc * HW + p, ((x - mean) * rstd * w + b).to(y_ptr.dtype.element_ty), mask=m)


@subject(reference=lambda x, weight, bias: F.instance_norm(x, weight=weight, bias=bias, eps=IN_EPS),
         inputs={"x": tensor(("N", "C", "H", "W"), dtypes=FLOATS), "weight": tensor(("C",), dtype_like="x"),
                 "bias": tensor(("C",), dtype_like="x")},
         dims={"N": (1, 3), "C": (1, 6), "H": (1, 40), "W": (1, 40)}, where=lambda H, W: H * W > 1)
def bug_instance_norm_unbiased_variance(x, weight, bias):
    """An InstanceNorm2d forward whose variance divides by h*w - 1 (written after torch.var(x), whose default is
    unbiased): the output is scaled by sqrt((h*w - 1) / (h*w)), 1 - 1 / (2 h w) -- on a 64x64 test image
    0.01 %, inside a half-precision test's tolerance, but 1 % on a 7x7 map and 29 % on a plane of two."""
    N, C, H, W = x.shape
    y = torch.empty((N, C, H, W), dtype=x.dtype, device=x.device)
    _instance_norm_unbiased[(N * C,)](x, weight, bias, y, C, H * W, W, *x.stride(), weight.stride(0),
                                      bias.stride(0), IN_EPS, BLOCK=min(256, triton.next_power_of_2(H * W)))
    return y


# --------------------------------------------------------------------------- paged KV: logical block as physical
@triton.jit
def _paged_gather_logical(cache_ptr, table_ptr, lens_ptr, out_ptr, H, D, S, MAXB,
                          scb, scs, sch, scd, stb, stm, BS: tl.constexpr, BLOCK_S: tl.constexpr,
                          BLOCK_D: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    h = tl.program_id(2).to(tl.int64)
    s = tl.program_id(1) * BLOCK_S + tl.arange(0, BLOCK_S)
    d = tl.arange(0, BLOCK_D)
    seq_len = tl.load(lens_ptr + b)
    sm = s < S
    logical = s // BS
    # BUG: the sequence's blocks are taken to be physical blocks b * MAXB + logical (the layout of a contiguous
    # cache); the block table (table_ptr, stb, stm) is never read
    phys = b * MAXB + logical
    slot = s % BS
    m = (sm & (s < seq_len))[:, None] & (d[None, :] < D)
    v = tl.load(cache_ptr + phys[:, None] * scb + slot[:, None] * scs + h * sch + d[None, :] * scd, mask=m,
                other=0.0)
    tl.store(out_ptr + ((b * S + s[:, None]) * H + h) * D + d[None, :], v, mask=sm[:, None] & (d[None, :] < D))


def _block_table(keys, B, MAXB):
    return torch.argsort(keys.reshape(-1), stable=True)[:B * MAXB].reshape(B, MAXB).to(torch.int32)


def _seq_lens(lens, MAXB, BS):
    return (lens.to(torch.int64) % (MAXB * BS + 1)).to(torch.int32)


def _paged_gather_ref(cache, keys, lens, n_blocks):
    NB, BS, H, D = cache.shape
    B = lens.shape[0]
    table = _block_table(keys, B, n_blocks).long()
    seq = _seq_lens(lens, n_blocks, BS).long()
    s = torch.arange(n_blocks * BS, device=cache.device)
    out = cache[table[:, s // BS], s % BS]
    return out.masked_fill((s[None, :] >= seq[:, None])[:, :, None, None], 0)


@subject(reference=_paged_gather_ref,
         inputs={"cache": tensor(("NB", "BS", "H", "D"), dtypes=FLOATS), "keys": tensor(("NB",), dtypes=("int64",),
                                                                                       low=0, high=50),
                 "lens": tensor(("B",), dtypes=("int32", "int64"), low=0, high=1000), "n_blocks": dim("MAXB")},
         dims={"B": (1, 4), "MAXB": (1, 6), "NB": (1, 30), "BS": (1, 16), "H": (1, 4), "D": (1, 64)},
         where=lambda B, MAXB, NB: NB >= B * MAXB)
def bug_paged_kv_logical_block_as_physical(cache, keys, lens, n_blocks):
    """A paged KV-cache gather (vLLM's block table: token s of sequence b in physical block table[b, s // BS])
    that computes the physical block as b * max_blocks + s // BS: exactly right while the allocator hands out
    blocks in order (a fresh cache in a single-request test, where the table is the identity), wrong as soon
    as blocks are freed and reused out of order -- here, any shuffled table."""
    NB, BS, H, D = cache.shape
    B = lens.shape[0]
    table = _block_table(keys, B, n_blocks)
    seq = _seq_lens(lens, n_blocks, BS)
    S = n_blocks * BS
    out = torch.empty((B, S, H, D), dtype=cache.dtype, device=cache.device)
    _paged_gather_logical[(B, triton.cdiv(S, 16), H)](cache, table, seq, out, H, D, S, n_blocks, *cache.stride(),
                                                      *table.stride(), BS=BS, BLOCK_S=16,
                                                      BLOCK_D=triton.next_power_of_2(D))
    return out


# --------------------------------------------------------------------------- ALiBi slopes for powers of two only
def _alibi_slopes(n):
    def pow2(k):
        start = 2.0 ** (-(2.0 ** -(math.log2(k) - 3)))
        return [start * start ** i for i in range(k)]
    if math.log2(n).is_integer():
        return pow2(n)
    closest = 2 ** math.floor(math.log2(n))
    return pow2(closest) + _alibi_slopes(2 * closest)[0::2][:n - closest]


@triton.jit
def _alibi_softmax_pow2(s_ptr, p_ptr, H, M, N, ssb, ssh, ssm, ssn, sm_scale, BLOCK_M: tl.constexpr,
                        BLOCK_N: tl.constexpr):
    bh = tl.program_id(0).to(tl.int64)
    b = bh // H
    h = bh % H
    # BUG: 2^(-8 (h + 1) / H), the geometric sequence of the paper's power-of-two case, for every head count;
    # for other counts the paper takes the closest power of two's slopes and interleaves the rest
    slope = tl.exp2(-8.0 * (h.to(tl.float32) + 1.0) / H)
    rows = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    rm = rows < M
    qpos = rows + (N - M)
    ok = rm[:, None] & (cols[None, :] < N) & (cols[None, :] <= qpos[:, None])
    s = tl.load(s_ptr + b * ssb + h * ssh + rows[:, None] * ssm + cols[None, :] * ssn, mask=ok,
                other=0.0).to(tl.float32)
    z = tl.where(ok, s * sm_scale + slope * (cols[None, :] - qpos[:, None]).to(tl.float32), -float("inf"))
    mx = tl.max(z, axis=1)
    mx = tl.where(mx == -float("inf"), 0.0, mx)
    e = tl.exp(z - mx[:, None])
    p = e / tl.sum(e, axis=1)[:, None]
    tl.store(p_ptr + bh * M * N + rows[:, None] * N + cols[None, :], p.to(p_ptr.dtype.element_ty),
             mask=rm[:, None] & (cols[None, :] < N))


def _alibi_ref(scores, sm_scale):
    B, H, M, N = scores.shape
    s = _acc(scores)
    slopes = torch.tensor(_alibi_slopes(H), dtype=s.dtype, device=s.device)
    qpos = torch.arange(M, device=s.device)[:, None] + (N - M)
    kpos = torch.arange(N, device=s.device)[None, :]
    z = s * sm_scale + slopes[:, None, None] * (kpos - qpos).to(s.dtype)
    return torch.softmax(z.masked_fill(kpos > qpos, float("-inf")), dim=-1).to(scores.dtype)


@subject(reference=_alibi_ref,
         inputs={"scores": tensor(("B", "H", "M", "N"), dtypes=FLOATS, nonfinite=False),
                 "sm_scale": st.sampled_from((1.0, 0.125, 0.0883883))},
         dims={"B": (1, 2), "H": (1, 12), "M": (1, 48), "N": (1, 96)}, where=lambda M, N: M <= N)
def bug_alibi_slopes_power_of_two_only(scores, sm_scale):
    """ALiBi causal attention probabilities whose in-kernel slopes are 2^(-8 (h + 1) / H) for any head count:
    the paper's formula for a power of two, so 8-, 16- and 32-head tests (BLOOM-560m, MPT-7b) pass, while a
    12-, 40- or 112-head model (BLOOM-176b) gets a different, denser geometric sequence -- every head after the
    first attends with the wrong distance penalty."""
    B, H, M, N = scores.shape
    p = torch.empty((B, H, M, N), dtype=scores.dtype, device=scores.device)
    _alibi_softmax_pow2[(B * H, triton.cdiv(M, 16))](scores, p, H, M, N, *scores.stride(), float(sm_scale),
                                                    BLOCK_M=16, BLOCK_N=triton.next_power_of_2(N))
    return p


# --------------------------------------------------------------------------- top-2 router not renormalised
@triton.jit
def _router_top2_no_renorm(x_ptr, w_ptr, idx_ptr, T, E, sxt, sxe, BLOCK_T: tl.constexpr, BLOCK_E: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    cols = tl.arange(0, BLOCK_E)
    rm = rows < T
    m = rm[:, None] & (cols[None, :] < E)
    x = tl.load(x_ptr + rows[:, None].to(tl.int64) * sxt + cols[None, :] * sxe, mask=m,
                other=-float("inf")).to(tl.float32)
    mx = tl.max(x, axis=1)
    e = tl.where(m, tl.exp(x - mx[:, None]), 0.0)
    p = e / tl.sum(e, axis=1)[:, None]
    i1 = tl.argmax(tl.where(m, x, -float("inf")), axis=1, tie_break_left=True)
    i2 = tl.argmax(tl.where(m & (cols[None, :] != i1[:, None]), x, -float("inf")), axis=1, tie_break_left=True)
    chosen = (cols[None, :] == i1[:, None]) | (cols[None, :] == i2[:, None])
    # BUG: the chosen experts keep their softmax over all E experts (normalised over every expert, not the
    # two chosen): the weights sum to p1 + p2 < 1 unless E == 2
    w = tl.where(chosen & m, p, 0.0)
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
def bug_router_top2_not_renormalised(logits):
    """A Mixtral-style router (softmax, top-2, the two weights renormalised to 1) ported from a model that
    does not renormalise (Qwen2-MoE's norm_topk_prob=False, Switch's top-1): the chosen weights stay
    normalised over all experts.  Right for a two-expert test layer, and the expert ids are always right;
    with 8 experts and near-uniform router logits each token's output is scaled by about 1/4."""
    T, E = logits.shape
    w = torch.empty((T, E), dtype=torch.float32, device=logits.device)
    idx = torch.empty((T, 2), dtype=torch.int64, device=logits.device)
    _router_top2_no_renorm[(triton.cdiv(T, 16),)](logits, w, idx, T, E, logits.stride(0), logits.stride(1),
                                                  BLOCK_T=16, BLOCK_E=triton.next_power_of_2(E))
    return w, idx


# --------------------------------------------------------------------------- bilinear without the half-pixel offset
@triton.jit
def _src_index_no_half_pixel(dst, scale, in_size, ALIGN: tl.constexpr):
    # BUG: align_corners=False maps output pixel centres to input centres, (dst + 0.5) * scale - 0.5 clamped at
    # 0; this uses dst * scale for both conventions (the corner-aligned / nearest-neighbour formula)
    src = dst.to(tl.float32) * scale
    i0 = tl.minimum(src.to(tl.int32), in_size - 1)
    i1 = tl.minimum(i0 + 1, in_size - 1)
    return i0, i1, src - i0.to(tl.float32)


@triton.jit
def _bilinear_no_half_pixel(x_ptr, y_ptr, C, H, W, OH, OW, sxn, sxc, sxh, sxw, scale_h, scale_w,
                            ALIGN: tl.constexpr, BLOCK: tl.constexpr):
    nc = tl.program_id(0).to(tl.int64)
    n = nc // C
    c = nc % C
    o = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    om = o < OH * OW
    oh = o // OW
    ow = o % OW
    h0, h1, lh = _src_index_no_half_pixel(oh, scale_h, H, ALIGN)
    w0, w1, lw = _src_index_no_half_pixel(ow, scale_w, W, ALIGN)
    base = x_ptr + n * sxn + c * sxc
    x00 = tl.load(base + h0 * sxh + w0 * sxw, mask=om, other=0.0).to(tl.float32)
    x01 = tl.load(base + h0 * sxh + w1 * sxw, mask=om, other=0.0).to(tl.float32)
    x10 = tl.load(base + h1 * sxh + w0 * sxw, mask=om, other=0.0).to(tl.float32)
    x11 = tl.load(base + h1 * sxh + w1 * sxw, mask=om, other=0.0).to(tl.float32)
    y = (x00 * (1.0 - lw) + x01 * lw) * (1.0 - lh) + (x10 * (1.0 - lw) + x11 * lw) * lh
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
def bug_bilinear_no_half_pixel_offset(x, out_h, out_w, align_corners):
    """A bilinear F.interpolate whose source coordinate is dst * in / out for align_corners=False too, without
    the half-pixel shift (dst + 0.5) * in / out - 0.5: right with align_corners=True and for a same-size resize
    (and a constant image hides it); a 2x upsample samples every output a quarter of an input pixel too far
    from the origin (the misalignment TF1's resize_bilinear was known for)."""
    N, C, H, W = x.shape
    y = torch.empty((N, C, out_h, out_w), dtype=x.dtype, device=x.device)
    BLOCK = min(256, triton.next_power_of_2(out_h * out_w))
    _bilinear_no_half_pixel[(N * C, triton.cdiv(out_h * out_w, BLOCK))](
        x, y, C, H, W, out_h, out_w, *x.stride(), _bilinear_scale(H, out_h, align_corners),
        _bilinear_scale(W, out_w, align_corners), ALIGN=bool(align_corners), BLOCK=BLOCK)
    return y


# --------------------------------------------------------------------------- log-cumsum-exp carry not chained
@triton.jit
def _logaddexp(a, b):
    mx = tl.maximum(a, b)
    mn = tl.minimum(a, b)
    d = tl.where(mx == mn, 0.0, mn - mx)
    return mx + libdevice.log1p(tl.exp(d))


@triton.jit
def _logcumsumexp_carry_local(x_ptr, y_ptr, L, sxm, sxl, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    carry = tl.full((), -float("inf"), tl.float32)
    for off in range(0, L, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        mask = cols < L
        x = tl.load(x_ptr + row * sxm + cols * sxl, mask=mask, other=-float("inf")).to(tl.float32)
        local = tl.associative_scan(x, 0, _logaddexp)
        out = _logaddexp(carry, local)
        tl.store(y_ptr + row * L + cols, out.to(y_ptr.dtype.element_ty), mask=mask)
        # BUG: the next carry is this tile's own total (the local scan's last element), not the running prefix
        # (out's): the third tile on forgets every tile before the previous one
        carry = tl.max(tl.where(mask, local, -float("inf")), axis=0)


@subject(reference=lambda x: torch.logcumsumexp(x, dim=-1), inputs={"x": tensor(("M", "L"), dtypes=FLOATS)},
         dims={"M": (1, 16), "L": (1, 600)})
def bug_logcumsumexp_carry_not_chained(x):
    """A tiled log-cumsum-exp (a stable logaddexp associative scan per 128-wide tile, tiles chained by a
    carry) that carries the last tile's local total instead of the running prefix: rows of up to two tiles,
    256 elements, are exact -- a unit test's 128 or 256 -- and from element 256 on every output misses the
    mass of all tiles but the one before it (the carry of a cumsum, written for a two-tile test)."""
    M, L = x.shape
    y = torch.empty((M, L), dtype=x.dtype, device=x.device)
    _logcumsumexp_carry_local[(M,)](x, y, L, x.stride(0), x.stride(1), BLOCK=min(128, triton.next_power_of_2(L)))
    return y


# --------------------------------------------------------------------------- partial rotary paired across D / 2
@triton.jit
def _rope_row_partial(in_ptr, out_ptr, cos_ptr, sin_ptr, D, HR, sd, scr, ssr, HALF_PAIR, BLOCK_D: tl.constexpr):
    d = tl.arange(0, BLOCK_D)
    dm = d < D
    first = d < HR                                          # x1: cos, minus the partner's sin
    second = (d >= HALF_PAIR) & (d < HALF_PAIR + HR)        # x2: cos, plus the partner's sin
    rot = first | second
    j = tl.where(first, d, tl.where(second, d - HALF_PAIR, 0))
    partner = tl.where(first, d + HALF_PAIR, tl.where(second, d - HALF_PAIR, d))
    x = tl.load(in_ptr + d * sd, mask=dm, other=0.0).to(tl.float32)
    xp = tl.load(in_ptr + partner * sd, mask=dm & rot, other=0.0).to(tl.float32)
    c = tl.load(cos_ptr + j * scr, mask=dm & rot, other=1.0).to(tl.float32)
    s = tl.load(sin_ptr + j * ssr, mask=dm & rot, other=0.0).to(tl.float32)
    y = tl.where(rot, x * c + tl.where(first, -xp, xp) * s, x)   # dims past the rotary part pass through
    tl.store(out_ptr + d, y.to(out_ptr.dtype.element_ty), mask=dm)


@triton.jit
def _rope_qk_partial(q_ptr, k_ptr, cos_ptr, sin_ptr, qo_ptr, ko_ptr, H, KH, D, HR, sqt, sqh, sqd, skt, skh, skd,
                     sct, scr, sst, ssr, BLOCK_D: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    hh = tl.program_id(1)
    # BUG: NeoX pairs dim i with i + rotary_dim / 2; this pairs it with i + head_dim / 2 (the full-rotary
    # layout), so with rotary_dim < head_dim the second half of the rotary part is never rotated and a
    # pass-through slice is rotated in its place
    half_pair = D // 2
    if hh < H:
        _rope_row_partial(q_ptr + t * sqt + hh * sqh, qo_ptr + (t * H + hh) * D, cos_ptr + t * sct,
                          sin_ptr + t * sst, D, HR, sqd, scr, ssr, half_pair, BLOCK_D)
    else:
        _rope_row_partial(k_ptr + t * skt + (hh - H) * skh, ko_ptr + (t * KH + hh - H) * D, cos_ptr + t * sct,
                          sin_ptr + t * sst, D, HR, skd, scr, ssr, half_pair, BLOCK_D)


def _partial_rope_ref(q, k, cos, sin):
    hr = cos.shape[-1]
    c, s = _acc(cos)[:, None, :], _acc(sin)[:, None, :]

    def rot(x):
        x1, x2, rest = _acc(x[..., :hr]), _acc(x[..., hr:2 * hr]), x[..., 2 * hr:]
        return torch.cat([(x1 * c - x2 * s).to(x.dtype), (x2 * c + x1 * s).to(x.dtype), rest], dim=-1)
    return rot(q), rot(k)


@subject(reference=_partial_rope_ref,
         inputs={"q": tensor(("T", "H", "D"), dtypes=FLOATS), "k": tensor(("T", "KH", "D"), dtype_like="q"),
                 "cos": tensor(("T", "HR"), dtypes=("float32",), low=-1.0, high=1.0),
                 "sin": tensor(("T", "HR"), dtypes=("float32",), low=-1.0, high=1.0)},
         dims={"T": (1, 32), "H": (1, 4), "KH": (1, 4), "D": (2, 128), "HR": (1, 64)},
         where=lambda D, HR: D % 2 == 0 and 2 * HR <= D)
def bug_partial_rope_pairs_across_head_dim(q, k, cos, sin):
    """A fused NeoX-style rotary embedding of q and k (one launch, heads of both on the grid's second axis)
    with partial rotary (GPT-NeoX's rotary_pct, Phi's partial_rotary_factor: only the first rotary_dim =
    2 * cos.shape[-1] dims rotate) that pairs dim i with i + head_dim / 2: identical to the right pairing
    i + rotary_dim / 2 whenever rotary_dim == head_dim (Llama, every full-rotary test), wrong for GPT-NeoX-20B
    (rotary_pct 0.25) and Phi-2 (0.4)."""
    T, H, D = q.shape
    KH = k.shape[1]
    HR = cos.shape[1]
    qo = torch.empty((T, H, D), dtype=q.dtype, device=q.device)
    ko = torch.empty((T, KH, D), dtype=k.dtype, device=k.device)
    _rope_qk_partial[(T, H + KH)](q, k, cos, sin, qo, ko, H, KH, D, HR, *q.stride(), *k.stride(), *cos.stride(),
                                  *sin.stride(), BLOCK_D=triton.next_power_of_2(D))
    return qo, ko
