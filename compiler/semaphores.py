"""Zeroed int32 counters for kernels that count their finished programs (single-launch split reductions).

Such a kernel takes a ticket from its row block's counter (an atomic add), and the program that takes the
last ticket reduces the partials and sets the counter back to 0: the counters are 0 whenever no launch of
that kind is running.  One buffer therefore serves every such kernel launched on one stream (launches on
a stream run one after another), and each (device, stream) gets its own, since launches on two streams
may overlap.  A buffer is allocated zeroed on the stream that first needs it, so the zeros are in place
before the first launch, and grows (a new zeroed buffer) when a kernel needs more counters.
"""
from __future__ import annotations

from typing import Optional

import torch

from harness import device as _device

_BUFFERS: dict[tuple, torch.Tensor] = {}
_MIN_COUNTERS = 1024


def counters(numel: int, device_index: Optional[int] = None) -> torch.Tensor:
    """At least ``numel`` zeroed int32 counters for a launch on the current stream of the execution device
    (the current CUDA device unless ``device_index`` names it)."""
    device = _device.torch_device()
    if device.type == "cuda":
        index = torch.cuda.current_device() if device_index is None else device_index
        key = (index, torch._C._cuda_getCurrentRawStream(index))
    else:
        key = (device.type, 0)
    buf = _BUFFERS.get(key)
    if buf is None or buf.numel() < numel:
        target = torch.device("cuda", key[0]) if device.type == "cuda" else device
        buf = _BUFFERS[key] = torch.zeros(max(numel, _MIN_COUNTERS), dtype=torch.int32, device=target)
    return buf


def nonzero() -> list[tuple]:
    """The (device, stream) keys whose counters are not all 0 (after a synchronize): a kernel that took
    tickets and did not set its counter back -- for tests and the harness, never on the hot path."""
    return [key for key, buf in _BUFFERS.items() if bool(buf.any())]


__all__ = ["counters", "nonzero"]
