"""Every knob of the kernels package, in one typed place, plus the launch-table lookup.

Environment variables are read here and nowhere else.  Tests change knobs with
``config.patch(...)``, which validates names and values and restores the previous
values on exit (the shared :class:`harness.config.TypedConfig`).

Launch parameters (block sizes, warps, programs per SM) live in one table per
kernel file, keyed by :func:`arch_key`.  ``launch_overrides`` replaces single
entries without editing the table, for tests (force a looped path on small
inputs) and for GPU sweeps from the command line::

    TRITONDIFF_KERNEL_LAUNCH="nrm2.block_bytes=16384,nrm2.num_warps=4" python -m bench.norms
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, ClassVar, TypeVar

import torch

from tritondiff.base import device as _device
from tritondiff.base.config import TypedConfig, flag, is_bool, knob

from .exc import LaunchConfigError

_T = TypeVar("_T")


def _parse_launch(spec: str) -> dict[str, dict[str, int | bool]]:
    """``"kernel.param=int,..."`` -> ``{kernel: {param: int}}`` (TRITONDIFF_KERNEL_LAUNCH); ``true`` / ``false``
    for a switch."""
    out: dict[str, dict[str, int | bool]] = {}
    for item in filter(None, (s.strip() for s in spec.split(","))):
        key, sep, value = item.partition("=")
        kernel, dot, param = key.strip().partition(".")
        if not (sep and dot and kernel and param):
            raise LaunchConfigError(f"TRITONDIFF_KERNEL_LAUNCH item {item!r} is not 'kernel.param=int'",
                                    kernel=kernel or "?")
        word = value.strip().lower()
        if word in ("true", "false"):
            out.setdefault(kernel, {})[param.strip()] = word == "true"
            continue
        try:
            out.setdefault(kernel, {})[param.strip()] = int(value)
        except ValueError:
            raise LaunchConfigError(f"TRITONDIFF_KERNEL_LAUNCH item {item!r}: {value!r} is not an integer",
                                    kernel=kernel, parameter=param) from None
    return out


def _launch_table(value: Any) -> str | None:
    ok = isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, dict) for k, v in value.items())
    return None if ok else "must be a dict {kernel name: {parameter: int}}"


@dataclasses.dataclass
class KernelConfig(TypedConfig):
    package: ClassVar[str] = "kernels"

    # Launch-parameter overrides, {kernel name: {parameter: value}}, applied on
    # top of the per-architecture table of that kernel's file.  Unknown kernel
    # or parameter names raise LaunchConfigError at the next launch (a name no
    # kernel reads would otherwise be a silent no-op).  TRITONDIFF_KERNEL_LAUNCH.
    launch_overrides: dict = knob(dict, env="TRITONDIFF_KERNEL_LAUNCH", parse=_parse_launch, check=_launch_table)
    # In plain eager mode the public wrappers call their launchers directly instead of their
    # custom op (kernels/fast_path.py: same results, less host time).  False: always the op.
    # TRITONDIFF_EAGER_FAST_PATH.
    eager_fast_path: bool = knob(True, env="TRITONDIFF_EAGER_FAST_PATH", parse=flag, check=is_bool)
    # On a GPU, relaunch a kernel through its cached compiled launcher instead of JITFunction.run
    # when nothing observes launches (kernels/launch.py: same kernel, less host time).
    # TRITONDIFF_FAST_LAUNCH.
    fast_launch: bool = knob(True, env="TRITONDIFF_FAST_LAUNCH", parse=flag, check=is_bool)
    # That relaunch goes through torch's static CUDA launcher (Inductor's) where the compiled kernel
    # allows, else through Triton's compiled launcher (kernels/launch.py says when).  Read when a
    # specialisation is first cached.  TRITONDIFF_STATIC_LAUNCH.
    static_launch: bool = knob(True, env="TRITONDIFF_STATIC_LAUNCH", parse=flag, check=is_bool)

    def launch(self, kernel: str, table: dict[str, _T], device: torch.device) -> _T:
        """The launch parameters of ``kernel`` on ``device``: its table's entry, then the overrides."""
        unknown = sorted(set(self.launch_overrides) - _LAUNCH_NAMES) if self.launch_overrides else ()
        if unknown:
            raise LaunchConfigError(
                f"launch override for {', '.join(map(repr, unknown))}: no kernel has that name; "
                f"the names are {', '.join(sorted(_LAUNCH_NAMES))}", kernel=unknown[0])
        entry = table.get(arch_key(device), table["default"])
        changes = self.launch_overrides.get(kernel)
        if not changes:
            return entry
        fields = {f.name: str(f.type) for f in dataclasses.fields(entry)}  # type: ignore[arg-type]
        for name, value in changes.items():
            if name not in fields:
                raise LaunchConfigError(
                    f"launch override {kernel}.{name}: {kernel} has no parameter {name!r}; "
                    f"it has {', '.join(sorted(fields))}", kernel=kernel, parameter=name)
            if fields[name] == "bool":
                if not isinstance(value, bool):
                    raise LaunchConfigError(f"launch override {kernel}.{name}={value!r}: expected True or False",
                                            kernel=kernel, parameter=name)
            elif not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise LaunchConfigError(f"launch override {kernel}.{name}={value!r}: expected a positive int",
                                        kernel=kernel, parameter=name)
        return dataclasses.replace(entry, **changes)  # type: ignore[type-var]


config = KernelConfig()

#: The kernel names a launch override may use: each kernel file registers the names it reads.
_LAUNCH_NAMES: set[str] = set()


def register_launch_names(*names: str) -> None:
    """Declare the launch-table names a kernel file passes to :meth:`KernelConfig.launch`."""
    _LAUNCH_NAMES.update(names)


def arch_key(device: torch.device) -> str:
    """The launch-table key of ``device``: ``"interpreter"`` or ``"sm<major><minor>"`` (e.g. ``"sm90"``)."""
    if _device.is_interpreter():
        return "interpreter"
    return _cuda_arch(device.index if device.index is not None else torch.cuda.current_device())


def sm_count(device: torch.device) -> int:
    """Streaming multiprocessors of ``device`` (1 in the interpreter, where programs run one by one)."""
    if _device.is_interpreter():
        return 1
    return _cuda_sms(device.index if device.index is not None else torch.cuda.current_device())


@functools.lru_cache(maxsize=None)
def _cuda_arch(index: int) -> str:
    major, minor = torch.cuda.get_device_capability(index)
    return f"sm{major}{minor}"


@functools.lru_cache(maxsize=None)
def _cuda_sms(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def store_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype a kernel should write a ``dtype`` output as.

    Triton's interpreter converts float32 to bfloat16 by truncating the
    mantissa, where CUDA rounds to nearest even (up to 1 ulp apart, 2**-7
    relative).  In the interpreter, launchers therefore let kernels store
    bfloat16 outputs as float32 and round them with torch (``Tensor.copy_``),
    so both modes produce the same bits.  Everything else is stored as is.
    """
    if dtype == torch.bfloat16 and _device.is_interpreter():
        return torch.float32
    return dtype
