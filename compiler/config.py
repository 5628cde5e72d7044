"""Every knob of the compiler, in one typed place.

Environment variables are read here and nowhere else.  Defaults that depend on where
kernels run (Triton's interpreter on CPU, or a GPU) are keyed on
``tritondiff.base.device.is_interpreter()``: the interpreter pays ~1-4 ms per program instance,
so it gets large blocks and few programs; a GPU gets blocks sized for registers.

Tests change knobs with ``config.patch(...)``, which validates names and values and
restores the previous values on exit.  Knobs that change generated code are part of
``cache_key()``, so a compiled function re-specialises when a test forces a strategy.
What was measured behind each default is in ``reports/performance-log.md``, by knob name.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import tempfile
from typing import Any, Iterator, Optional

from tritondiff.base import device as _device
from tritondiff.base.limits import GRID_LIMITS  # CUDA's programs per grid axis

from .exc import ConfigError

_INTERP = _device.is_interpreter()

try:  # Triton's own limit on the elements of one block tensor (tl.arange, tl.full, ...)
    from triton.language.core import TRITON_MAX_TENSOR_NUMEL
except ImportError:  # older Triton: the value it has always had
    TRITON_MAX_TENSOR_NUMEL = 1_048_576


def _env(name: str, default: str) -> str:
    return os.environ.get(name, default)


def _env_opt(name: str) -> Optional[str]:
    value = os.environ.get(name, "")
    return value or None


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise ConfigError(f"{name}={value!r}: expected a positive int (unset it for the default, {default})",
                          knob=name)
    return number


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "0").strip().lower() not in ("", "0", "false", "no")


def _by_mode(interpreter: int, gpu: int) -> int:
    return interpreter if _INTERP else gpu


#: compile threads by default: one per host core, at most 16 (measured in bench.compile_time).
DEFAULT_COMPILE_WORKERS = max(1, min(16, os.cpu_count() or 1))


@dataclasses.dataclass
class CompilerConfig:
    # --- reductions -------------------------------------------------------------------------
    # Auto strategy: a reduction over at most unroll_reductions_max_rnumel terms becomes a pointwise sum of them
    # (Inductor's unroll_reductions_threshold): its loads run along the output, and it fuses like any pointwise.
    unroll_reductions: bool = True
    unroll_reductions_max_rnumel: int = 8
    # "auto" picks per fused reduction; a forcible strategy's name (codegen.reduction.FORCIBLE) forces it.
    reduction_strategy: str = "auto"
    # Largest block tensor the generator may emit; past it a forced choice raises ReductionTooLarge.  At most
    # Triton's own TRITON_MAX_TENSOR_NUMEL.
    max_triton_tensor_numel: int = TRITON_MAX_TENSOR_NUMEL
    # Auto strategy: the block budget of one reduction tile (XBLOCK * RBLOCK).
    max_reduction_block_numel: int = _by_mode(262_144, 4096)
    # Auto strategy: XBLOCK of an outer reduction (loads contiguous along the kept axis: a column sum).
    outer_reduction_xblock: int = _by_mode(256, 32)
    # Forced blocks (None: chosen); a forced value past max_triton_tensor_numel raises.
    xblock: Optional[int] = None
    rblock: Optional[int] = None
    # Software pipelining of generated loops (tl.range(..., num_stages=N)); None: a plain range.
    loop_stages: Optional[int] = None
    # A looped kernel sums exp(h - max) in the pass that finds the max (codegen.online): one read of the row less.
    online_softmax: bool = True
    # Programs that fill the machine: sm_count (None: the GPU's; nominal_sm_count in the interpreter) times
    # programs_per_sm.
    sm_count: Optional[int] = None
    nominal_sm_count: int = 8
    programs_per_sm: int = _by_mode(1, 2)

    # --- persistent reductions (config.persistent.*) ---------------------------------------
    # Auto strategy: rows whose padded length is at most this run persistent (one block); longer ones loop.
    persistent_max_rnumel: int = _by_mode(16_384, 8192)
    # Rows past persistent_max_rnumel up to this: persistent at persistent_wide_warps when the tiles kept across
    # passes fit persistent_wide_held_numel and the row fills persistent_wide_min_fill of its block.
    persistent_wide_max_rnumel: int = _by_mode(16_384, 32_768)
    persistent_wide_held_numel: int = 32_768
    persistent_wide_warps: int = 32
    persistent_wide_min_fill: float = 0.75
    # A two-pass row that keeps only plain loads reads them again instead of holding them.
    persistent_reread_loads: bool = True

    # --- looped reductions (config.looped.*) -----------------------------------------------
    # RBLOCK of an auto-chosen looped reduction.
    looped_rblock: int = _by_mode(32_768, 4096)
    # A looped kernel that rereads this many row values in a later pass takes looped_reread_warps, so its passes
    # end while the row is in L2.
    looped_reread_min_held: int = 2
    looped_reread_warps: int = 16

    # --- split reductions (config.split.*) -------------------------------------------------
    # Auto strategy: split a reduction of at most split_max_xnumel outputs over at least split_min_rnumel elements.
    split_max_xnumel: int = 64
    split_min_rnumel: int = _by_mode(131_072, 32_768)
    # Forced partials per row block (None: chosen).
    split_count: Optional[int] = None
    # Each partial reduces at least split_min_chunk elements; launch-bound partials (one RBLOCK step each) aim at
    # split_short_programs_per_sm programs an SM, split_short_tagged_programs_per_sm with tagged partials.
    split_min_chunk: int = _by_mode(16_384, 2_048)
    split_short_programs_per_sm: int = 1
    split_short_tagged_programs_per_sm: int = 2
    # A partial of one reduction looping at least split_streaming_min_steps steps takes split_streaming_warps.
    split_streaming_warps: int = 32
    split_streaming_min_steps: int = 8
    # The last program to finish reduces its row block's partials (at most split_last_program_max_numel): one
    # launch, not two.  It learns the partials are in by "fence" (acq_rel count) or "tagged" (flagged 64-bit
    # slots, polled; partials of 32 bits or fewer).
    split_last_program_final: bool = True
    split_last_program_max_numel: int = 4096
    split_last_program_sync: str = "tagged"

    # --- mixed-order reductions (config.mixed_order.*) -------------------------------------
    # A row group and a column group over the same rows (layer norm backward's dx and dW / dB) run as one kernel
    # that reads the shared inputs once, when a row fits mixed_order_max_rnumel.
    mixed_order_reductions: bool = True
    mixed_order_max_rnumel: int = 16384
    # Rows per block: the column accumulators are a whole tile (registers).
    mixed_order_max_xblock: int = _by_mode(4096, 256)
    # Column accumulators past mixed_order_wide_bytes a program make a wide kernel: one program an SM at most
    # mixed_order_wide_warps warps.
    mixed_order_wide_bytes: int = 65536
    mixed_order_wide_warps: int = 8
    # Pipelining of the row loop alone (None: loop_stages).
    mixed_order_loop_stages: Optional[int] = None
    # A row as at most mixed_order_row_chunks static chunks of at least mixed_order_min_chunk columns, where they
    # take fewer lanes than the padded row (1: always the padded row).
    mixed_order_row_chunks: int = 8
    mixed_order_min_chunk: int = _by_mode(64, 1024)
    # Load the row loop's next rows a step ahead (codegen.statements.prefetch_next_rows): "wide" kernels only,
    # "all" or "off".  A wide kernel prefetches while its accumulators and twice its row values fit
    # mixed_order_prefetch_max_bytes a program (past it they spill).
    mixed_order_prefetch: str = "wide"
    mixed_order_prefetch_max_bytes: int = 196_608

    # --- pointwise -------------------------------------------------------------------------
    # Elements per program of a 1-D pointwise kernel (a power of two).
    pointwise_block: int = _by_mode(65_536, 1024)
    # "auto": 2-D tiles for a transposed load, unrolled for a short output dim that saves loads, else 1-D;
    # "1d" / "2d" / "unrolled" force one.
    pointwise_tiling: str = "auto"
    # Unrolled tiling: the longest short dim a program computes whole, so a load it does not index is issued once
    # (1: never; at most MAX_UNROLL_EXTENT).
    pointwise_unroll_max_extent: int = 8
    # Elements per 2-D pointwise tile (YBLOCK * XBLOCK).
    pointwise_tile_numel: int = _by_mode(65_536, 1024)

    # --- fusion ----------------------------------------------------------------------------
    # The scheduler's fusions (pointwise chains, epilogues, siblings) on or off.
    fusion: bool = True
    # Inline pointwise producers into their consumers (recompute instead of store and load).
    inline_pointwise: bool = True
    # Largest expression (ops calls) a producer may have and still be inlined.
    max_inline_ops: int = 96
    # A producer with more users is stored once (a widening cast is always inlined: storing it moves more bytes).
    max_inline_users: int = 4

    # --- codegen / runtime -----------------------------------------------------------------
    # int64 index arithmetic in every kernel (it is used anyway where an index can pass 2**31 - 1).
    force_int64_indexing: bool = False
    # L2 hints on loads in loops: evict_last on what is read again, evict_first on the last streaming read.
    eviction_hints: bool = True
    # Loads rise in their straight-line block, so a row's loads are in flight before its first reduction.
    hoist_loads: bool = True
    # Loads that do not change in a loop move above it (a mixed-order kernel's weight, read once, not per row).
    lift_invariant_loads: bool = True
    # A whole-row kernel takes a row's first element (a variance shift) from the row in registers, bit-exact.
    row_elements_from_registers: bool = True
    # A pass with no load along the reduced axis loads over the whole tile: Triton would else lay the tile out a
    # row per thread (codegen.reduction.orientation.reads_along_reduced_axis).
    spread_row_loads: bool = True
    # Warps of every launch (None: one per elements_per_warp of the block, 4 to max_num_warps).  GPU only.
    num_warps: Optional[int] = None
    elements_per_warp: int = 512
    # ... one per one_wave_elements_per_warp for a grid of one wave of looping programs (split partials,
    # mixed-order kernels).
    one_wave_elements_per_warp: int = 256
    max_num_warps: int = 16
    # Let Triton contract a * b + c into an FMA; off: rounding as the IR says.  TRITONDIFF_COMPILER_FP_FUSION=1.
    fp_fusion: bool = dataclasses.field(default_factory=lambda: _env_flag("TRITONDIFF_COMPILER_FP_FUSION"))
    # bf16 conversions as Triton's casts (round to nearest even on a GPU); the interpreter keeps the prelude's
    # helpers (it truncates and drops subnormals).
    native_bf16_casts: bool = bool(_by_mode(False, True))
    # ATen ops lowered to ExternKernel whatever the registry.  TRITONDIFF_COMPILER_FALLBACK, comma separated.
    fallback_ops: frozenset = dataclasses.field(default_factory=lambda: frozenset(
        o.strip() for o in _env("TRITONDIFF_COMPILER_FALLBACK", "").split(",") if o.strip()))
    # "triton" (generated kernels), "ir" (the fused IR, evaluated), "ir_unfused" (lowering's IR, evaluated): tells
    # a lowering bug from a fusion bug from a codegen bug.  TRITONDIFF_COMPILER_EXECUTION.
    execution: str = dataclasses.field(default_factory=lambda: _env("TRITONDIFF_COMPILER_EXECUTION", "triton"))

    # Forward / backward split (compiler.partition): "min_cut" saves the fewest bytes and recomputes the rest,
    # "default" saves everything.  Read when dynamo compiles a frame.  TRITONDIFF_COMPILER_PARTITIONER.
    partitioner: str = dataclasses.field(default_factory=lambda: _env("TRITONDIFF_COMPILER_PARTITIONER", "min_cut"))
    # Run graphs that need none of AOTAutograd's runtime wrappers as one autograd.Function (compiler.lean).  Read
    # when dynamo compiles a frame.  TRITONDIFF_COMPILER_LEAN_RUNTIME=0: off.
    lean_runtime: bool = dataclasses.field(default_factory=lambda: _env_flag(
        "TRITONDIFF_COMPILER_LEAN_RUNTIME") if "TRITONDIFF_COMPILER_LEAN_RUNTIME" in os.environ else True)
    # Keep the lean runtime's traced and partitioned graphs on disk, so a new process skips AOTAutograd's trace and
    # the partition of a graph compiled before (compiler.graph_cache).  TRITONDIFF_GRAPH_CACHE=0: off.
    graph_cache: bool = dataclasses.field(default_factory=lambda: _env_flag(
        "TRITONDIFF_GRAPH_CACHE") if "TRITONDIFF_GRAPH_CACHE" in os.environ else True)
    # Directory of the graph cache (graphs.sqlite3).  TRITONDIFF_GRAPH_CACHE_DIR.
    graph_cache_dir: str = dataclasses.field(default_factory=lambda: _env(
        "TRITONDIFF_GRAPH_CACHE_DIR", os.path.join(os.path.expanduser("~"), ".cache", "tritondiff")))

    # Rewrite hand-written attention into scaled_dot_product_attention before AOTAutograd (compiler.attention).
    # TRITONDIFF_COMPILER_FUSE_ATTENTION=0: off.
    fuse_attention: bool = dataclasses.field(default_factory=lambda: _env_flag(
        "TRITONDIFF_COMPILER_FUSE_ATTENTION") if "TRITONDIFF_COMPILER_FUSE_ATTENTION" in os.environ else True)

    # Convolutions' activations laid out channels-last inside a graph (compiler.lowerings.convolution): "auto"
    # (where the kernels run on CUDA), "on", "off".  Off by default: on an H200 it took a ResNet block's
    # fwd+bwd from 0.78 to 1.52 ms of GPU time in float32 (0.44 to 1.24 in bfloat16), a UNet block's from 0.31
    # to 0.34; which generated kernels lost is not yet broken down (reports/performance-log.md).
    # TRITONDIFF_COMPILER_CONV_CHANNELS_LAST.
    conv_channels_last: str = dataclasses.field(default_factory=lambda: _env(
        "TRITONDIFF_COMPILER_CONV_CHANNELS_LAST", "off"))

    # --- matmul templates and autotuning (compiler.templates, compiler.autotune) --------------
    # mm / addmm / bmm past matmul_small_k_max: "template", "extern" (ATen), "autotune", or "auto" (ATen on CUDA
    # unless the template reads an operand narrow).  TRITONDIFF_COMPILER_MATMUL.
    matmul: str = dataclasses.field(default_factory=lambda: _env("TRITONDIFF_COMPILER_MATMUL", "auto"))
    # Inner sizes at or below this are not given to the GEMM template (tl.dot wants K >= 16).
    matmul_small_k_max: int = 16
    # An fp32 GEMM of widened fp16 / bf16 operands multiplies them narrow on tensor cores (exact products).
    matmul_narrow_dot: bool = True
    # Autotune generated kernels and GEMM templates.  Off by default and in CI.  TRITONDIFF_COMPILER_AUTOTUNE=1.
    autotune: bool = dataclasses.field(default_factory=lambda: _env_flag("TRITONDIFF_COMPILER_AUTOTUNE"))
    # Directory of the persistent autotune cache (autotune.sqlite3).  TRITONDIFF_AUTOTUNE_CACHE.
    autotune_cache_dir: str = dataclasses.field(default_factory=lambda: _env(
        "TRITONDIFF_AUTOTUNE_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "tritondiff")))
    # Keep tuned choices on disk (False: this process only).
    autotune_persist: bool = True
    # Under the interpreter, time every candidate once (slow) instead of taking the first.
    autotune_cpu_timing: bool = False
    # Rerun the winner from pristine inputs and compare: a trial that leaked state raises AutotuneError.
    autotune_recheck: bool = True

    # --- debugging -------------------------------------------------------------------------
    # Check the IR between pipeline steps (dtypes, shapes, in-bounds loads).  TRITONDIFF_COMPILER_VERIFY=1.
    verify_ir: bool = dataclasses.field(default_factory=lambda: _env_flag("TRITONDIFF_COMPILER_VERIFY"))
    # Where each graph's FX graph, IR, Triton source and plan are written (None: memory only).
    # TRITONDIFF_COMPILER_DUMP.
    dump_dir: Optional[str] = dataclasses.field(default_factory=lambda: _env_opt("TRITONDIFF_COMPILER_DUMP"))
    # How many recent compilations compiler.dump keeps.
    keep_artifacts: int = 16
    # Threads that compile a graph's kernels side by side before their first launch (compiler.parallel): one
    # per host core up to 16 (a nanoGPT block's cold compile on an H200 host of 16 cores: 7.8 s at 1, 5.4 s
    # at 16; reports/performance-log.md).  1: each kernel compiles at its first launch, in the launching
    # thread.  The interpreter compiles nothing.  TRITONDIFF_COMPILE_WORKERS.
    compile_workers: int = dataclasses.field(default_factory=lambda: _env_int("TRITONDIFF_COMPILE_WORKERS",
                                                                              DEFAULT_COMPILE_WORKERS))
    # Where generated modules are written for Triton to read.  TRITONDIFF_COMPILER_CACHE.
    cache_dir: str = dataclasses.field(default_factory=lambda: _env(
        "TRITONDIFF_COMPILER_CACHE", os.path.join(tempfile.gettempdir(), f"tritondiff-compiler-{os.getuid()}")))

    def __getattr__(self, name: str) -> "KnobSection":
        """Each reduction strategy's knobs as a section: ``config.split.count`` is ``config.split_count``."""
        if name in SECTIONS:
            return KnobSection(self, name)
        raise AttributeError(f"compiler.config has no knob or section {name!r}")

    @contextlib.contextmanager
    def patch(self, **changes: Any) -> Iterator["CompilerConfig"]:
        """Temporarily override knobs (``with config.patch(reduction_strategy="looped"): ...``); a section's knob
        by either name (``split_count=4`` or ``**{"split.count": 4}``)."""
        changes = {name.replace(".", "_", 1) if name.split(".", 1)[0] in SECTIONS else name: value
                   for name, value in changes.items()}
        for name, value in changes.items():           # all checked before any is set; each value once (a
            _validate(name, value)                    # variant patches around every call it times)
        saved = {k: getattr(self, k) for k in changes}
        for k, v in changes.items():
            self._set(k, v)
        try:
            yield self
        finally:
            for k, v in saved.items():
                self._set(k, v)

    def __setattr__(self, name: str, value: Any) -> None:
        _validate(name, value)                        # config.knob = value is checked as patch() checks it
        self._set(name, value)

    def _set(self, name: str, value: Any) -> None:
        """Set a knob whose value has been validated, and move the cache token along."""
        token = self.__dict__.get("_token")
        object.__setattr__(self, name, value)
        if token is None or name in _NOT_IN_KEY:
            return
        step = (token, name, value)                   # a knob set to a value it had before: a dict lookup, not
        try:                                          # the whole key again (patch() around every call of a
            after = _STEPS.get(step)                  # compiled function sets and restores knobs each time)
        except TypeError:                             # an unhashable value: cache_key() will say so
            after = step = None
        if after is None and step is not None:        # the key ``token`` stands for with this one knob changed:
            key = list(_KEYS[token])                  # a step depends on its own key alone, whatever else the
            key[_key_index()[name]] = (name, value)   # config holds
            after = _STEPS[step] = _token_of(tuple(key))
        object.__setattr__(self, "_token", after)

    def __getstate__(self) -> dict:
        """A token means something in this process only: a pickled config rebuilds its own."""
        state = dict(self.__dict__)
        state.pop("_token", None)
        return state

    def cache_key(self) -> tuple:
        """The knobs that change generated code or the launch plan."""
        return _KEYS[self.cache_token()]

    def cache_token(self) -> int:
        """A small int standing for ``cache_key()``: equal keys, equal tokens, for the life of the process.
        Asked on every call of a compiled graph, so it is kept across knob changes (``_STEPS``)."""
        token = self.__dict__.get("_token")
        if token is None:
            token = _token_of(tuple((name, getattr(self, name)) for name in _key_index()))
            object.__setattr__(self, "_token", token)
        return token


