@triton.jit
def G_forward_k0(p_arg0, p_arg1, p_arg2, p_buf10):
    # looped reduction: 9 rows x 41, XBLOCK=16 RBLOCK=16, 3 pass(es)
    xoffset = tl.program_id(0) * 16
    xindex = xoffset + tl.arange(0, 16)[:, None]
    xmask = xindex < 9
    rbase = tl.arange(0, 16)[None, :]
    acc0 = tl.full([16, 16], 0.0, tl.float32)
    idx3 = (41 * xindex)
    tmp4 = tl.load(p_arg0 + idx3, xmask, other=0, eviction_policy='evict_last')
    for roffset in range(0, 41, 16):
        rindex = roffset + rbase
        idx1 = (rindex + (41 * xindex))
        rmask = rindex < 41
        tmp2 = tl.load(p_arg0 + idx1, xmask & rmask, other=0, eviction_policy='evict_last')
        tmp5 = tmp4 - tmp4
        tmp6 = tl.full([1, 1], 0.0, tl.float32)
        tmp7 = tmp5 == tmp6
        tmp8 = tl.where(tmp7, tmp4, tmp6)
        tmp9 = tmp2 - tmp8
        tmp10 = tl.where(rmask, tmp9, tmp6)
        acc0 = acc0 + tmp10
    tmp11 = tl.sum(acc0, 1)[:, None]
    acc12 = tl.full([16, 16], 0.0, tl.float32)
    acc13 = tl.full([16, 16], 0.0, tl.float32)
    idx16 = (41 * xindex)
    tmp17 = tl.load(p_arg0 + idx16, xmask, other=0, eviction_policy='evict_last')
    for roffset in range(0, 41, 16):
        rindex = roffset + rbase
        idx14 = (rindex + (41 * xindex))
        rmask = rindex < 41
        tmp15 = tl.load(p_arg0 + idx14, xmask & rmask, other=0, eviction_policy='evict_last')
        tmp18 = tmp17 - tmp17
        tmp19 = tl.full([1, 1], 0.0, tl.float32)
        tmp20 = tmp18 == tmp19
        tmp21 = tl.where(tmp20, tmp17, tmp19)
        tmp22 = tl.full([1, 1], 41.0, tl.float32)
        tmp23 = tmp11 / tmp22
        tmp24 = tmp21 + tmp23
        tmp25 = tmp15 - tmp24
        tmp26 = tmp25 * tmp25
        tmp27 = tl.where(rmask, tmp26, tmp19)
        acc12 = acc12 + tmp27
        tmp28 = tl.where(rmask, tmp25, tmp19)
        acc13 = acc13 + tmp28
    tmp29 = tl.sum(acc12, 1)[:, None]
    tmp30 = tl.sum(acc13, 1)[:, None]
    idx33 = (41 * xindex)
    tmp34 = tl.load(p_arg0 + idx33, xmask, other=0, eviction_policy='evict_last')
    for roffset in range(0, 41, 16):
        rindex = roffset + rbase
        idx31 = (rindex + (41 * xindex))
        rmask = rindex < 41
        tmp32 = tl.load(p_arg0 + idx31, xmask & rmask, other=0, eviction_policy='evict_first')
        tmp61 = tl.load(p_arg1 + rindex, rmask, other=0, eviction_policy='evict_first')
        tmp63 = tl.load(p_arg2 + rindex, rmask, other=0, eviction_policy='evict_first')
        tmp35 = tmp34 - tmp34
        tmp36 = tl.full([1, 1], 0.0, tl.float32)
        tmp37 = tmp35 == tmp36
        tmp38 = tl.where(tmp37, tmp34, tmp36)
        tmp39 = tl.full([1, 1], 41.0, tl.float32)
        tmp40 = tmp11 / tmp39
        tmp41 = tmp38 + tmp40
        tmp42 = tmp30 / tmp39
        tmp43 = tmp42 - tmp42
        tmp44 = tmp43 == tmp36
        tmp45 = tl.where(tmp44, tmp42, tmp36)
        tmp46 = tmp41 + tmp45
        tmp47 = tmp32 - tmp46
        tmp48 = tmp45 * tmp39
        tmp49 = tmp48 * tmp45
        tmp50 = tmp29 - tmp49
        tmp51 = tmp50 < tmp36
        tmp52 = tl.where(tmp51, tmp36, tmp50)
        tmp53 = tmp29 - tmp29
        tmp54 = tmp53 == tmp36
        tmp55 = tl.where(tmp54, tmp52, tmp29)
        tmp56 = tmp55 / tmp39
        tmp57 = tl.full([1, 1], 1e-05, tl.float32)
        tmp58 = tmp56 + tmp57
        tmp59 = tl.rsqrt(tmp58)
        tmp60 = tmp47 * tmp59
        tmp62 = tmp60 * tmp61
        tmp64 = tmp62 + tmp63
        tl.store(p_buf10 + idx31, tmp64, xmask & rmask)

