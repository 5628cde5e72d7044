"""compiler.parallel: a graph's kernels handed to compile threads before their first launch."""
import concurrent.futures
import os

import pytest
import torch

from tritondiff import compiler
from tritondiff.base import device
from tritondiff.compiler.config import CompilerConfig
from tritondiff.compiler import parallel
from tritondiff.compiler.exc import ConfigError
from tritondiff.harness.launches import record_launches
from tests.compiler.util import assert_same


def _block(x, w, b):
    h = torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b)
    return torch.nn.functional.gelu(h).sum(-1)


def test_the_jobs_cover_every_launch_with_its_grid_and_argument_dtypes(monkeypatch):
    """A compile thread compiles the kernel the launch will find in the JIT's cache only if it compiles the same
    specialisation: the same kernel at the same grid, warps and stages, with arguments of the same dtypes.
    Every launch of a forward and backward graph (reductions, workspaces, mixed dtypes) must be one of the
    jobs, as the launch recorder saw it."""
    submitted = []
    monkeypatch.setattr(parallel, "enabled", lambda: True)
    monkeypatch.setattr(parallel, "start", lambda module, launches: submitted.extend(launches) or None)
    dev = device.torch_device()                    # CUDA tensors on a GPU: CPU ones would not reach its kernels
    x = torch.randn(37, 96, dtype=torch.float16, device=dev, requires_grad=True)
    w = torch.randn(96, dtype=torch.float16, device=dev, requires_grad=True)   # a GPU's layer norm takes one dtype
    b = torch.randn(96, dtype=torch.float16, device=dev, requires_grad=True)
    torch._dynamo.reset()
    fn = compiler.compile(_block)
    with record_launches() as rec:
        out = fn(x, w, b)
        out.float().sum().backward()
    jobs = {(kernel, tuple(grid), tuple(dtypes)) for _, kernel, dtypes, grid, _ in submitted}
    generated = [la for la in rec.launches if la.qualname.startswith("tritondiff_generated.")]
    assert generated and len({k for _, k, _, _, _ in submitted}) >= 2, submitted
    for launch in generated:                       # not the hand-written kernels an extern call may launch
        dtypes = tuple(str(a["dtype"]).removeprefix("torch.") for a in launch.args if isinstance(a, dict)
                       and "dtype" in a)
        assert (launch.kernel, tuple(launch.grid), dtypes) in jobs, (launch.kernel, launch.grid, dtypes, jobs)


def test_a_failed_job_leaves_the_launch_to_compile_it_and_is_counted():
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        jobs = parallel.Jobs({("k", 4, None): pool.submit(lambda: 1 / 0), ("j", 4, None): pool.submit(lambda: 0.5)})
        before = dict(compiler.counters)
        jobs.wait(("k", 4, None))                  # no exception: the launch compiles it itself
        jobs.wait(("j", 4, None))
        jobs.wait(("absent", 1, None))
    assert compiler.counters["parallel_compile.failed"] - before.get("parallel_compile.failed", 0) == 1
    assert compiler.counters["parallel_compile.done"] - before.get("parallel_compile.done", 0) == 1
    assert not jobs.futures


def test_the_pool_is_off_in_the_interpreter_and_at_one_worker():
    with compiler.config.patch(compile_workers=1):
        assert not parallel.enabled()
    if device.is_interpreter():
        with compiler.config.patch(compile_workers=8):
            assert not parallel.enabled()          # the interpreter compiles nothing


@pytest.mark.parametrize("value", ["abc", "0", "-2"])
def test_a_bad_worker_count_in_the_environment_names_the_variable(monkeypatch, value):
    monkeypatch.setenv("TRITONDIFF_COMPILE_WORKERS", value)
    with pytest.raises(ConfigError, match="TRITONDIFF_COMPILE_WORKERS.*positive int"):
        CompilerConfig()
    monkeypatch.setenv("TRITONDIFF_COMPILE_WORKERS", "3")
    assert CompilerConfig().compile_workers == 3


def test_the_default_is_a_thread_per_host_core_up_to_16(monkeypatch):
    monkeypatch.delenv("TRITONDIFF_COMPILE_WORKERS", raising=False)
    assert CompilerConfig().compile_workers == max(1, min(16, os.cpu_count() or 1))


def _cached_kernels(cache_dir, names: set[str]) -> set[str]:
    """The entries of Triton's cache directory holding a compiled binary of one of the kernels ``names``
    (not the hand-written kernels an extern call may launch)."""
    if not os.path.isdir(cache_dir):
        return set()
    return {d for d in os.listdir(cache_dir)
            if any(f.endswith(".cubin") and f[:-len(".cubin")] in names
                   for f in os.listdir(os.path.join(cache_dir, d)))}


@pytest.mark.gpu
@pytest.mark.skipif(device.MODE != "cuda", reason="kernels compile on a GPU only")
def test_the_launches_find_every_kernel_the_compile_threads_compiled(tmp_path, monkeypatch):
    """Cold Triton cache, four compile threads: once a graph's jobs are done, its launches compile nothing
    themselves -- between one graph's jobs finishing and the next graph's (or the end), Triton's cache gains no
    kernel.  A stand-in specialisation that missed the launch's would add one."""
    cache = tmp_path / "triton"
    monkeypatch.setenv("TRITON_CACHE_DIR", str(cache))
    dev = device.torch_device()
    x = torch.randn(37, 96, device=dev, dtype=torch.float16, requires_grad=True)
    w = torch.randn(96, device=dev, dtype=torch.float16, requires_grad=True)
    b = torch.randn(96, device=dev, dtype=torch.float16, requires_grad=True)
    snapshots, names = [], set()
    real_start = parallel.start

    def start(module, launches):
        launches = list(launches)
        names.update(kernel for _, kernel, _, _, _ in launches)
        snapshots.append(("before", _cached_kernels(cache, names)))
        jobs = real_start(module, launches)
        jobs.wait_all()                            # every job done before the graph's first launch
        snapshots.append(("after", _cached_kernels(cache, names)))
        return jobs

    monkeypatch.setattr(parallel, "start", start)
    torch._dynamo.reset()
    with compiler.config.patch(compile_workers=4, cache_dir=str(tmp_path / "generated")):
        fn = compiler.compile(_block)
        out = fn(x, w, b)
        out.float().sum().backward()
    final = _cached_kernels(cache, names)
    after = [s for kind, s in snapshots if kind == "after"]
    following = [s for kind, s in snapshots if kind == "before"][1:] + [final]
    assert len(after) == 2 and all(after), snapshots              # forward and backward, kernels compiled
    for done, next_seen in zip(after, following):
        assert next_seen == done, sorted(next_seen - done)        # the launches compiled nothing themselves
    torch._dynamo.reset()
    assert_same(out, _block(x, w, b), rtol=2e-2, atol=2e-2)
