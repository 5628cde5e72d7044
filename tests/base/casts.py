"""One Triton kernel that converts a tensor to another dtype by ``x.to(...)``: the casts the interpreter's
corrections (``test_interpreter``) and the compiled rule they reproduce (``test_float8_rule``) are checked with."""
import torch
import triton
import triton.language as tl


@triton.jit
def _cast_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs, x.to(y_ptr.dtype.element_ty), mask=offs < n)


def cast(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``x`` converted to ``dtype`` by the kernel, on ``x``'s device."""
    y = torch.empty(x.shape, dtype=dtype, device=x.device)
    _cast_kernel[(1,)](x, y, x.numel(), BLOCK=triton.next_power_of_2(max(x.numel(), 1)))
    return y
