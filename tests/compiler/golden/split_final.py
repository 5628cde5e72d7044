@triton.jit
def G_inference_k0_partial(p_arg0, p_buf0_partials, p_buf1_partials):
    # split reduction, partial pass: 1 rows x 4099 in 4 chunks of 1152, XBLOCK=1 RBLOCK=128
    xoffset = tl.program_id(0) * 1
    xindex = xoffset + tl.arange(0, 1)[:, None]
    rbase = tl.arange(0, 128)[None, :]
    rstart = tl.program_id(1) * 1152
    acc0 = tl.full([1, 128], 0.0, tl.float32)
    acc1 = tl.full([1, 128], float("-inf"), tl.float32)
    for roffset in range(0, 1152, 128):
        rindex = rstart + roffset + rbase
        rmask = rindex < 4099
        tmp2 = tl.load(p_arg0 + rindex, rmask, other=0, eviction_policy='evict_first')
        tmp3 = tl.full([1, 1], 0.0, tl.float32)
        tmp4 = tl.where(rmask, tmp2, tmp3)
        acc0 = acc0 + tmp4
        tmp5 = tl.full([1, 1], float("-inf"), tl.float32)
        tmp6 = tl.where(rmask, tmp2, tmp5)
        acc1 = _td_maximum(acc1, tmp6)
    tmp7 = tl.sum(acc0, 1)[:, None]
    tmp8 = tl.max(acc1, 1)[:, None]
    tmp9 = acc1 != acc1
    tmp10 = tl.max(tmp9.to(tl.int32), 1)[:, None] > 0
    tmp11 = tl.full([1, 1], float("nan"), tl.float32)
    tmp12 = tl.where(tmp10, tmp11, tmp8)
    tl.store(p_buf0_partials + (tl.program_id(1) * 1 + xindex), tmp7, None)
    tl.store(p_buf1_partials + (tl.program_id(1) * 1 + xindex), tmp12, None)

@triton.jit
def G_inference_k0_final(p_buf0_partials, p_buf0, p_buf1_partials, p_buf1):
    # split reduction, final pass: 4 partials per row, XBLOCK=1
    xoffset = tl.program_id(0) * 1
    xindex = xoffset + tl.arange(0, 1)[:, None]
    sbase = tl.arange(0, 4)[None, :]
    tmp0 = tl.load(p_buf0_partials + (sbase * 1 + xindex))
    tmp1 = tl.sum(tmp0, 1)[:, None]
    idx2 = 0 + 0 * xindex
    tl.store(p_buf0 + idx2, tmp1)
    tmp3 = tl.load(p_buf1_partials + (sbase * 1 + xindex))
    tmp4 = tl.max(tmp3, 1)[:, None]
    tmp5 = tmp3 != tmp3
    tmp6 = tl.max(tmp5.to(tl.int32), 1)[:, None] > 0
    tmp7 = tl.full([1, 1], float("nan"), tl.float32)
    tmp8 = tl.where(tmp6, tmp7, tmp4)
    tl.store(p_buf1 + idx2, tmp8)
