@triton.jit
def G_forward_k0(p_arg0, p_arg1, p_arg2, p_buf10):
    # persistent reduction: 64 rows x 16, XBLOCK=64 RBLOCK=16, 3 pass(es)
    xoffset = tl.program_id(0) * 64
    xindex = xoffset + tl.arange(0, 64)[:, None]
    rbase = tl.arange(0, 16)[None, :]
    rindex = rbase
    idx0 = (rindex + (16 * xindex))
    tmp1 = tl.load(p_arg0 + idx0)
    tmp2 = tl.sum(tl.where(rindex == 0, tmp1.to(tl.int32, bitcast=True), 0), 1)[:, None].to(tl.int32).to(tl.float32, bitcast=True)
    tmp3 = tmp2 - tmp2
    tmp4 = tl.full([1, 1], 0.0, tl.float32)
    tmp5 = tmp3 == tmp4
    tmp6 = tl.where(tmp5, tmp2, tmp4)
    tmp7 = tmp1 - tmp6
    tmp8 = tl.broadcast_to(tmp7, [64, 16])
    tmp9 = tl.sum(tmp8, 1)[:, None]
    tmp10 = tl.full([1, 1], 16.0, tl.float32)
    tmp11 = tmp9 / tmp10
    tmp12 = tmp6 + tmp11
    tmp13 = tmp1 - tmp12
    tmp14 = tmp13 * tmp13
    tmp15 = tl.broadcast_to(tmp14, [64, 16])
    tmp16 = tl.sum(tmp15, 1)[:, None]
    tmp17 = tl.broadcast_to(tmp13, [64, 16])
    tmp18 = tl.sum(tmp17, 1)[:, None]
    tmp19 = tmp18 / tmp10
    tmp20 = tmp19 - tmp19
    tmp21 = tmp20 == tmp4
    tmp22 = tl.where(tmp21, tmp19, tmp4)
    tmp23 = tmp12 + tmp22
    tmp24 = tmp1 - tmp23
    tmp25 = tmp22 * tmp10
    tmp26 = tmp25 * tmp22
    tmp27 = tmp16 - tmp26
    tmp28 = tmp27 < tmp4
    tmp29 = tl.where(tmp28, tmp4, tmp27)
    tmp30 = tmp16 - tmp16
    tmp31 = tmp30 == tmp4
    tmp32 = tl.where(tmp31, tmp29, tmp16)
    tmp33 = tmp32 / tmp10
    tmp34 = tl.full([1, 1], 1e-05, tl.float32)
    tmp35 = tmp33 + tmp34
    tmp36 = tl.rsqrt(tmp35)
    tmp37 = tmp24 * tmp36
    tmp38 = tl.load(p_arg1 + rindex)
    tmp39 = tmp37 * tmp38
    tmp40 = tl.load(p_arg2 + rindex)
    tmp41 = tmp39 + tmp40
    tl.store(p_buf10 + idx0, tmp41)