#: Sections of knobs: each reduction strategy's, named as the strategy (``codegen.reduction.STRATEGIES``).
SECTIONS = ("persistent", "looped", "split", "mixed_order")


class KnobSection:
    """The knobs ``<section>_*`` of a config under their short names: ``config.split.count`` reads and sets
    ``config.split_count``, validated and in the cache key as that knob is."""

    __slots__ = ("_config", "_section")

    def __init__(self, cfg: CompilerConfig, section: str) -> None:
        object.__setattr__(self, "_config", cfg)
        object.__setattr__(self, "_section", section)

    def _knob(self, name: str) -> str:
        knob = f"{self._section}_{name}"
        if knob not in _fields():
            raise ConfigError(f"compiler.config.{self._section} has no knob {name!r}; it has: "
                              f"{', '.join(self.names())}", knob=knob)
        return knob

    def names(self) -> tuple[str, ...]:
        """The section's knobs, short names, in declaration order."""
        prefix = self._section + "_"
        return tuple(n[len(prefix):] for n in _fields() if n.startswith(prefix))

    def __getattr__(self, name: str) -> Any:
        if f"{self._section}_{name}" not in _fields():
            raise AttributeError(f"compiler.config.{self._section} has no knob {name!r}; it has: "
                                 f"{', '.join(self.names())}")
        return getattr(self._config, f"{self._section}_{name}")

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._config, self._knob(name), value)

    def patch(self, **changes: Any):
        """``config.patch`` of this section's knobs by their short names."""
        return self._config.patch(**{self._knob(name): value for name, value in changes.items()})

    def __dir__(self) -> list[str]:
        return list(self.names()) + ["names", "patch"]

    def __repr__(self) -> str:
        return f"config.{self._section}(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in self.names()) + ")"


