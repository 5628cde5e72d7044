"""tritondiff's torch.compile backend: ATen graphs -> loop IR -> fusion -> Triton."""
from harness import device as _device  # noqa: F401  (must precede every @triton.jit)
