@triton.jit
def G_inference_k0(p_arg0, p_buf4):
    # looped reduction: 9 rows x 41, XBLOCK=16 RBLOCK=16, 2 pass(es) (online softmax: buf3 beside buf0)
    xoffset = tl.program_id(0) * 16
    xindex = xoffset + tl.arange(0, 16)[:, None]
    xmask = xindex < 9
    rbase = tl.arange(0, 16)[None, :]
    acc0 = tl.full([16, 16], float("-inf"), tl.float32)
    acc1 = tl.full([16, 16], 0.0, tl.float32)
    for roffset in range(0, 41, 16):
        rindex = roffset + rbase
        idx2 = (rindex + (41 * xindex))
        rmask = rindex < 41
        tmp3 = tl.load(p_arg0 + idx2, xmask & rmask, other=0, eviction_policy='evict_last')
        tmp4 = tl.full([1, 1], float("-inf"), tl.float32)
        tmp5 = tl.where(rmask, tmp3, tmp4)
        tmp6 = _td_maximum(acc0, tmp5)
        tmp7 = tmp3 - tmp6
        tmp8 = tl.exp(tmp7)
        tmp9 = tl.full([1, 1], 0.0, tl.float32)
        tmp10 = tl.where(rmask, tmp8, tmp9)
        tmp11 = tl.exp(acc0 - tmp6)
        acc1 = tl.where(tmp6 == float('-inf'), 0.0, acc1 * tmp11 + tmp10)
        acc0 = tmp6
    tmp12 = tl.max(acc0, 1)[:, None]
    tmp13 = acc0 != acc0
    tmp14 = tl.max(tmp13.to(tl.int32), 1)[:, None] > 0
    tmp15 = tl.full([1, 1], float("nan"), tl.float32)
    tmp16 = tl.where(tmp14, tmp15, tmp12)
    tmp17 = tl.where(acc0 == float('-inf'), 0.0, acc1 * tl.exp(acc0 - tmp16))
    tmp18 = tl.sum(tmp17, 1)[:, None]
    tmp19 = tl.where(tmp16 == float('-inf'), tmp15, tmp18)
    for roffset in range(0, 41, 16):
        rindex = roffset + rbase
        idx20 = (rindex + (41 * xindex))
        rmask = rindex < 41
        tmp21 = tl.load(p_arg0 + idx20, xmask & rmask, other=0, eviction_policy='evict_first')
        tmp22 = tmp21 - tmp16
        tmp23 = tl.exp(tmp22)
        tmp24 = tmp23 / tmp19
        tl.store(p_buf4 + idx20, tmp24, xmask & rmask)