MAX_UNROLL_EXTENT = 16

_TOKENS: dict[tuple, int] = {}      # cache_key() -> cache_token()
_KEYS: dict[int, tuple] = {}        # and back
_STEPS: dict[tuple, int] = {}       # (token, knob, value) -> the token after setting that knob to that value
_FIELDS: dict[str, dataclasses.Field] = {}
_KEY_INDEX: dict[str, int] = {}


def _fields() -> dict[str, dataclasses.Field]:
    if not _FIELDS:
        _FIELDS.update((f.name, f) for f in dataclasses.fields(CompilerConfig))
    return _FIELDS


def _key_index() -> dict[str, int]:
    """Each knob of ``cache_key()`` -> its position there."""
    if not _KEY_INDEX:
        _KEY_INDEX.update((name, i) for i, name in enumerate(n for n in _fields() if n not in _NOT_IN_KEY))
    return _KEY_INDEX


def _token_of(key: tuple) -> int:
    token = _TOKENS.setdefault(key, len(_TOKENS))
    _KEYS.setdefault(token, key)
    return token
_NOT_IN_KEY = frozenset({"compile_workers", "lean_runtime", "graph_cache", "graph_cache_dir", "partitioner",
                         "execution", "verify_ir", "dump_dir", "keep_artifacts", "cache_dir", "autotune_cache_dir",
                         "autotune_persist", "autotune_cpu_timing", "autotune_recheck"})