@triton.jit
def G_backward_k0(p_arg2, p_arg1, p_arg0, p_buf3, p_buf4, p_buf5, p_buf18):
    # looped reduction: 9 rows x 41, XBLOCK=16 RBLOCK=16, 4 pass(es)
    xoffset = tl.program_id(0) * 16
    xindex = xoffset + tl.arange(0, 16)[:, None]
    xmask = xindex < 9
    rbase = tl.arange(0, 16)[None, :]
    acc0 = tl.full([16, 16], 0.0, tl.float32)
    acc1 = tl.full([16, 16], 0.0, tl.float32)
    idx9 = (41 * xindex)
    tmp10 = tl.load(p_arg0 + idx9, xmask, other=0, eviction_policy='evict_last')
    for roffset in range(0, 41, 16):
        rindex = roffset + rbase
        idx2 = (rindex + (41 * xindex))
        rmask = rindex < 41
        tmp3 = tl.load(p_arg2 + idx2, xmask & rmask, other=0, eviction_policy='evict_last')
        tmp4 = tl.load(p_arg1 + rindex, rmask, other=0, eviction_policy='evict_last')
        tmp8 = tl.load(p_arg0 + idx2, xmask & rmask, other=0, eviction_policy='evict_last')
        tmp5 = tmp3 * tmp4
        tmp6 = tl.full([1, 1], 0.0, tl.float32)
        tmp7 = tl.where(rmask, tmp5, tmp6)
        acc0 = acc0 + tmp7
        tmp11 = tmp10 - tmp10
        tmp12 = tmp11 == tmp6
        tmp13 = tl.where(tmp12, tmp10, tmp6)
        tmp14 = tmp8 - tmp13
        tmp15 = tl.where(rmask, tmp14, tmp6)
        acc1 = acc1 + tmp15
    tmp16 = tl.sum(acc0, 1)[:, None]
    tmp17 = tl.sum(acc1, 1)[:, None]
    tl.store(p_buf3 + xindex, tmp17, xmask)
    acc18 = tl.full([16, 16], 0.0, tl.float32)
    acc19 = tl.full([16, 16], 0.0, tl.float32)
    idx22 = (41 * xindex)
    tmp23 = tl.load(p_arg0 + idx22, xmask, other=0, eviction_policy='evict_last')
    for roffset in range(0, 41, 16):
        rindex = roffset + rbase
        idx20 = (rindex + (41 * xindex))
        rmask = rindex < 41
        tmp21 = tl.load(p_arg0 + idx20, xmask & rmask, other=0, eviction_policy='evict_last')
        tmp24 = tmp23 - tmp23
        tmp25 = tl.full([1, 1], 0.0, tl.float32)
        tmp26 = tmp24 == tmp25
        tmp27 = tl.where(tmp26, tmp23, tmp25)
        tmp28 = tl.full([1, 1], 41.0, tl.float32)
        tmp29 = tmp17 / tmp28
        tmp30 = tmp27 + tmp29
        tmp31 = tmp21 - tmp30
        tmp32 = tmp31 * tmp31
        tmp33 = tl.where(rmask, tmp32, tmp25)
        acc18 = acc18 + tmp33
        tmp34 = tl.where(rmask, tmp31, tmp25)
        acc19 = acc19 + tmp34
    tmp35 = tl.sum(acc18, 1)[:, None]
    tmp36 = tl.sum(acc19, 1)[:, None]
    tl.store(p_buf4 + xindex, tmp35, xmask)
    tl.store(p_buf5 + xindex, tmp36, xmask)
    acc37 = tl.full([16, 16], 0.0, tl.float32)
    idx43 = (41 * xindex)
    tmp44 = tl.load(p_arg0 + idx43, xmask, other=0, eviction_policy='evict_last')
    for roffset in range(0, 41, 16):
        rindex = roffset + rbase
        idx38 = (rindex + (41 * xindex))
        rmask = rindex < 41
        tmp39 = tl.load(p_arg2 + idx38, xmask & rmask, other=0, eviction_policy='evict_last')
        tmp40 = tl.load(p_arg1 + rindex, rmask, other=0, eviction_policy='evict_last')
        tmp42 = tl.load(p_arg0 + idx38, xmask & rmask, other=0, eviction_policy='evict_last')
        tmp41 = tmp39 * tmp40
        tmp45 = tmp44 - tmp44
        tmp46 = tl.full([1, 1], 0.0, tl.float32)
        tmp47 = tmp45 == tmp46
        tmp48 = tl.where(tmp47, tmp44, tmp46)
        tmp49 = tl.full([1, 1], 41.0, tl.float32)
        tmp50 = tmp17 / tmp49
        tmp51 = tmp48 + tmp50
        tmp52 = tmp36 / tmp49
        tmp53 = tmp52 - tmp52
        tmp54 = tmp53 == tmp46
        tmp55 = tl.where(tmp54, tmp52, tmp46)
        tmp56 = tmp51 + tmp55
        tmp57 = tmp42 - tmp56
        tmp58 = tmp55 * tmp49
        tmp59 = tmp58 * tmp55
        tmp60 = tmp35 - tmp59
        tmp61 = tmp60 < tmp46
        tmp62 = tl.where(tmp61, tmp46, tmp60)
        tmp63 = tmp35 - tmp35
        tmp64 = tmp63 == tmp46
        tmp65 = tl.where(tmp64, tmp62, tmp35)
        tmp66 = tmp65 / tmp49
        tmp67 = tl.full([1, 1], 1e-05, tl.float32)
        tmp68 = tmp66 + tmp67
        tmp69 = tl.rsqrt(tmp68)
        tmp70 = tmp57 * tmp69
        tmp71 = tmp41 * tmp70
        tmp72 = tl.where(rmask, tmp71, tmp46)
        acc37 = acc37 + tmp72
    tmp73 = tl.sum(acc37, 1)[:, None]
    idx100 = (41 * xindex)
    tmp101 = tl.load(p_arg0 + idx100, xmask, other=0, eviction_policy='evict_last')
    for roffset in range(0, 41, 16):
        rindex = roffset + rbase
        idx93 = (rindex + (41 * xindex))
        rmask = rindex < 41
        tmp94 = tl.load(p_arg2 + idx93, xmask & rmask, other=0, eviction_policy='evict_first')
        tmp95 = tl.load(p_arg1 + rindex, rmask, other=0, eviction_policy='evict_first')
        tmp99 = tl.load(p_arg0 + idx93, xmask & rmask, other=0, eviction_policy='evict_first')
        tmp74 = tl.full([1, 1], 41.0, tl.float32)
        tmp75 = tmp36 / tmp74
        tmp76 = tmp75 - tmp75
        tmp77 = tl.full([1, 1], 0.0, tl.float32)
        tmp78 = tmp76 == tmp77
        tmp79 = tl.where(tmp78, tmp75, tmp77)
        tmp80 = tmp79 * tmp74
        tmp81 = tmp80 * tmp79
        tmp82 = tmp35 - tmp81
        tmp83 = tmp82 < tmp77
        tmp84 = tl.where(tmp83, tmp77, tmp82)
        tmp85 = tmp35 - tmp35
        tmp86 = tmp85 == tmp77
        tmp87 = tl.where(tmp86, tmp84, tmp35)
        tmp88 = tmp87 / tmp74
        tmp89 = tl.full([1, 1], 1e-05, tl.float32)
        tmp90 = tmp88 + tmp89
        tmp91 = tl.rsqrt(tmp90)
        tmp92 = tmp91 / tmp74
        tmp96 = tmp94 * tmp95
        tmp97 = tmp96 * tmp74
        tmp98 = tmp97 - tmp16
        tmp102 = tmp101 - tmp101
        tmp103 = tmp102 == tmp77
        tmp104 = tl.where(tmp103, tmp101, tmp77)
        tmp105 = tmp17 / tmp74
        tmp106 = tmp104 + tmp105
        tmp107 = tmp106 + tmp79
        tmp108 = tmp99 - tmp107
        tmp109 = tmp108 * tmp91
        tmp110 = tmp109 * tmp73
        tmp111 = tmp98 - tmp110
        tmp112 = tmp92 * tmp111
        tl.store(p_buf18 + idx93, tmp112, xmask & rmask)

