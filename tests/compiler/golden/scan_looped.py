@triton.jit
def G_inference_k0(p_arg0, p_buf0):
    # scan: 9 rows x 41, XBLOCK=16 RBLOCK=64
    xoffset = tl.program_id(0) * 16
    xindex = xoffset + tl.arange(0, 16)[:, None]
    xmask = xindex < 9
    rbase = tl.arange(0, 64)[None, :]
    rindex = rbase
    rmask = rindex < 41
    idx0 = (rindex + (41 * xindex))
    tmp1 = tl.load(p_arg0 + idx0, xmask & rmask, other=0)
    tmp2 = tl.cumsum(tl.broadcast_to(tmp1, [16, 64]), 1)
    tl.store(p_buf0 + idx0, tmp2, xmask & rmask)
