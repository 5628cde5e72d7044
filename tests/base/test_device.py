"""tritondiff.base.device: a sticky CUDA error is told from other errors (an out-of-memory frees up)."""
import torch

from tritondiff.base.device import device_fault

STICKY = "CUDA error: an illegal memory access was encountered\nCompile with `TORCH_USE_CUDA_DSA` ..."


def test_device_faults_are_told_from_other_errors():
    assert device_fault(RuntimeError(STICKY))
    if hasattr(torch, "AcceleratorError"):
        assert device_fault(torch.AcceleratorError(STICKY))
    assert not device_fault(RuntimeError("shape mismatch"))
    assert not device_fault(ValueError("CUDA error: looks like one, is not a RuntimeError"))
    assert not device_fault(torch.cuda.OutOfMemoryError("CUDA error: out of memory"))