_CHOICES = {
    # and codegen.reduction.FORCIBLE, which the registry adds (add_choice): config sits below codegen
    "reduction_strategy": ("auto",),
    "pointwise_tiling": ("auto", "1d", "2d", "unrolled"),
    "execution": ("triton", "ir", "ir_unfused"),
    "matmul": ("auto", "template", "extern", "autotune"),
    "conv_channels_last": ("auto", "on", "off"),
    "partitioner": ("min_cut", "default"),
    "mixed_order_prefetch": ("wide", "all", "off"),
    "split_last_program_sync": ("tagged", "fence"),
}
_POWERS_OF_TWO = ("outer_reduction_xblock", "elements_per_warp", "one_wave_elements_per_warp", "max_num_warps",
                  "mixed_order_wide_warps", "split_streaming_warps", "num_warps", "persistent_max_rnumel",
                  "persistent_wide_max_rnumel", "persistent_wide_warps", "looped_reread_warps",
                  "mixed_order_max_rnumel", "mixed_order_max_xblock", "mixed_order_min_chunk", "looped_rblock", "pointwise_block",
                  "pointwise_tile_numel", "xblock", "rblock", "max_reduction_block_numel")

#: Knobs that are a launch's warps, and the most a CUDA block takes (1024 threads).
_WARPS = ("num_warps", "max_num_warps", "mixed_order_wide_warps", "split_streaming_warps", "persistent_wide_warps",
          "looped_reread_warps")