@triton.jit
def G_backward_k1(p_arg2, p_arg0, p_buf3, p_buf5, p_buf4, p_buf20, p_buf21):
    # looped reduction: 41 rows x 9, XBLOCK=64 RBLOCK=16, 1 pass(es)
    xoffset = tl.program_id(0) * 64
    xindex = xoffset + tl.arange(0, 64)[:, None]
    xmask = xindex < 41
    rbase = tl.arange(0, 16)[None, :]
    acc0 = tl.full([64, 16], 0.0, tl.float32)
    acc1 = tl.full([64, 16], 0.0, tl.float32)
    for roffset in range(0, 9, 16):
        rindex = roffset + rbase
        idx2 = ((41 * rindex) + xindex)
        rmask = rindex < 9
        tmp3 = tl.load(p_arg2 + idx2, xmask & rmask, other=0, eviction_policy='evict_first')
        tmp4 = tl.load(p_arg0 + idx2, xmask & rmask, other=0, eviction_policy='evict_first')
        idx5 = (41 * rindex)
        tmp6 = tl.load(p_arg0 + idx5, rmask, other=0, eviction_policy='evict_first')
        tmp11 = tl.load(p_buf3 + rindex, rmask, other=0, eviction_policy='evict_first')
        tmp15 = tl.load(p_buf5 + rindex, rmask, other=0, eviction_policy='evict_first')
        tmp22 = tl.load(p_buf4 + rindex, rmask, other=0, eviction_policy='evict_first')
        tmp7 = tmp6 - tmp6
        tmp8 = tl.full([1, 1], 0.0, tl.float32)
        tmp9 = tmp7 == tmp8
        tmp10 = tl.where(tmp9, tmp6, tmp8)
        tmp12 = tl.full([1, 1], 41.0, tl.float32)
        tmp13 = tmp11 / tmp12
        tmp14 = tmp10 + tmp13
        tmp16 = tmp15 / tmp12
        tmp17 = tmp16 - tmp16
        tmp18 = tmp17 == tmp8
        tmp19 = tl.where(tmp18, tmp16, tmp8)
        tmp20 = tmp14 + tmp19
        tmp21 = tmp4 - tmp20
        tmp23 = tmp19 * tmp12
        tmp24 = tmp23 * tmp19
        tmp25 = tmp22 - tmp24
        tmp26 = tmp25 < tmp8
        tmp27 = tl.where(tmp26, tmp8, tmp25)
        tmp28 = tmp22 - tmp22
        tmp29 = tmp28 == tmp8
        tmp30 = tl.where(tmp29, tmp27, tmp22)
        tmp31 = tmp30 / tmp12
        tmp32 = tl.full([1, 1], 1e-05, tl.float32)
        tmp33 = tmp31 + tmp32
        tmp34 = tl.rsqrt(tmp33)
        tmp35 = tmp21 * tmp34
        tmp36 = tmp3 * tmp35
        tmp37 = tl.where(rmask, tmp36, tmp8)
        acc0 = acc0 + tmp37
        tmp38 = tl.where(rmask, tmp3, tmp8)
        acc1 = acc1 + tmp38
    tmp39 = tl.sum(acc0, 1)[:, None]
    tmp40 = tl.sum(acc1, 1)[:, None]
    tl.store(p_buf20 + xindex, tmp39, xmask)
    tl.store(p_buf21 + xindex, tmp40, xmask)
