"""harness.lanes: a lane's hang limit and GPU (the end-to-end lane behaviour is in test_campaign.py; what a lane
counts of its examples, in test_coverage.py)."""
from __future__ import annotations


def test_lanes_sharing_a_gpu_get_that_many_times_the_hang_limit(monkeypatch):
    """Lanes on one GPU run their kernels in turn: a 7 s example timed out at 120 s with 14 lanes on one H100.
    Each lane's executor gets lanes-per-GPU times the hang limit; one lane per GPU and the interpreter keep it."""
    import torch

    from tritondiff.base import device
    from tritondiff.harness import lanes
    from tritondiff.harness.config import config

    class Campaign:
        example_timeout_s = None
        workers = 14

    if device.MODE != "cuda":
        assert lanes.lanes_per_gpu(14) == 1                      # the interpreter: lanes share no GPU
    monkeypatch.setattr(device, "MODE", "cuda")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert [lanes.lanes_per_gpu(w) for w in (1, 2, 3, 14)] == [1, 1, 2, 7]
    monkeypatch.delenv("TRITONDIFF_COMPILE_WORKERS", raising=False)
    monkeypatch.setattr(lanes.os, "cpu_count", lambda: 32)
    assert lanes.lane_env(3, 14) == {"CUDA_VISIBLE_DEVICES": "1", "TRITONDIFF_COMPILE_WORKERS": "2"}
    monkeypatch.setenv("TRITONDIFF_COMPILE_WORKERS", "6")                  # the user's choice stands
    assert lanes.lane_env(3, 14) == {"CUDA_VISIBLE_DEVICES": "1"}
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5")
    assert lanes.lanes_per_gpu(14) == 14
    monkeypatch.setattr(lanes, "LaneExecutor", lambda env, timeout, stop: timeout)
    assert lanes.Lane(Campaign(), 0).executor == 14 * config.example_timeout_s
    Campaign.example_timeout_s = 10.0
    assert lanes.Lane(Campaign(), 1).executor == 140.0
