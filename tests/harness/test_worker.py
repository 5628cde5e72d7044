"""harness.worker: long-lived isolation worker (ok / error / crash / hang, recovery, no orphans)."""
from __future__ import annotations

import os
import signal
import threading
import time

import pytest
import torch

import tritondiff.base.device  # noqa: F401  (device decision before triton)
import triton
import triton.language as tl

from tritondiff.harness.exc import UsageError, WorkerStartupError
from tritondiff.harness.worker import Worker


@triton.jit
def _scale_kernel(x_ptr, out_ptr, n, factor, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * factor, mask=mask)


def scale_in_worker(x: torch.Tensor, factor: float):
    """Target run inside the worker: launches a Triton kernel (interpreted on CPU, compiled on a GPU)."""
    x = x.to(tritondiff.base.device.torch_device())
    out = torch.empty_like(x)
    _scale_kernel[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), factor, BLOCK=64)
    return out.cpu(), os.environ.get("TRITON_INTERPRET")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture(scope="module")
def worker():
    with Worker(env={"TRITONDIFF_TEST_MARK": "41"}) as w:
        yield w


def test_value_round_trip_and_env(worker):
    assert worker.call("operator:add", 2, 3, timeout=30).value == 5
    r = worker.call("builtins:sorted", [3, 1, 2], reverse=True, timeout=30)
    assert (r.status, r.value, r.error) == ("ok", [3, 2, 1], None)
    assert r.seconds >= 0
    assert worker.call("os:getenv", "TRITONDIFF_TEST_MARK", timeout=30).value == "41"


def test_worker_is_long_lived(worker):
    first = worker.call("os:getpid", timeout=30).value
    second = worker.call("os:getpid", timeout=30).value
    assert first == second == worker.pid
    assert first != os.getpid()


def test_exception_is_error_with_traceback(worker):
    pid = worker.call("os:getpid", timeout=30).value
    r = worker.call("math:sqrt", -1.0, timeout=30)
    assert r.status == "error"
    assert "ValueError: math domain error" in r.error and "Traceback" in r.error
    assert worker.call("os:getpid", timeout=30).value == pid  # an exception does not cost the worker


def test_unpicklable_return_is_error(worker):
    r = worker.call("builtins:eval", "lambda: 1", timeout=30)
    assert r.status == "error" and "cannot be pickled" in r.error
    assert worker.call("operator:mul", 6, 7, timeout=30).value == 42


def test_segfault_is_crash_then_recovers(worker):
    old = worker.call("os:getpid", timeout=30).value
    r = worker.call("ctypes:string_at", 0, timeout=30)
    assert r.status == "crash"
    assert "SIGSEGV" in r.error
    assert "Fatal Python error: Segmentation fault" in r.error  # faulthandler's report from the log tail
    assert not _alive(old)
    new = worker.call("os:getpid", timeout=30)
    assert new.status == "ok" and new.value != old


def test_abort_is_crash(worker):
    r = worker.call("os:abort", timeout=30)
    assert r.status == "crash" and "SIGABRT" in r.error and "Fatal Python error: Aborted" in r.error
    assert worker.call("operator:sub", 5, 3, timeout=30).value == 2


def test_output_of_the_target_does_not_disturb_the_protocol(worker):
    r = worker.call("builtins:print", "noise on stdout", timeout=30)
    assert (r.status, r.value) == ("ok", None)
    assert "noise on stdout" in open(worker.log_path).read()


def test_sleep_past_timeout_is_hang_then_recovers(worker):
    old = worker.call("os:getpid", timeout=30).value
    start = time.monotonic()
    r = worker.call("time:sleep", 60, timeout=1.0)
    assert r.status == "hang"
    assert time.monotonic() - start < 10
    assert "within 1 s" in r.error
    assert "_run_one" in r.error  # the stack dump taken before the kill
    assert not _alive(old)
    assert worker.call("operator:add", 1, 1, timeout=30).value == 2


def test_cuda_fatal_text_is_crash_and_replaces_worker(worker):
    old = worker.call("os:getpid", timeout=30).value
    r = worker.call("builtins:exec", "raise RuntimeError('CUDA error: an illegal memory access was encountered')",
                    timeout=30)
    assert r.status == "crash" and "illegal memory access" in r.error
    assert worker.call("os:getpid", timeout=30).value != old


def test_triton_kernel_runs_inside_worker(worker):
    x = torch.arange(341, dtype=torch.float32)
    r = worker.call(f"{__name__}:scale_in_worker", x, 2.5, timeout=120)
    assert r.status == "ok", r.error
    out, interpret = r.value
    assert torch.equal(out, x * 2.5)
    assert interpret == os.environ.get("TRITON_INTERPRET")


def test_ctrl_c_in_parent_leaves_no_orphan(worker):
    child = worker.call("os:getpid", timeout=30).value
    main = threading.main_thread().ident
    timer = threading.Timer(0.5, signal.pthread_kill, args=(main, signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            worker.call("time:sleep", 60, timeout=30)
    finally:
        timer.cancel()
    assert not _alive(child)
    assert worker.call("operator:add", 2, 2, timeout=30).value == 4


def test_bad_arguments_are_usage_errors(worker):
    with pytest.raises(UsageError, match="package.module:function"):
        worker.call("no_colon_here", timeout=5)
    with pytest.raises(UsageError, match="timeout"):
        worker.call("operator:add", 1, 2, timeout=0)
    with pytest.raises(UsageError, match="not picklable"):
        worker.call("builtins:print", lambda: None, timeout=5)
    with pytest.raises(UsageError, match="env"):
        Worker(env={"A": 1})
    with pytest.raises(UsageError, match="startup"):
        Worker(startup="not a target")


def test_failing_startup_hook_raises():
    with Worker(startup="math:does_not_exist") as w:
        with pytest.raises(WorkerStartupError, match="does_not_exist"):
            w.call("operator:add", 1, 2, timeout=30)
        assert w.pid is None


def test_startup_hook_runs_in_each_new_worker():
    with Worker(startup="gc:disable") as w:  # a hook with a visible, cheap effect
        assert w.call("gc:isenabled", timeout=30).value is False
        assert w.call("ctypes:string_at", 0, timeout=30).status == "crash"
        assert w.call("gc:isenabled", timeout=30).value is False  # the replacement ran the hook too
