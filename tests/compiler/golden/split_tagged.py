@triton.jit
def G_inference_k0_partial(p_arg0, p_buf0_slots, p_buf1_slots, p_arrivals, p_buf0, p_buf1):
    # split reduction, partial pass: 1 rows x 4099 in 4 chunks of 1152, XBLOCK=1 RBLOCK=128
    # the last of a row block's 4 programs to count in polls their flagged partials (tagged, no fence), reduces them and zeroes them
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
    tl.atomic_xchg(p_buf0_slots + (tl.program_id(1) * 1 + xindex), (tmp7.to(tl.int32, bitcast=True).to(tl.int64) & 4294967295) | 4294967296, sem='relaxed')
    tl.atomic_xchg(p_buf1_slots + (tl.program_id(1) * 1 + xindex), (tmp12.to(tl.int32, bitcast=True).to(tl.int64) & 4294967295) | 4294967296, sem='relaxed')
    arrived13 = tl.atomic_add(p_arrivals + tl.program_id(0), 1, sem='relaxed')
    if arrived13 == 3:
        sbase = tl.arange(0, 128)[None, :]
        words14 = tl.load(p_buf0_slots + (sbase * 1 + xindex), (sbase < 4), other=4294967296, volatile=True)
        words15 = tl.load(p_buf1_slots + (sbase * 1 + xindex), (sbase < 4), other=4294967296, volatile=True)
        pending16 = tl.sum(tl.where(words14 < 4294967296, 1, 0)) + tl.sum(tl.where(words15 < 4294967296, 1, 0))
        while pending16 > 0:
            words14 = tl.load(p_buf0_slots + (sbase * 1 + xindex), (sbase < 4), other=4294967296, volatile=True)
            words15 = tl.load(p_buf1_slots + (sbase * 1 + xindex), (sbase < 4), other=4294967296, volatile=True)
            pending16 = tl.sum(tl.where(words14 < 4294967296, 1, 0)) + tl.sum(tl.where(words15 < 4294967296, 1, 0))
        idx22 = 0 + 0 * xindex
        tmp17 = (words14 & 4294967295).to(tl.int32).to(tl.float32, bitcast=True)
        tmp18 = (words15 & 4294967295).to(tl.int32).to(tl.float32, bitcast=True)
        smask = sbase < 4
        tmp19 = tl.full([1, 1], 0.0, tl.float32)
        tmp20 = tl.where(smask, tmp17, tmp19)
        tmp21 = tl.sum(tmp20, 1)[:, None]
        tl.store(p_buf0 + idx22, tmp21)
        tmp23 = tl.full([1, 1], float("-inf"), tl.float32)
        tmp24 = tl.where(smask, tmp18, tmp23)
        tmp25 = tl.max(tmp24, 1)[:, None]
        tmp26 = tmp24 != tmp24
        tmp27 = tl.max(tmp26.to(tl.int32), 1)[:, None] > 0
        tmp28 = tl.where(tmp27, tmp11, tmp25)
        tl.store(p_buf1 + idx22, tmp28)
        tl.store(p_buf0_slots + (sbase * 1 + xindex), tl.full([1, 128], 0, tl.int64), (sbase < 4))
        tl.store(p_buf1_slots + (sbase * 1 + xindex), tl.full([1, 128], 0, tl.int64), (sbase < 4))
        tl.store(p_arrivals + tl.program_id(0), 0)
