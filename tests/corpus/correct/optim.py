"""Fused optimizer steps that update parameters and state in place (declared with mutates=)."""
import torch
import tritondiff  # noqa: F401
import triton
import triton.language as tl

from tritondiff import subject, tensor

LR, B1, B2, EPS, WD, STEP = 1e-3, 0.9, 0.999, 1e-8, 0.01, 3
MOM = 0.9
BLOCK = 1024


@triton.jit
def _adam_kernel(p_ptr, g_ptr, m_ptr, v_ptr, n, lr, b1, b2, eps, wd, bc1, bc2, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    p = tl.load(p_ptr + offs, mask=mask)
    g = tl.load(g_ptr + offs, mask=mask)
    m = tl.load(m_ptr + offs, mask=mask)
    v = tl.load(v_ptr + offs, mask=mask)
    p = p * (1 - lr * wd)                     # decoupled weight decay (AdamW)
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    p = p - lr * (m / bc1) / (tl.sqrt(v / bc2) + eps)
    tl.store(p_ptr + offs, p, mask=mask)
    tl.store(m_ptr + offs, m, mask=mask)
    tl.store(v_ptr + offs, v, mask=mask)


def _adam_ref(p, g, m, v):
    p = p * (1 - LR * WD)
    m = B1 * m + (1 - B1) * g
    v = B2 * v + (1 - B2) * g * g
    p = p - LR * (m / (1 - B1 ** STEP)) / (torch.sqrt(v / (1 - B2 ** STEP)) + EPS)
    return p, m, v


@subject(reference=_adam_ref,
         inputs={"p": tensor(("N",), layouts=("contiguous",)), "g": tensor(("N",), layouts=("contiguous",)),
                 "m": tensor(("N",), layouts=("contiguous",)),
                 "v": tensor(("N",), layouts=("contiguous",), low=0.0)},
         dims={"N": (0, 1_100_000)}, mutates=("p", "m", "v"))
def adamw_step(p, g, m, v):
    # optimizer state is allocated contiguous by the optimizer itself: the declared layout says so
    n = p.numel()
    if n:
        _adam_kernel[(triton.cdiv(n, BLOCK),)](p, g, m, v, n, LR, B1, B2, EPS, WD, 1 - B1 ** STEP, 1 - B2 ** STEP,
                                                BLOCK=BLOCK)
    return p, m, v


@triton.jit
def _sgd_kernel(p_ptr, g_ptr, buf_ptr, n, lr, mom, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    g = tl.load(g_ptr + offs, mask=mask)
    buf = mom * tl.load(buf_ptr + offs, mask=mask) + g
    tl.store(buf_ptr + offs, buf, mask=mask)
    tl.store(p_ptr + offs, tl.load(p_ptr + offs, mask=mask) - lr * buf, mask=mask)


@subject(reference=lambda p, g, buf: (p - LR * (MOM * buf + g), MOM * buf + g),
         inputs={"p": tensor(("N",), layouts=("contiguous",)), "g": tensor(("N",)),
                 "buf": tensor(("N",), layouts=("contiguous",))},
         dims={"N": (0, 1_100_000)}, mutates=("p", "buf"))
def sgd_momentum_step(p, g, buf):
    n = p.numel()
    if n:
        _sgd_kernel[(triton.cdiv(n, BLOCK),)](p, g.contiguous(), buf, n, LR, MOM, BLOCK=BLOCK)
    return p, buf
