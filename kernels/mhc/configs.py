"""Launch configurations of the seven mHC-lite kernels: one table, keyed by architecture.

The runtime path never autotunes: a launcher asks :func:`lookup` for the entry
of its kernel on the current architecture, clamped to the problem (a tile is
never wider than the next power of two of C, nor taller than that of T).  New
values come from the one-shot grid search
(``python -m bench.mhc_gridsearch``), which prints entries in this
table's format; copy them in by hand.  Single entries can be overridden without
editing the table through ``kernels.config`` (see :func:`lookup`).

``block_c`` is BLOCK_C for the stream kernels and BLOCK_K (the n*C reduction
tile) for the two RMSNorm+projection kernels.  ``num_stages`` only matters for
kernels with a loop over C (K1 both, K3 bwd hpre, K4 bwd fused); the 2-D-grid
kernels (K3 fwd / bwd dx, K4 fwd) have no loop to pipeline.

Entries:

* ``sm90`` (H100 / H200): register budget 255 per thread, 228 KB shared memory
  per SM (seed 003's SM90 pitfalls): tiles are sized to keep about 16-32
  elements per thread per live tile and ``num_stages * live tiles`` inside
  shared memory.  Values chosen by that rule and checked by compiling every
  kernel for sm_90a with triton 3.9 + ptxas (no register spills in bfloat16,
  float16 or float32 -- float32 K1 runs in float64 tiles, with its own
  block_c: rmsnorm_project._FLOAT64_TILE_BLOCK_C; at most 186 registers a
  thread), then timed: the grid
  search ran on an H100 80GB HBM3 (2026-11-22, torch 2.11, triton 3.6; T =
  65536, C = 2560, bfloat16; 168 candidates, none failed) and its winners were
  at most 1.03x faster than these entries (K1 bwd dx 1.030x, K1 fwd 1.019x,
  the rest <= 1.011x), so the entries were kept (reports/performance-log.md).
  After K1 bwd dx's K loop became the pipelined innermost loop, a
  search of that kernel alone (2026-11-24, same machine and versions, 10
  candidates; reports/performance-log.md) found BT=32 BC=128
  2 warps 3 stages 1.041x faster than the old entry (0.985 vs 1.024 ms, 90.8%
  of copy bandwidth): adopted.  They have not been timed on an H200; re-run
  the search there, or after a kernel changes.
* ``default``: any other CUDA architecture; the same rule with fewer stages.
* ``interpreter``: Triton's interpreter on CPU, where every program instance
  costs milliseconds of Python and every tile element (masked or not) about
  half a microsecond: :func:`clamp` picks the tile of least modelled time
  (padding of T and C against the number of program instances), up to
  :data:`INTERPRETER_TILE_ELEMENTS` elements.
"""
from __future__ import annotations

import dataclasses
import functools

import torch

from tritondiff.kernels.config import arch_key
from tritondiff.kernels.config import config as kernel_config
from tritondiff.kernels.config import register_launch_names
from tritondiff.kernels.exc import LaunchConfigError

#: Triton's limit on the number of elements of one block tensor.
MAX_TILE_ELEMENTS = 1 << 20

#: Interpreter tiles hold about this many elements (fewer, larger programs).
INTERPRETER_TILE_ELEMENTS = 1 << 18


@dataclasses.dataclass(frozen=True)
class LaunchConfig:
    """One kernel's launch parameters."""

    block_t: int  # rows (tokens) per program
    block_c: int  # columns per tile: BLOCK_C, or BLOCK_K for K1
    num_warps: int = 4
    num_stages: int = 2

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


#: Short key of each kernel -> its Triton kernel name (as it appears in traces).
KERNELS = {
    "k1_fwd": "_fused_rmsnorm_project_fwd_kernel",
    "k1_bwd_dx": "_fused_rmsnorm_project_bwd_dx_kernel",
    "k3_fwd": "_fused_pre_map_fwd_kernel",
    "k3_bwd_dx": "_fused_pre_map_bwd_dx_kernel",
    "k3_bwd_hpre": "_fused_pre_map_bwd_hpre_kernel",
    "k4_fwd": "_fused_post_res_fwd_kernel_n4",
    "k4_bwd_fused": "_fused_post_res_bwd_fused_kernel_n4",
}

_C = LaunchConfig

TABLE: dict[str, dict[str, LaunchConfig]] = {
    "sm90": {
        "k1_fwd": _C(block_t=64, block_c=128, num_warps=8, num_stages=3),
        "k1_bwd_dx": _C(block_t=32, block_c=128, num_warps=2, num_stages=3),
        "k3_fwd": _C(block_t=32, block_c=256, num_warps=8, num_stages=1),
        "k3_bwd_dx": _C(block_t=32, block_c=256, num_warps=8, num_stages=1),
        "k3_bwd_hpre": _C(block_t=16, block_c=256, num_warps=8, num_stages=3),
        "k4_fwd": _C(block_t=16, block_c=256, num_warps=8, num_stages=1),
        "k4_bwd_fused": _C(block_t=16, block_c=128, num_warps=8, num_stages=2),
    },
    "default": {
        "k1_fwd": _C(block_t=64, block_c=128, num_warps=8, num_stages=2),
        "k1_bwd_dx": _C(block_t=64, block_c=128, num_warps=8, num_stages=2),
        "k3_fwd": _C(block_t=32, block_c=128, num_warps=4, num_stages=1),
        "k3_bwd_dx": _C(block_t=32, block_c=128, num_warps=4, num_stages=1),
        "k3_bwd_hpre": _C(block_t=16, block_c=256, num_warps=8, num_stages=2),
        "k4_fwd": _C(block_t=16, block_c=128, num_warps=4, num_stages=1),
        "k4_bwd_fused": _C(block_t=16, block_c=128, num_warps=8, num_stages=2),
    },
    # block_t is a cap here: lookup() sizes it from INTERPRETER_TILE_ELEMENTS.
    "interpreter": {k: _C(block_t=1 << 16, block_c=1024, num_warps=4, num_stages=1) for k in KERNELS},
}


