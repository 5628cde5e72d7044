@triton.jit
def G_inference_k0(p_arg0, p_buf4):
    # looped reduction: 9 rows x 41, XBLOCK=16 RBLOCK=16, 3 pass(es)
    xoffset = tl.program_id(0) * 16
    xindex = xoffset + tl.arange(0, 16)[:, None]
    xmask = xindex < 9
    rbase = tl.arange(0, 16)[None, :]
    acc0 = tl.full([16, 16], float("-inf"), tl.float32)
    for roffset in range(0, 41, 16):
        rindex = roffset + rbase
        idx1 = (rindex + (41 * xindex))
        rmask = rindex < 41
        tmp2 = tl.load(p_arg0 + idx1, xmask & rmask, other=0, eviction_policy='evict_last')
        tmp3 = tl.full([1, 1], float("-inf"), tl.float32)
        tmp4 = tl.where(rmask, tmp2, tmp3)
        acc0 = _td_maximum(acc0, tmp4)
    tmp5 = tl.max(acc0, 1)[:, None]
    tmp6 = acc0 != acc0
    tmp7 = tl.max(tmp6.to(tl.int32), 1)[:, None] > 0
    tmp8 = tl.full([1, 1], float("nan"), tl.float32)
    tmp9 = tl.where(tmp7, tmp8, tmp5)
    acc10 = tl.full([16, 16], 0.0, tl.float32)
    for roffset in range(0, 41, 16):
        rindex = roffset + rbase
        idx11 = (rindex + (41 * xindex))
        rmask = rindex < 41
        tmp12 = tl.load(p_arg0 + idx11, xmask & rmask, other=0, eviction_policy='evict_last')
        tmp13 = tmp12 - tmp9
        tmp14 = tl.exp(tmp13)
        tmp15 = tl.full([1, 1], 0.0, tl.float32)
        tmp16 = tl.where(rmask, tmp14, tmp15)
        acc10 = acc10 + tmp16
    tmp17 = tl.sum(acc10, 1)[:, None]
    for roffset in range(0, 41, 16):
        rindex = roffset + rbase
        idx18 = (rindex + (41 * xindex))
        rmask = rindex < 41
        tmp19 = tl.load(p_arg0 + idx18, xmask & rmask, other=0, eviction_policy='evict_first')
        tmp20 = tmp19 - tmp9
        tmp21 = tl.exp(tmp20)
        tmp22 = tmp21 / tmp17
        tl.store(p_buf4 + idx18, tmp22, xmask & rmask)
