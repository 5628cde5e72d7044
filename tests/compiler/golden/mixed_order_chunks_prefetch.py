@triton.jit
def G_forward_k0(p_arg0, p_arg1, p_arg2, p_buf10):
    # persistent reduction: 64 rows x 130, XBLOCK=8 RBLOCK=256, 3 pass(es)
    xoffset = tl.program_id(0) * 8
    xindex = xoffset + tl.arange(0, 8)[:, None]
    rbase = tl.arange(0, 256)[None, :]
    rindex = rbase
    rmask = rindex < 130
    idx0 = (rindex + (130 * xindex))
    tmp1 = tl.load(p_arg0 + idx0, rmask, other=0)
    tmp2 = tl.sum(tl.where(rindex == 0, tmp1.to(tl.int32, bitcast=True), 0), 1)[:, None].to(tl.int32).to(tl.float32, bitcast=True)
    tmp3 = tmp2 - tmp2
    tmp4 = tl.full([1, 1], 0.0, tl.float32)
    tmp5 = tmp3 == tmp4
    tmp6 = tl.where(tmp5, tmp2, tmp4)
    tmp7 = tmp1 - tmp6
    tmp8 = tl.where(rmask, tmp7, tmp4)
    tmp9 = tl.sum(tmp8, 1)[:, None]
    tmp10 = tl.full([1, 1], 130.0, tl.float32)
    tmp11 = tmp9 / tmp10
    tmp12 = tmp6 + tmp11
    tmp13 = tmp1 - tmp12
    tmp14 = tmp13 * tmp13
    tmp15 = tl.where(rmask, tmp14, tmp4)
    tmp16 = tl.sum(tmp15, 1)[:, None]
    tmp17 = tl.where(rmask, tmp13, tmp4)
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
    tmp38 = tl.load(p_arg1 + rindex, rmask, other=0)
    tmp39 = tmp37 * tmp38
    tmp40 = tl.load(p_arg2 + rindex, rmask, other=0)
    tmp41 = tmp39 + tmp40
    tl.store(p_buf10 + idx0, tmp41, rmask)