def _pow2_at_least_16(n: int) -> int:
    return max(16, 1 << max(0, int(n) - 1).bit_length())


# Interpreter cost model (2-core CPU, triton 3.9): a program instance (or loop
# iteration) costs about this many tile elements' worth of time (~2 ms against
# ~0.5 us an element, masked lanes included).
_INTERPRETER_PROGRAM_COST = 4000


@functools.lru_cache(maxsize=4096)
def _interpreter_tile(T: int, C: int, max_t: int, max_c: int) -> tuple[int, int]:
    """The (BLOCK_T, BLOCK_C) of least modelled interpreter time, tiles up to INTERPRETER_TILE_ELEMENTS."""
    best = None
    t_cap = _pow2_at_least_16(T)
    for w in (1 << p for p in range(4, max_c.bit_length())):
        top = max(16, min(max_t, t_cap, INTERPRETER_TILE_ELEMENTS // w))
        for bt in (1 << p for p in range(4, top.bit_length())):
            tiles = -(-max(T, 1) // bt) * -(-max(C, 1) // w)
            cost = tiles * (_INTERPRETER_PROGRAM_COST + bt * w)
            if best is None or cost < best[0]:
                best = (cost, bt, w)
    return best[1], best[2]


def clamp(cfg: LaunchConfig, *, T: int, C: int, arch: str) -> LaunchConfig:
    """Fit ``cfg`` to a problem of T rows and C columns (C = n*C for K1).

    Tiles are at least 16 x 16 (tl.dot's minimum on GPUs) and never larger than
    the problem needs; ``arch == "interpreter"`` also applies the interpreter's
    tile-size rule.  Block sizes must be powers of two.
    """
    for name in ("block_t", "block_c"):
        v = getattr(cfg, name)
        if not isinstance(v, int) or v < 1 or v & (v - 1):
            raise LaunchConfigError(f"mHC launch config {name}={v!r} is not a power of two", kernel="mhc",
                                    parameter=name)
    block_c = max(16, min(cfg.block_c, _pow2_at_least_16(C)))
    block_t = max(16, cfg.block_t)
    if arch == "interpreter":
        block_t, block_c = _interpreter_tile(T, C, block_t, block_c)
    block_t = min(block_t, _pow2_at_least_16(T), MAX_TILE_ELEMENTS // 64)  # K1's [BLOCK_T, <=64] accumulator
    while block_t * block_c > MAX_TILE_ELEMENTS:
        block_t //= 2
    return dataclasses.replace(cfg, block_t=block_t, block_c=block_c)


def override_name(kernel: str) -> str:
    """The name of ``kernel`` in ``kernels.config.launch_overrides`` / TRITONDIFF_KERNEL_LAUNCH."""
    return f"mhc_{kernel}"


register_launch_names(*(override_name(k) for k in KERNELS))


def lookup(kernel: str, *, T: int, C: int, device: torch.device) -> LaunchConfig:
    """The launch configuration of ``kernel`` (a key of :data:`KERNELS`) for a T x C problem on ``device``.

    The table entry for ``device``'s architecture, with any launch override of
    ``kernels.config`` applied (``config.patch(launch_overrides={"mhc_k4_fwd":
    {"block_t": 16}})``, or ``TRITONDIFF_KERNEL_LAUNCH="mhc_k4_fwd.block_t=16"``),
    then fitted to the problem by :func:`clamp`.  An overridden entry is taken
    as given (the interpreter's tile-size rule does not resize it).
    """
    if kernel not in KERNELS:
        raise LaunchConfigError(f"unknown mHC kernel {kernel!r}; known: {', '.join(KERNELS)}", kernel=kernel)
    per_arch = {arch: entries[kernel] for arch, entries in TABLE.items()}
    arch = arch_key(device)
    base = per_arch.get(arch, per_arch["default"])
    cfg = kernel_config.launch(override_name(kernel), per_arch, device)
    return clamp(cfg, T=T, C=C, arch=arch if cfg == base else "given")


def resolve(kernel: str, config: LaunchConfig | None, *, T: int, C: int, device: torch.device) -> LaunchConfig:
    """What a launcher uses: an explicit ``config`` (the grid search's candidates), else :func:`lookup`."""
    if config is not None:
        return clamp(config, T=T, C=C, arch="given")
    return lookup(kernel, T=T, C=C, device=device)


def table_key(device: torch.device) -> str:
    """The TABLE entry the launchers use on ``device`` (its arch key, or ``"default"``)."""
    key = arch_key(device)
    return key if key in TABLE else "default"
