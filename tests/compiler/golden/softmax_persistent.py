@triton.jit
def G_inference_k0(p_arg0, p_buf4):
    # persistent reduction: 9 rows x 41, XBLOCK=16 RBLOCK=64, 3 pass(es)
    xoffset = tl.program_id(0) * 16
    xindex = xoffset + tl.arange(0, 16)[:, None]
    xmask = xindex < 9
    rbase = tl.arange(0, 64)[None, :]
    rindex = rbase
    rmask = rindex < 41
    idx0 = (rindex + (41 * xindex))
    tmp1 = tl.load(p_arg0 + idx0, xmask & rmask, other=0)
    tmp2 = tl.full([1, 1], float("-inf"), tl.float32)
    tmp3 = tl.where(rmask, tmp1, tmp2)
    tmp4 = tl.max(tmp3, 1)[:, None]
    tmp5 = tmp3 != tmp3
    tmp6 = tl.max(tmp5.to(tl.int32), 1)[:, None] > 0
    tmp7 = tl.full([1, 1], float("nan"), tl.float32)
    tmp8 = tl.where(tmp6, tmp7, tmp4)
    tmp9 = tmp1 - tmp8
    tmp10 = tl.exp(tmp9)
    tmp11 = tl.full([1, 1], 0.0, tl.float32)
    tmp12 = tl.where(rmask, tmp10, tmp11)
    tmp13 = tl.sum(tmp12, 1)[:, None]
    tmp14 = tmp10 / tmp13
    tl.store(p_buf4 + idx0, tmp14, xmask & rmask)
