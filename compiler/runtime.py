"""Runtime: load generated modules, allocate buffers, launch kernels, call externs.

An ``Executable`` is one graph compiled for one input signature.  It can run three ways
(``config.execution``): the Triton kernels, or the eager evaluator over the fused IR, or
over the IR as lowering produced it; buffers, extern calls and outputs are handled the
same way in all three, so their results differ only where the IR, the fusion or the
generated Triton differ.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import os
import sys
import types
import weakref
from typing import Any, Callable, Optional, Sequence

import torch

from tritondiff.base import device as _device
from tritondiff.kernels import launch as _launch

from .codegen import GeneratedModule, KernelSpec
from .buffers import FAST_EMPTY as _FAST_EMPTY
from .buffers import alloc as _alloc
from .buffers import allocations_watched as _allocations_watched
from .config import compile_options, config
from .counters import counters
from . import layouts
from . import parallel as _parallel
from .eager import evaluate_node, storage_view, write
from .exc import CompilerError, KernelCompileError
from .ir import Buffer, ComputedBuffer, ExternKernel, ExternOutput, InputBuffer, Layout, MemoryResolver, StridedView
from .ir import LoweredGraph, fill_template
from .scheduler import KernelGroup, Schedule, _extern_reads
from .templates import runtime as _gemm_runtime
from .templates.gemm import GemmTemplate


def load_module(source: str, name: str) -> tuple[types.ModuleType, str]:
    """Write ``source`` under ``config.cache_dir`` (content-addressed) and import it."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    os.makedirs(config.cache_dir, exist_ok=True)
    path = os.path.join(config.cache_dir, f"{name}_{digest}.py")
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            f.write(source)
        os.replace(tmp, path)
    module_name = f"tritondiff_generated.{name}_{digest}"
    if module_name in sys.modules:
        return sys.modules[module_name], path
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001  (any import failure is a code generation bug)
        del sys.modules[module_name]
        raise KernelCompileError(f"generated module does not import: {e}", kernel=name, path=path) from e
    return module, path


@contextlib.contextmanager
def _quiet_numpy():
    """The interpreter computes masked-off lanes too (x / 0 there is expected): silence numpy."""
    if not _device.is_interpreter():
        yield
        return
    import warnings

    import numpy
    with numpy.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield




def _compiled_launches() -> bool:
    """Kernels run compiled (a GPU), launched through ``kernels.launch.Site``; False under the interpreter."""
    return not _device.is_interpreter()


def _layouts_compiled() -> bool:
    """Kernels are compiled with register layouts to check (``Executable._owned_gate``): not under the
    interpreter, which runs each program on one thread."""
    return not _device.is_interpreter()


# The kinds of _make_fast's steps.
_LAUNCH, _ALLOC, _FREE, _CALL, _SEMAPHORE = "launch", "alloc", "free", "call", "semaphore"
_LAUNCH_OWNED = "launch, then check its compiled layout"      # a kernel with owned_loads (compiler.layouts)

_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)     # absent from CPU-only builds


class SemaphoreSlot:
    """A kernel argument of zeroed counters or slots (``KernelArg.semaphore``): ``numel`` of ``dtype``."""

    __slots__ = ("numel", "dtype")

    def __init__(self, numel: int, dtype: torch.dtype = torch.int32):
        self.numel = numel
        self.dtype = dtype

    def __repr__(self) -> str:
        return f"SemaphoreSlot({self.numel}, {self.dtype})"