@triton.jit
def G_backward_k0_partial(p_arg2, p_arg1, p_arg0, p_buf18, p_buf20_partials, p_buf21_partials):
    # mixed-order reduction: 64 rows x 16, rows reduced in registers, 2 column reduction(s) into 1 partials of 64 rows, XBLOCK=64 RBLOCK=16
    rbase = tl.arange(0, 16)[None, :]
    rindex = rbase
    acc0 = tl.full([64, 16], 0.0, tl.float32)
    acc1 = tl.full([64, 16], 0.0, tl.float32)
    tmp4 = tl.load(p_arg1 + rindex, eviction_policy='evict_last')
    for xstep in range(0, 64, 64):
        xindex = tl.program_id(0) * 64 + xstep + tl.arange(0, 64)[:, None]
        idx2 = (rindex + (16 * xindex))
        tmp3 = tl.load(p_arg2 + idx2)
        tmp8 = tl.load(p_arg0 + idx2)
        tmp5 = tmp3 * tmp4
        tmp6 = tl.broadcast_to(tmp5, [64, 16])
        tmp7 = tl.sum(tmp6, 1)[:, None]
        tmp9 = tl.sum(tl.where(rindex == 0, tmp8.to(tl.int32, bitcast=True), 0), 1)[:, None].to(tl.int32).to(tl.float32, bitcast=True)
        tmp10 = tmp9 - tmp9
        tmp11 = tl.full([1, 1], 0.0, tl.float32)
        tmp12 = tmp10 == tmp11
        tmp13 = tl.where(tmp12, tmp9, tmp11)
        tmp14 = tmp8 - tmp13
        tmp15 = tl.broadcast_to(tmp14, [64, 16])
        tmp16 = tl.sum(tmp15, 1)[:, None]
        tmp17 = tl.full([1, 1], 16.0, tl.float32)
        tmp18 = tmp16 / tmp17
        tmp19 = tmp13 + tmp18
        tmp20 = tmp8 - tmp19
        tmp21 = tmp20 * tmp20
        tmp22 = tl.broadcast_to(tmp21, [64, 16])
        tmp23 = tl.sum(tmp22, 1)[:, None]
        tmp24 = tl.broadcast_to(tmp20, [64, 16])
        tmp25 = tl.sum(tmp24, 1)[:, None]
        tmp26 = tmp25 / tmp17
        tmp27 = tmp26 - tmp26
        tmp28 = tmp27 == tmp11
        tmp29 = tl.where(tmp28, tmp26, tmp11)
        tmp30 = tmp19 + tmp29
        tmp31 = tmp8 - tmp30
        tmp32 = tmp29 * tmp17
        tmp33 = tmp32 * tmp29
        tmp34 = tmp23 - tmp33
        tmp35 = tmp34 < tmp11
        tmp36 = tl.where(tmp35, tmp11, tmp34)
        tmp37 = tmp23 - tmp23
        tmp38 = tmp37 == tmp11
        tmp39 = tl.where(tmp38, tmp36, tmp23)
        tmp40 = tmp39 / tmp17
        tmp41 = tl.full([1, 1], 1e-05, tl.float32)
        tmp42 = tmp40 + tmp41
        tmp43 = tl.rsqrt(tmp42)
        tmp44 = tmp31 * tmp43
        tmp45 = tmp5 * tmp44
        tmp46 = tl.broadcast_to(tmp45, [64, 16])
        tmp47 = tl.sum(tmp46, 1)[:, None]
        tmp48 = tmp43 / tmp17
        tmp49 = tmp5 * tmp17
        tmp50 = tmp49 - tmp7
        tmp51 = tmp44 * tmp47
        tmp52 = tmp50 - tmp51
        tmp53 = tmp48 * tmp52
        tl.store(p_buf18 + idx2, tmp53)
        tmp54 = tmp3 * tmp44
        tmp55 = tl.broadcast_to(tmp54, [64, 16])
        acc0 = acc0 + tmp55
        tmp56 = tl.broadcast_to(tmp3, [64, 16])
        acc1 = acc1 + tmp56
    tmp57 = tl.sum(acc0, 0)[None, :]
    tl.store(p_buf20_partials + (tl.program_id(0) * 16 + rindex), tmp57)
    tmp58 = tl.sum(acc1, 0)[None, :]
    tl.store(p_buf21_partials + (tl.program_id(0) * 16 + rindex), tmp58)

@triton.jit
def G_backward_k0_final(p_buf20_partials, p_buf20, p_buf21_partials, p_buf21):
    # split reduction, final pass: 1 partials per row, XBLOCK=16
    xoffset = tl.program_id(0) * 16
    xindex = xoffset + tl.arange(0, 16)[:, None]
    sbase = tl.arange(0, 1)[None, :]
    tmp0 = tl.load(p_buf20_partials + (sbase * 16 + xindex))
    tmp1 = tl.sum(tmp0, 1)[:, None]
    tl.store(p_buf20 + xindex, tmp1)
    tmp2 = tl.load(p_buf21_partials + (sbase * 16 + xindex))
    tmp3 = tl.sum(tmp2, 1)[:, None]
    tl.store(p_buf21 + xindex, tmp3)
