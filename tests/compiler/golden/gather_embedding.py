@triton.jit
def G_inference_k0(p_arg0, p_arg1, p_arg2, p_buf1):
    # pointwise over 35 elements, XBLOCK=64
    xoffset = tl.program_id(0) * 64
    xindex = xoffset + tl.arange(0, 64)
    xmask = xindex < 35
    idx0 = (xindex // 5)
    tmp1 = tl.load(p_arg0 + idx0, xmask, other=0)
    ind2 = tl.where(tmp1 < 0, tmp1 + 8, tmp1)
    tmp3 = (0 <= ind2) & (ind2 < 8)
    tl.device_assert(tmp3, "index out of bounds: expected -8 <= index < 8")
    idx4 = ((5 * ind2) + (xindex % 5))
    tmp5 = tl.load(p_arg1 + idx4, xmask & tmp3, other=0)
    tmp6 = tl.load(p_arg2 + xindex, xmask, other=0)
    tmp7 = tmp5 * tmp6
    tl.store(p_buf1 + xindex, tmp7, xmask)