class Semaphores:
    """The counters of an executable's kernels, one zeroed tensor per (kernel argument, device, stream).

    A kernel that takes counters leaves them zeroed (a split reduction's last partial program resets its
    row block's arrival count and clears its tagged partials), so the launches of one stream, which run one
    after another, reuse the same tensor and nothing is zeroed per call.  Launches on two streams could run at
    once and must not share counters: each stream gets its own.  (A CUDA graph keeps the tensor of the stream it was captured on.)"""

    def __init__(self):
        global _SEMAPHORES_SERIAL
        self._made: dict[tuple, torch.Tensor] = {}
        self.serial = _SEMAPHORES_SERIAL
        _SEMAPHORES_SERIAL += 1
        _LIVE_SEMAPHORES.add(self)

    def left_set(self) -> list[str]:
        """The counters and slots that a launch left non-zero (each launch must zero what it used)."""
        return [f"{name[0]}.{name[1]}" if isinstance(name, tuple) else str(name)
                for (name, *_), t in self._made.items() if bool(t.ne(0).any())]

    def get(self, name: Any, numel: int, device: int, dtype: torch.dtype = torch.int32) -> torch.Tensor:
        stream = _raw_stream(device) if _raw_stream is not None and _device.MODE == "cuda" else 0
        key = (name, numel, dtype, device, stream)
        t = self._made.get(key)
        if t is None:
            where = torch.device("cuda", device) if _device.MODE == "cuda" else _device.torch_device()
            t = self._made[key] = torch.zeros(numel, dtype=dtype, device=where)
            counters["semaphores_made"] += 1     # a debug count; tritondiff.harness.subjects.compiler asks semaphores_made_since
        return t


_LIVE_SEMAPHORES: "weakref.WeakSet[Semaphores]" = weakref.WeakSet()
_SEMAPHORES_SERIAL = 0


def semaphores_mark() -> int:
    """A mark for ``semaphores_left_set``: the executables made after it are the ones it looks at."""
    return _SEMAPHORES_SERIAL


def semaphores_made_since(since: int) -> bool:
    """Has an executable made since mark ``since`` made counters or slots (is its program stateful)?"""
    return any(sems._made for sems in list(_LIVE_SEMAPHORES) if sems.serial >= since)


def semaphores_left_set(since: int) -> list[str]:
    """The counters and slots that the last launch of an executable made since mark ``since`` left non-zero:
    ``Semaphores`` promises none (a split's last program zeroes its row block's count and tagged partials)."""
    return [name for sems in list(_LIVE_SEMAPHORES) if sems.serial >= since for name in sems.left_set()]


class InlineResolver(MemoryResolver):
    """Eager evaluation of the fused IR: inlined producers are recomputed, the rest loaded."""

    def __init__(self, inlined: frozenset):
        self.inlined = inlined

    def load(self, buffer: Buffer, index: tuple):
        if buffer.name in self.inlined:
            return buffer.data.inner_fn(index)
        return super().load(buffer, index)

    def load_storage(self, buffer: Buffer, offset):
        if buffer.name in self.inlined:
            from .indexing import delinearize
            return buffer.data.inner_fn(delinearize(offset, buffer.layout.size))
        return super().load_storage(buffer, offset)


def _launcher_key(spec: KernelSpec) -> tuple:
    """One launch config of a kernel: autotune variants share a kernel's name and differ in warps / stages."""
    return spec.name, spec.num_warps, spec.meta.get("num_stages")


