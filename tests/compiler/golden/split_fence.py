@triton.jit
def G_inference_k0_partial(p_arg0, p_buf0_partials, p_buf1_partials, p_arrivals, p_buf0, p_buf1):
    # split reduction, partial pass: 1 rows x 4099 in 4 chunks of 1152, XBLOCK=1 RBLOCK=128
    # the last of a row block's 4 programs to finish reduces their partials (an arrival count per row block)
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
    tl.debug_barrier()
    arrived13 = tl.atomic_add(p_arrivals + tl.program_id(0), 1, sem='acq_rel')
    if arrived13 == 3:
        tl.debug_barrier()
        sbase = tl.arange(0, 4)[None, :]
        tmp14 = tl.load(p_buf0_partials + (sbase * 1 + xindex), cache_modifier='.cg')
        idx16 = 0 + 0 * xindex
        tmp15 = tl.sum(tmp14, 1)[:, None]
        tl.store(p_buf0 + idx16, tmp15)
        tmp17 = tl.load(p_buf1_partials + (sbase * 1 + xindex), cache_modifier='.cg')
        tmp18 = tl.max(tmp17, 1)[:, None]
        tmp19 = tmp17 != tmp17
        tmp20 = tl.max(tmp19.to(tl.int32), 1)[:, None] > 0
        tmp21 = tl.where(tmp20, tmp11, tmp18)
        tl.store(p_buf1 + idx16, tmp21)
        tl.store(p_arrivals + tl.program_id(0), 0)