@triton.jit
def G_backward_k0_partial(p_arg2, p_arg1, p_arg0, p_buf18, p_buf20_partials, p_buf21_partials):
    # mixed-order reduction: 64 rows x 130, rows reduced in registers, 2 column reduction(s) into 2 partials of 32 rows, XBLOCK=8 RBLOCK=256
    rbase = tl.arange(0, 64)[None, :]
    rindex0 = rbase
    rindex1 = 64 + rbase
    rindex2 = 128 + rbase
    rmask2 = rindex2 < 130
    acc0 = tl.full([8, 64], 0.0, tl.float32)
    acc1 = tl.full([8, 64], 0.0, tl.float32)
    acc2 = tl.full([8, 64], 0.0, tl.float32)
    acc3 = tl.full([8, 64], 0.0, tl.float32)
    acc4 = tl.full([8, 64], 0.0, tl.float32)
    acc5 = tl.full([8, 64], 0.0, tl.float32)
    xindex_nx = tl.program_id(0) * 32 + 0 + tl.arange(0, 8)[:, None]
    idx6_nx = (rindex0 + (130 * xindex_nx))
    tmp7_nx = tl.load(p_arg2 + idx6_nx)
    tmp11_nx = tl.load(p_arg0 + idx6_nx)
    idx12_nx = (130 * xindex_nx)
    tmp13_nx = tl.load(p_arg0 + idx12_nx)
    idx21_nx = (rindex1 + (130 * xindex_nx))
    tmp22_nx = tl.load(p_arg2 + idx21_nx)
    tmp26_nx = tl.load(p_arg0 + idx21_nx)
    idx30_nx = (rindex2 + (130 * xindex_nx))
    tmp31_nx = tl.load(p_arg2 + idx30_nx, rmask2, other=0)
    tmp35_nx = tl.load(p_arg0 + idx30_nx, rmask2, other=0)
    for xstep in range(0, 32, 8):
        tmp7 = tmp7_nx
        tmp11 = tmp11_nx
        tmp13 = tmp13_nx
        tmp22 = tmp22_nx
        tmp26 = tmp26_nx
        tmp31 = tmp31_nx
        tmp35 = tmp35_nx
        xindex_nx = tl.program_id(0) * 32 + tl.minimum(xstep + 8, 24) + tl.arange(0, 8)[:, None]
        idx6_nx = (rindex0 + (130 * xindex_nx))
        tmp7_nx = tl.load(p_arg2 + idx6_nx)
        tmp11_nx = tl.load(p_arg0 + idx6_nx)
        idx12_nx = (130 * xindex_nx)
        tmp13_nx = tl.load(p_arg0 + idx12_nx)
        idx21_nx = (rindex1 + (130 * xindex_nx))
        tmp22_nx = tl.load(p_arg2 + idx21_nx)
        tmp26_nx = tl.load(p_arg0 + idx21_nx)
        idx30_nx = (rindex2 + (130 * xindex_nx))
        tmp31_nx = tl.load(p_arg2 + idx30_nx, rmask2, other=0)
        tmp35_nx = tl.load(p_arg0 + idx30_nx, rmask2, other=0)
        xindex = tl.program_id(0) * 32 + xstep + tl.arange(0, 8)[:, None]
        idx6 = (rindex0 + (130 * xindex))
        tmp8 = tl.load(p_arg1 + rindex0)
        idx12 = (130 * xindex)
        idx21 = (rindex1 + (130 * xindex))
        tmp23 = tl.load(p_arg1 + rindex1)
        idx30 = (rindex2 + (130 * xindex))
        tmp32 = tl.load(p_arg1 + rindex2, rmask2, other=0)
        tmp9 = tmp7 * tmp8
        tmp10 = tl.broadcast_to(tmp9, [8, 64])
        tmp14 = tmp13 - tmp13
        tmp15 = tl.full([1, 1], 0.0, tl.float32)
        tmp16 = tmp14 == tmp15
        tmp17 = tl.where(tmp16, tmp13, tmp15)
        tmp18 = tmp11 - tmp17
        tmp19 = tl.broadcast_to(tmp18, [8, 64])
        tmp20 = tl.broadcast_to(tmp7, [8, 64])
        acc3 = acc3 + tmp20
        tmp24 = tmp22 * tmp23
        tmp25 = tl.broadcast_to(tmp24, [8, 64])
        tmp27 = tmp26 - tmp17
        tmp28 = tl.broadcast_to(tmp27, [8, 64])
        tmp29 = tl.broadcast_to(tmp22, [8, 64])
        acc4 = acc4 + tmp29
        tmp33 = tmp31 * tmp32
        tmp34 = tl.where(rmask2, tmp33, tmp15)
        tmp36 = tmp35 - tmp17
        tmp37 = tl.where(rmask2, tmp36, tmp15)
        tmp38 = tl.broadcast_to(tmp31, [8, 64])
        acc5 = acc5 + tmp38
        acc5 = tl.where(rmask2, acc5, tmp15)
        acc39 = tmp10
        acc39 = acc39 + tmp25
        acc39 = acc39 + tmp34
        tmp40 = tl.sum(acc39, 1)[:, None]
        acc41 = tmp19
        acc41 = acc41 + tmp28
        acc41 = acc41 + tmp37
        tmp42 = tl.sum(acc41, 1)[:, None]
        tmp43 = tl.full([1, 1], 130.0, tl.float32)
        tmp44 = tmp42 / tmp43
        tmp45 = tmp17 + tmp44
        tmp46 = tmp11 - tmp45
        tmp47 = tmp46 * tmp46
        tmp48 = tl.broadcast_to(tmp47, [8, 64])
        tmp49 = tl.broadcast_to(tmp46, [8, 64])
        tmp50 = tmp26 - tmp45
        tmp51 = tmp50 * tmp50
        tmp52 = tl.broadcast_to(tmp51, [8, 64])
        tmp53 = tl.broadcast_to(tmp50, [8, 64])
        tmp54 = tmp35 - tmp45
        tmp55 = tmp54 * tmp54
        tmp56 = tl.where(rmask2, tmp55, tmp15)
        tmp57 = tl.where(rmask2, tmp54, tmp15)
        acc58 = tmp48
        acc58 = acc58 + tmp52
        acc58 = acc58 + tmp56
        tmp59 = tl.sum(acc58, 1)[:, None]
        acc60 = tmp49
        acc60 = acc60 + tmp53
        acc60 = acc60 + tmp57
        tmp61 = tl.sum(acc60, 1)[:, None]
        tmp62 = tmp61 / tmp43
        tmp63 = tmp62 - tmp62
        tmp64 = tmp63 == tmp15
        tmp65 = tl.where(tmp64, tmp62, tmp15)
        tmp66 = tmp45 + tmp65
        tmp67 = tmp11 - tmp66
        tmp68 = tmp65 * tmp43
        tmp69 = tmp68 * tmp65
        tmp70 = tmp59 - tmp69
        tmp71 = tmp70 < tmp15
        tmp72 = tl.where(tmp71, tmp15, tmp70)
        tmp73 = tmp59 - tmp59
        tmp74 = tmp73 == tmp15
        tmp75 = tl.where(tmp74, tmp72, tmp59)
        tmp76 = tmp75 / tmp43
        tmp77 = tl.full([1, 1], 1e-05, tl.float32)
        tmp78 = tmp76 + tmp77
        tmp79 = tl.rsqrt(tmp78)
        tmp80 = tmp67 * tmp79
        tmp81 = tmp9 * tmp80
        tmp82 = tl.broadcast_to(tmp81, [8, 64])
        tmp83 = tmp7 * tmp80
        tmp84 = tl.broadcast_to(tmp83, [8, 64])
        acc0 = acc0 + tmp84
        tmp85 = tmp26 - tmp66
        tmp86 = tmp85 * tmp79
        tmp87 = tmp24 * tmp86
        tmp88 = tl.broadcast_to(tmp87, [8, 64])
        tmp89 = tmp22 * tmp86
        tmp90 = tl.broadcast_to(tmp89, [8, 64])
        acc1 = acc1 + tmp90
        tmp91 = tmp35 - tmp66
        tmp92 = tmp91 * tmp79
        tmp93 = tmp33 * tmp92
        tmp94 = tl.where(rmask2, tmp93, tmp15)
        tmp95 = tmp31 * tmp92
        tmp96 = tl.broadcast_to(tmp95, [8, 64])
        acc2 = acc2 + tmp96
        acc2 = tl.where(rmask2, acc2, tmp15)
        acc97 = tmp82
        acc97 = acc97 + tmp88
        acc97 = acc97 + tmp94
        tmp98 = tl.sum(acc97, 1)[:, None]
        tmp99 = tmp79 / tmp43
        tmp100 = tmp9 * tmp43
        tmp101 = tmp100 - tmp40
        tmp102 = tmp80 * tmp98
        tmp103 = tmp101 - tmp102
        tmp104 = tmp99 * tmp103
        tl.store(p_buf18 + idx6, tmp104)
        tmp105 = tmp24 * tmp43
        tmp106 = tmp105 - tmp40
        tmp107 = tmp86 * tmp98
        tmp108 = tmp106 - tmp107
        tmp109 = tmp99 * tmp108
        tl.store(p_buf18 + idx21, tmp109)
        tmp110 = tmp33 * tmp43
        tmp111 = tmp110 - tmp40
        tmp112 = tmp92 * tmp98
        tmp113 = tmp111 - tmp112
        tmp114 = tmp99 * tmp113
        tl.store(p_buf18 + idx30, tmp114, rmask2)
    tmp115 = tl.sum(acc0, 0)[None, :]
    tl.store(p_buf20_partials + (tl.program_id(0) * 130 + rindex0), tmp115)
    tmp116 = tl.sum(acc1, 0)[None, :]
    tl.store(p_buf20_partials + (tl.program_id(0) * 130 + rindex1), tmp116)
    tmp117 = tl.sum(acc2, 0)[None, :]
    tl.store(p_buf20_partials + (tl.program_id(0) * 130 + rindex2), tmp117, rmask2)
    tmp118 = tl.sum(acc3, 0)[None, :]
    tl.store(p_buf21_partials + (tl.program_id(0) * 130 + rindex0), tmp118)
    tmp119 = tl.sum(acc4, 0)[None, :]
    tl.store(p_buf21_partials + (tl.program_id(0) * 130 + rindex1), tmp119)
    tmp120 = tl.sum(acc5, 0)[None, :]
    tl.store(p_buf21_partials + (tl.program_id(0) * 130 + rindex2), tmp120, rmask2)

@triton.jit
def G_backward_k0_final(p_buf20_partials, p_buf20, p_buf21_partials, p_buf21):
    # split reduction, final pass: 2 partials per row, XBLOCK=256
    xoffset = tl.program_id(0) * 256
    xindex = xoffset + tl.arange(0, 256)[:, None]
    xmask = xindex < 130
    sbase = tl.arange(0, 2)[None, :]
    tmp0 = tl.load(p_buf20_partials + (sbase * 130 + xindex), xmask, other=0.0)
    tmp1 = tl.full([1, 1], 0.0, tl.float32)
    tmp2 = tl.where(xmask, tmp0, tmp1)
    tmp3 = tl.sum(tmp2, 1)[:, None]
    tl.store(p_buf20 + xindex, tmp3, xmask)
    tmp4 = tl.load(p_buf21_partials + (sbase * 130 + xindex), xmask, other=0.0)
    tmp5 = tl.where(xmask, tmp4, tmp1)
    tmp6 = tl.sum(tmp5, 1)[:, None]
    tl.store(p_buf21 + xindex, tmp6, xmask)
