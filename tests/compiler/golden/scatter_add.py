@triton.jit
def G_inference_k0_init(p_arg0, p_buf0):
    # initial value of the scatter buf0
    xoffset = tl.program_id(0) * 64
    xindex = xoffset + tl.arange(0, 64)
    xmask = xindex < 40
    tmp0 = tl.load(p_arg0 + xindex, xmask, other=0)
    tl.store(p_buf0 + xindex, tmp0, xmask)

@triton.jit
def G_inference_k0(p_arg2, p_arg1, p_buf0):
    # atomic adds of the scatter buf0 over [7, 5]
    xoffset = tl.program_id(0) * 64
    xindex = xoffset + tl.arange(0, 64)
    xmask = xindex < 35
    idx0 = (xindex // 5)
    tmp1 = tl.load(p_arg2 + idx0, xmask, other=0)
    ind2 = tl.where(tmp1 < 0, tmp1 + 8, tmp1)
    tmp3 = (0 <= ind2) & (ind2 < 8)
    tl.device_assert(tmp3, "index out of bounds: expected -8 <= index < 8")
    tmp4 = tl.load(p_arg1 + xindex, xmask, other=0)
    idx5 = ((5 * ind2) + (xindex % 5))
    tl.atomic_add(p_buf0 + idx5, tmp4, mask=xmask & tmp3, sem='relaxed')