class Executable:
    """One graph, lowered, scheduled and generated for one input signature."""

    def __init__(self, graph: LoweredGraph, sched: Schedule, generated: GeneratedModule):
        self.graph = graph
        self.sched = sched
        self.generated = generated
        self.module: Optional[types.ModuleType] = None
        self.module_path: Optional[str] = None
        self.artifacts = None            # its compiler.dump.Artifacts (set by the pipeline)
        self._last_use = self._compute_last_use()
        self._launchers: dict[tuple, tuple[Any, dict, Optional[tuple], tuple]] = {}
        self._stored: dict[str, list] = {}           # group -> the buffers it stores (allocated per call)
        self._plan: Optional[list] = None            # the Triton path's steps (_make_plan)
        self._fast: Any = None                       # its fast form on a GPU (_make_fast; False: none)
        self._input_slots = tuple((buf.name, buf.position) for buf in graph.inputs if buf is not None)
        self._constants = {const.name: const.constant for const in graph.constants}
        self.semaphores = Semaphores()
        # kernels with owned_loads: launcher key -> None (checked) or the refusal raised on every launch of it,
        # and the compiled kernels (Triton's hashes) already checked
        self._owned: dict[tuple, Optional[KernelCompileError]] = {}
        self._owned_binaries: set = set()
        self.jobs: Optional[_parallel.Jobs] = None   # its kernels compiling on threads (start_compiling)

    def ensure_loaded(self) -> None:
        if self.module is None and self.generated.kernels:
            self.module, self.module_path = load_module(self.generated.source, self.generated.name)

    def start_compiling(self) -> Optional[_parallel.Jobs]:
        """Hand every kernel this executable may launch -- each group's, each GEMM template's, each autotune
        candidate's -- to the compile threads (``compiler.parallel``); a launch waits for its own kernel only.
        None when the pool is off (the interpreter, ``config.compile_workers`` = 1)."""
        if not _parallel.enabled() or not self.generated.kernels:
            return None
        self.ensure_loaded()
        self.jobs = _parallel.start(self.module, self.compile_jobs())
        return self.jobs

    def compile_jobs(self) -> list[tuple[tuple, str, tuple[str, ...], tuple, dict]]:
        """(launch key, kernel, argument dtypes, grid, options) of every kernel it may launch, as
        ``_launcher`` will launch it: the arguments' dtypes stand in for its tensors."""
        specs = [spec for group in self.generated.kernels.values() for spec in group]
        specs += [spec for variants in self.generated.variants.values() for v in variants for spec in v.specs]
        jobs = []
        for spec in specs:
            grid = None if any(g == 0 for g in spec.grid) else tuple(spec.grid)
            dtypes = [self._arg_dtype(arg) for arg in spec.args]
            if grid is None or None in dtypes:
                continue
            jobs.append((_launcher_key(spec), spec.name, tuple(str(d).removeprefix("torch.") for d in dtypes), grid,
                         self._launch_options(spec)))
        return jobs

    def _arg_dtype(self, arg: Any) -> Optional[torch.dtype]:
        if arg.semaphore or arg.workspace:
            return arg.dtype or torch.int32
        buf = self.graph.buffers.get(arg.name)
        if buf is not None:
            return buf.layout.dtype
        const = self._constants.get(arg.name)
        return const.dtype if isinstance(const, torch.Tensor) else None

    # ---- entry point
    def __call__(self, args: Sequence[Any]) -> list:
        mode = config.execution
        if mode == "triton":
            fast = self._fast if self._fast is not None else self._make_fast()
            if fast and not _launch._observed() and not _allocations_watched():
                return fast(args)
        env = self._inputs(args)
        if mode == "triton":
            for run, frees in self._plan or self._make_plan():
                run(env)
                for name in frees:
                    env.pop(name, None)
        elif mode == "ir":
            self._run_eager(env, fused=True)
        else:
            self._run_eager(env, fused=False)
        outputs = self._outputs(args, env)
        return outputs[0] if self.graph.single_output else outputs

    def _make_plan(self) -> list[tuple[Callable[[dict], None], tuple[str, ...]]]:
        """The Triton path's steps as (run(env), buffers to free after it), worked out on the first call."""
        self.ensure_loaded()
        plan = []
        for i, step in enumerate(self.sched.steps):
            if isinstance(step, GemmTemplate):
                run = functools.partial(_gemm_runtime.run_template, self, step)
            elif isinstance(step, ExternKernel):
                run = functools.partial(self._run_extern, step)
            else:
                run = functools.partial(self._run_group, step)
            plan.append((run, tuple(self._last_use.get(i, ()))))
        self._plan = plan
        return plan

    def _make_fast(self) -> Any:
        """The Triton path for a GPU with nothing observing launches or allocations, as one loop over flat
        steps worked out on the first call: allocate a buffer (C++ allocator), relaunch a kernel's
        ``kernels.launch.Site``, free buffers, or run any other step (GEMM template, extern call, tuned
        group) as ``_make_plan`` does.  The launch check and the device are asked once per call, not per
        kernel.  False where it does not apply (the interpreter, a torch without the C++ allocator)."""
        empty = _FAST_EMPTY.get(_device.MODE)
        if not _compiled_launches() or empty is None:
            self._fast = False
            return False
        plan = self._plan or self._make_plan()
        ops: list[tuple] = []
        for step, (run, frees) in zip(self.sched.steps, plan):
            launched = self._launched_by(step)
            if launched is not None:
                stored, specs = launched
                ops.extend((_ALLOC, name, layout.size, layout.stride, layout.dtype) for name, layout in stored)
                scratch: list[tuple] = []
                for spec in specs:
                    site, _, grid, args = self._launcher(spec)
                    if grid is None:
                        continue
                    names = []
                    for name, workspace in args:
                        if isinstance(workspace, SemaphoreSlot):   # kept zeroed per stream, not allocated
                            name = (spec.name, name)
                            ops.append((_SEMAPHORE, name, workspace.numel, workspace.dtype))
                        elif workspace is not None:       # a workspace lives while its group runs
                            name = (step.name, name)
                            if name not in scratch:
                                scratch.append(name)
                                ops.append((_ALLOC, name, workspace.size, workspace.stride, workspace.dtype))
                        names.append(name)
                    ops.append((_LAUNCH_OWNED if spec.meta.get("owned_loads") else _LAUNCH, site, tuple(names),
                                spec.name, spec, _launcher_key(spec)))
                if scratch:
                    ops.append((_FREE, tuple(scratch)))
            else:
                ops.append((_CALL, run))
            if frees:
                ops.append((_FREE, frees))
        current_device = _launch._current_device
        semaphores = self.semaphores

        def run_fast(args: Sequence[Any]) -> Any:
            env = self._inputs(args)
            device = current_device()
            op = None
            try:
                for op in ops:
                    kind = op[0]
                    if kind is _LAUNCH:
                        op[1].relaunch(device, tuple([env[n] for n in op[2]]))
                    elif kind is _LAUNCH_OWNED:
                        tensors = tuple([env[n] for n in op[2]])
                        if self._owned.get(op[5], False) is not None:
                            self._owned_gate(op[4], op[5], op[1], None, {}, tensors)
                        launched = op[1].relaunch(device, tensors)
                        if launched is not None:          # a launch that compiled: a new specialisation
                            self._check_owned(op[4], op[5], launched)
                    elif kind is _ALLOC:
                        if op[1] not in env:
                            env[op[1]] = empty(op[2], op[3], op[4])
                    elif kind is _FREE:
                        for name in op[1]:
                            env.pop(name, None)
                    elif kind is _SEMAPHORE:
                        env[op[1]] = semaphores.get(op[1], op[2], device, op[3])
                    else:
                        op[1](env)
            except CompilerError:
                raise
            except Exception as e:  # noqa: BLE001  (as _launch: Triton's errors are ours to report)
                if op is None or (op[0] is not _LAUNCH and op[0] is not _LAUNCH_OWNED):
                    raise
                raise self._launch_failed(op[3], e) from e
            outputs = self._outputs(args, env)
            return outputs[0] if self.graph.single_output else outputs
        run_fast.ops = ops                        # for tests and debugging: the steps it runs
        self._fast = run_fast
        return run_fast

    def _launched_by(self, step: Any) -> Optional[tuple[list[tuple[str, Layout]], list[KernelSpec]]]:
        """(buffers it stores, kernels) of a step that is only launches -- a generated group, a GEMM template,
        either with its tuned winner once tuning ran; None for the rest (extern calls, ATen winners, steps
        still to tune), which the fast loop runs as the plan does."""
        if isinstance(step, ExternKernel) and not isinstance(step, GemmTemplate):
            return None
        specs = self.generated.kernels[step.name]
        if step.name in self.generated.variants:
            winner = _gemm_runtime.tuned_variant(self, step)
            if winner is None or winner.extern:
                return None
            specs = winner.specs
        if isinstance(step, GemmTemplate):
            return [(n, self.graph.buffers[n].layout) for n in _gemm_runtime.stored_names(self, step)], specs
        return self._stored_of(step), specs

    def steps_changed(self) -> None:
        """A step's kernels changed (tuning chose a winner): the fast loop is worked out again."""
        if self._fast:
            self._fast = None

    def _inputs(self, args: Sequence[Any]) -> dict[str, torch.Tensor]:
        env = {name: args[position] for name, position in self._input_slots}
        env.update(self._constants)
        return env

    def _outputs(self, args: Sequence[Any], env: dict) -> list:
        out = []
        for spec in self.graph.outputs:
            if spec.kind == "buffer" and spec.view is not None:
                base = env[spec.name]
                out.append(torch.as_strided(base, spec.view.size, spec.view.stride,
                                            base.storage_offset() + spec.view.offset))
            elif spec.kind == "buffer":
                out.append(env[spec.name])
            elif spec.kind == "input":
                out.append(args[spec.position])
            else:
                out.append(spec.value)
        return out

    # ---- Triton
    def _stored_of(self, group: KernelGroup) -> list[tuple[str, Layout]]:
        """(name, layout) of each buffer ``group`` stores: allocated before its kernels run."""
        stored = self._stored.get(group.name)
        if stored is None:
            stored = self._stored[group.name] = [(p.name, p.node.buf.layout) for p in group.placed
                                                 if p.name in self.sched.stored]
        return stored

    def _run_group(self, group: KernelGroup, env: dict) -> None:
        for name, layout in self._stored_of(group):
            if name not in env:
                env[name] = _alloc(layout)
        if group.name in self.generated.variants:  # autotuning (compiler.autotune)
            _gemm_runtime.run_group_tuned(self, group, env)
            return
        specs = self.generated.kernels[group.name]
        workspaces: dict[str, torch.Tensor] = {}
        for spec in specs:
            self._launch(spec, env, workspaces)

    def _launch(self, spec: KernelSpec, env: dict, workspaces: dict) -> None:
        fn, options, grid, args = self._launcher(spec)
        if grid is None:
            return
        tensors = []
        for name, workspace in args:
            if workspace is None:
                tensors.append(env[name])
                continue
            if isinstance(workspace, SemaphoreSlot):
                device = _launch._current_device() if _device.MODE == "cuda" else 0
                tensors.append(self.semaphores.get((spec.name, name), workspace.numel, device, workspace.dtype))
                continue
            ws = workspaces.get(name)
            if ws is None:
                ws = workspaces[name] = _alloc(workspace)
            tensors.append(ws)
        key = _launcher_key(spec) if spec.meta.get("owned_loads") else None
        try:
            if key and self._owned.get(key, False) is not None:
                self._owned_gate(spec, key, fn, grid, options, tuple(tensors))
            if isinstance(fn, _launch.Site):   # the compiled kernel's own launcher after the first call
                launched = fn(*tensors)
            else:
                with _quiet_numpy():
                    launched = fn[grid](*tensors, **options)
        except CompilerError:
            raise
        except Exception as e:  # noqa: BLE001  (Triton's errors have many types; all are ours to report)
            raise self._launch_failed(spec.name, e) from e
        if key and launched is not None:
            self._check_owned(spec, key, launched)

    def _owned_gate(self, spec: KernelSpec, key: tuple, fn: Any, grid: Optional[tuple], options: dict,
                    tensors: tuple) -> None:
        """Before a launch of a kernel whose volatile loads must each give an element to one thread alone
        (``meta["owned_loads"]``: ``codegen.reduction.SplitReduction._tagged_last_program``): raise the refusal
        of an earlier launch again, or, at the first launch on a GPU, compile the kernel without running it
        (Triton's ``warmup``, which the launch then finds in its cache) and check its layout, so a kernel that
        fails never runs.  The interpreter runs each program on one thread: nothing to check.  ``fn``: the JIT
        function, launched at ``grid`` with ``options``, or a ``kernels.launch.Site``, which holds all three."""
        refused = self._owned.get(key)
        if refused is not None:
            raise refused
        if not _layouts_compiled():
            self._owned[key] = None
            return
        if isinstance(fn, _launch.Site):
            fn, grid, options = fn.kernel, fn.grid, fn.meta
        warmup = getattr(fn, "warmup", None)
        compiled = warmup(*tensors, grid=grid, **options) if warmup is not None else None
        self._check_owned(spec, key, compiled, required=True)

    def _check_owned(self, spec: KernelSpec, key: tuple, launched: Any, required: bool = False) -> None:
        """Refuse the compiled kernel ``launched`` of ``spec`` (``meta["owned_loads"]``) where Triton's layout
        gives one of its volatile loads' elements to several threads, or duplicates one of those loads
        (``compiler.layouts``); a refusal is kept for every later launch of ``key``.  ``launched``: Triton's
        compiled kernel (None where a launch did not compile one, a relaunch; each new specialisation a launch
        compiles is checked too).  ``required``: no compiled kernel or no TTGIR to read is a refusal as well."""
        asm = getattr(launched, "asm", None)
        ttgir = asm.get("ttgir") if asm else None
        if ttgir is None and not required:
            return
        binary = getattr(launched, "hash", None) or id(launched)
        if binary in self._owned_binaries:
            return
        import triton
        problems = (layouts.shared_volatile_loads(ttgir, expected=spec.meta["owned_loads"]) if ttgir is not None
                    else [f"no compiled kernel with its TTGIR to check ({type(launched).__name__})"])
        if problems:
            self._owned[key] = refused = KernelCompileError(
                f"kernel {spec.name} at {spec.num_warps} warps: its last program's poll of tagged partials needs "
                f"each slot loaded once, by one thread alone, but Triton {triton.__version__} compiled "
                f"{'; '.join(problems)}, so its count and its sum could read different loads.  Compile it "
                f"under compiler.config.patch(split_last_program_sync='fence'): the fence form needs no such "
                f"layout", kernel=spec.name, path=self.module_path or "?")
            raise refused
        self._owned_binaries.add(binary)
        self._owned.setdefault(key, None)

    def _launch_failed(self, kernel: str, e: Exception) -> KernelCompileError:
        """A launch that raised (Triton's errors have many types; all are ours to report), naming its kernel."""
        return KernelCompileError(f"kernel {kernel} failed: {type(e).__name__}: {e}", kernel=kernel,
                                  path=self.module_path or "?")

    def _launcher(self, spec: KernelSpec) -> tuple[Any, dict, Optional[tuple], tuple]:
        """The kernel's JIT function (a ``kernels.launch.Site`` on a GPU), launch options, grid (None: nothing
        to launch) and arguments (name, workspace layout or None), worked out once per kernel and launch
        config: autotune variants share a kernel's name and differ in warps / stages."""
        key = _launcher_key(spec)
        launcher = self._launchers.get(key)
        if launcher is not None:
            return launcher
        if self.jobs is not None:
            self.jobs.wait(key)                  # its kernel compiled by a compile thread, in the JIT cache
        options = self._launch_options(spec)
        compiled = _compiled_launches()
        grid = None if any(g == 0 for g in spec.grid) else tuple(spec.grid)
        args = tuple((arg.name, SemaphoreSlot(arg.numel, arg.dtype) if arg.semaphore
                      else Layout.contiguous((max(arg.numel, 1),), arg.dtype) if arg.workspace else None)
                     for arg in spec.args)
        fn = getattr(self.module, spec.name)
        if compiled and grid is not None:
            fn = _launch.Site(fn, grid, **options)
        self._launchers[key] = launcher = (fn, options, grid, args)
        return launcher

    @staticmethod
    def _launch_options(spec: KernelSpec) -> dict:
        """Triton's launch options of ``spec``: the compile options, and on a GPU its warps and stages."""
        options = dict(compile_options())
        if _compiled_launches():
            options["num_warps"] = spec.num_warps
            if spec.meta.get("num_stages"):
                options["num_stages"] = spec.meta["num_stages"]
        return options

    # ---- extern calls
    def _run_extern(self, kernel: ExternKernel, env: dict) -> None:
        tensors = []
        for x in kernel.inputs:
            if isinstance(x, StridedView):
                base = env[x.buffer.name]
                tensors.append(torch.as_strided(base, x.layout.size, x.layout.stride,
                                                base.storage_offset() + x.layout.offset))
            else:
                tensors.append(env[x.name])
        args, kwargs = fill_template(kernel.template, tensors)
        result = kernel.target(*args, **kwargs)
        self._bind_extern(kernel, kernel.structure, result, env)

    def _bind_extern(self, kernel: ExternKernel, structure: Any, result: Any, env: dict) -> None:
        if isinstance(structure, ExternOutput):
            if not isinstance(result, torch.Tensor):
                raise CompilerError(f"{kernel.origin} returned {type(result).__name__}, a tensor was expected")
            want = structure.layout
            if tuple(result.shape) != want.size or result.dtype != want.dtype:
                raise CompilerError(f"{kernel.origin} returned {tuple(result.shape)} {result.dtype}, lowering "
                                    f"expected {want.size} {want.dtype}")
            if tuple(result.stride()) != want.stride and want.numel > 1:
                fixed = _alloc(want)
                fixed.copy_(result)
                result = fixed
            env[structure.name] = result
        elif isinstance(structure, (tuple, list)):
            for s, r in zip(structure, result):
                self._bind_extern(kernel, s, r, env)

    # ---- eager evaluator
    def _run_eager(self, env: dict, fused: bool) -> None:
        storages = {name: storage_view(t, self.graph.buffers[name].layout) for name, t in env.items()}
        if fused:
            resolver = InlineResolver(self.sched.inlined)
            order = []
            for step in self.sched.steps:
                if isinstance(step, GemmTemplate):  # its row reductions of A run before the GEMM
                    order.extend(p.node.buf for p in step.row_reduction_nodes)
                order.extend([step] if isinstance(step, ExternKernel) else [p.node.buf for p in step.placed])
                if isinstance(step, GemmTemplate):  # its epilogue runs after the GEMM
                    order.extend(p.node.buf for p in step.epilogue_nodes)
        else:
            resolver = MemoryResolver()
            order = list(self.graph.nodes)
        for node in order:
            if isinstance(node, ExternKernel):
                self._run_extern(node, env)
                for out in node.outputs:
                    storages[out.name] = storage_view(env[out.name], out.layout)
                continue
            value = evaluate_node(node, storages, resolver)
            tensor = _alloc(node.layout)
            flat = storage_view(tensor, node.layout)
            write(flat, node.layout, value)
            env[node.name] = tensor
            storages[node.name] = flat

    # ---- memory
    def _compute_last_use(self) -> dict[int, list[str]]:
        keep = {o.name for o in self.graph.outputs if o.kind == "buffer"}
        last: dict[str, int] = {}
        for i, step in enumerate(self.sched.steps):
            if isinstance(step, ExternKernel):
                names = _extern_reads(step)
                if isinstance(step, GemmTemplate):   # row reductions read only A, one of its inputs
                    names += [r.buffer.name for p in step.epilogue_nodes for r in p.node.info.reads]
            else:
                names = [r.buffer.name for p in step.placed for r in p.node.info.reads]
            for n in names:
                last[n] = i
        frees: dict[int, list[str]] = {}
        for name, i in last.items():
            buf = self.graph.buffers.get(name)
            if name in keep or isinstance(buf, InputBuffer) or not isinstance(buf, (ComputedBuffer, ExternOutput)):
                continue
            frees.setdefault(i, []).append(name)
        return frees

    def describe_plan(self) -> str:
        lines = []
        for i, step in enumerate(self.sched.steps):
            if isinstance(step, GemmTemplate):
                spec = self.generated.kernels[step.name][0]
                lines.append(f"{i}: launch {spec.name} grid={spec.grid} warps={spec.num_warps} GEMM template "
                             f"{spec.meta.get('config')} args={[a.name for a in spec.args]}")
            elif isinstance(step, ExternKernel):
                lines.append(f"{i}: extern {step.origin} inputs={[repr(x) for x in step.inputs]}")
            else:
                for spec in self.generated.kernels[step.name]:
                    lines.append(f"{i}: launch {spec.name} grid={spec.grid} warps={spec.num_warps} "
                                 f"args={[a.name for a in spec.args]} meta="
                                 f"{ {k: v for k, v in spec.meta.items() if k not in ('comments', 'workspaces')} }")
            if self._last_use.get(i):
                lines.append(f"   free {self._last_use[i]}")
        return "\n".join(lines)