MAX_WARPS = 32


def add_choice(knob: str, value: str) -> None:
    """Let ``knob`` take ``value`` too: a plug-in of a layer above names itself (``codegen.reduction``'s
    registry adds each strategy ``reduction_strategy`` may force)."""
    if value not in _CHOICES[knob]:
        _CHOICES[knob] += (value,)


def _validate(name: str, value: Any) -> None:
    fields = _fields()
    if name not in fields:
        raise ConfigError(f"unknown compiler config knob {name!r}; known: {', '.join(sorted(fields))}", knob=name)
    if name in _CHOICES and value not in _CHOICES[name]:
        raise ConfigError(f"compiler.config.{name}={value!r}: use one of {_CHOICES[name]}", knob=name)
    annotation = str(fields[name].type)
    optional = annotation.startswith("Optional")
    if value is None:
        if not optional:
            raise ConfigError(f"compiler.config.{name} cannot be None", knob=name)
        return
    if "int" in annotation and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise ConfigError(f"compiler.config.{name}={value!r}: expected a positive int", knob=name)
    if annotation == "float" and (not isinstance(value, (int, float)) or isinstance(value, bool)
                                  or not 0 < value <= 1):
        raise ConfigError(f"compiler.config.{name}={value!r}: expected a fraction in (0, 1]", knob=name)
    if annotation == "bool" and not isinstance(value, bool):
        raise ConfigError(f"compiler.config.{name}={value!r}: expected True or False", knob=name)
    if name in _POWERS_OF_TWO and value & (value - 1):
        raise ConfigError(f"compiler.config.{name}={value}: must be a power of two (Triton block sizes are)",
                          knob=name)
    if name in _WARPS and value > MAX_WARPS:
        raise ConfigError(f"compiler.config.{name}={value}: Triton launches at most {MAX_WARPS} warps "
                          f"({MAX_WARPS * 32} threads) per program; use at most {MAX_WARPS}", knob=name)
    if name == "max_triton_tensor_numel" and value > TRITON_MAX_TENSOR_NUMEL:
        raise ConfigError(f"compiler.config.max_triton_tensor_numel={value:,} is past Triton's own limit of "
                          f"{TRITON_MAX_TENSOR_NUMEL:,} elements per block tensor (triton.language.core."
                          f"TRITON_MAX_TENSOR_NUMEL): Triton would reject the kernel; use at most "
                          f"{TRITON_MAX_TENSOR_NUMEL:,}", knob=name)
    if name == "split_count" and value > GRID_LIMITS[1]:
        raise ConfigError(f"compiler.config.split_count={value:,}: a split reduction's partial programs run along "
                          f"grid axis 1, where CUDA launches at most {GRID_LIMITS[1]:,}; use at most "
                          f"{GRID_LIMITS[1]:,}", knob=name)
    if name == "pointwise_unroll_max_extent" and value > MAX_UNROLL_EXTENT:
        raise ConfigError(f"compiler.config.pointwise_unroll_max_extent={value}: each unrolled index is one more copy "
                          f"of the kernel body; use at most {MAX_UNROLL_EXTENT}", knob=name)
    if name == "fallback_ops" and not isinstance(value, (frozenset, set)):
        raise ConfigError(f"compiler.config.fallback_ops wants a set of op names, got {value!r}", knob=name)


config = CompilerConfig()
for _name in _CHOICES:
    _validate(_name, getattr(config, _name))


def compile_options() -> dict:
    """Triton compile options of every generated launch (kernels and GEMM templates).

    Part of the autotune key too (``templates.runtime``): a kernel compiled with other options
    is another binary.  ``config.cache_key()`` already covers the knobs behind them.
    """
    return {"enable_fp_fusion": config.fp_fusion}
