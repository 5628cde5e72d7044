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


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "0").strip().lower() not in ("", "0", "false", "no")


def _by_mode(interpreter: int, gpu: int) -> int:
    return interpreter if _INTERP else gpu


@dataclasses.dataclass
class CompilerConfig:
    # --- reductions -------------------------------------------------------------------------
    # Unroll a reduction over at most unroll_reductions_max_rnumel elements (sizes are static) into
    # a Pointwise that combines the terms left to right in the reduction's accumulator dtype
    # (Inductor's unroll_reductions_threshold): loads run along the output's contiguous axis, not
    # across a short strided reduced axis, and the node fuses and inlines like any pointwise.
    # Only under reduction_strategy="auto": a forced strategy runs every reduction through it.
    unroll_reductions: bool = True
    unroll_reductions_max_rnumel: int = 8
    # "auto" picks persistent / looped / split per fused reduction from its extents;
    # "persistent", "looped" or "split" forces one (the harness runs every path on one input).
    reduction_strategy: str = "auto"
    # Largest block tensor (tl.arange, tl.full, tl.zeros, XBLOCK*RBLOCK) the code generator may
    # emit.  A forced configuration past this raises compiler.exc.ReductionTooLarge instead of
    # Triton's ValueError.  At most TRITON_MAX_TENSOR_NUMEL (1,048,576): Triton rejects larger
    # tensors itself, so a larger value is a ConfigError (lower is fine, e.g. to test the guard).
    max_triton_tensor_numel: int = TRITON_MAX_TENSOR_NUMEL
    # Auto strategy: a reduction whose padded extent is at most this runs persistent (the whole
    # axis in one block); longer ones loop over RBLOCK chunks.
    persistent_max_rnumel: int = _by_mode(16_384, 8192)
    # Auto strategy, rows past persistent_max_rnumel: still persistent (one row per program at
    # persistent_wide_warps warps) up to persistent_wide_max_rnumel elements, when the row tiles kept between
    # passes times RBLOCK fit persistent_wide_held_numel (32 values a thread at 32 warps) and the row fills at
    # least persistent_wide_min_fill of its padded block: a looped kernel would read the row once per pass.
    persistent_wide_max_rnumel: int = _by_mode(16_384, 32_768)
    persistent_wide_held_numel: int = 32_768
    persistent_wide_warps: int = 32
    persistent_wide_min_fill: float = 0.75
    # Auto strategy, two-pass rows up to persistent_max_rnumel whose kept tiles are plain loads (an RMSNorm's
    # x): read them again in the second pass (evict_last, then evict_first) instead of holding them in
    # registers, as Inductor does; tiles that took arithmetic, and three-pass kernels, stay held.
    persistent_reread_loads: bool = True
    # Auto strategy: a looped kernel that rereads at least looped_reread_min_held values along the row in a
    # later pass (a layer-norm backward's dx: x, dy and w) takes looped_reread_warps warps, so each row's
    # passes end while the row is still in L2.
    looped_reread_min_held: int = 2
    looped_reread_warps: int = 16
    # Auto strategy: RBLOCK of a looped reduction (a power of two).
    looped_rblock: int = _by_mode(32_768, 4096)
    # A looped kernel sums exp(h - max(h)) (softmax, log-softmax, logsumexp) in the pass that finds max(h),
    # rescaling per lane as the max grows (codegen.online): one read of the row less.
    online_softmax: bool = True
    # Auto block budget for one reduction tile (XBLOCK * RBLOCK).
    max_reduction_block_numel: int = _by_mode(262_144, 4096)
    # Auto strategy: XBLOCK of an outer reduction (loads contiguous along the kept axis, e.g. a
    # column sum): kept elements side by side per reduced step; RBLOCK takes the rest of the budget.
    outer_reduction_xblock: int = _by_mode(256, 32)
    # Auto strategy: split when there are at most this many outputs ...
    split_max_xnumel: int = 64
    # ... and at least this many elements along the reduced axis.
    split_min_rnumel: int = _by_mode(131_072, 32_768)
    # Split reductions and mixed-order kernels aim at sm_count * programs_per_sm programs ...
    # (sm_count None: the GPU's multi_processor_count; nominal_sm_count under the interpreter,
    # which runs programs one after the other).
    sm_count: Optional[int] = None
    nominal_sm_count: int = 8
    programs_per_sm: int = _by_mode(1, 2)
    # ... with each split partial reducing at least this many elements.
    split_min_chunk: int = _by_mode(16_384, 2_048)
    # ... but a split whose partials would take one RBLOCK step each (launch-bound) aims at this many
    # programs per SM.
    split_short_programs_per_sm: int = 1
    # ... and this many where the last program finishes through tagged partials (split_last_program_sync):
    # with no fence per program, more programs cost less.
    split_short_tagged_programs_per_sm: int = 2
    # Mixed-order reductions: a row reduction group and a column reduction group over the same rows
    # (layer-norm backward's dx and dW/dB) run as one kernel that reads the shared inputs once, when the
    # rows fit one block of at most mixed_order_max_rnumel elements.
    mixed_order_reductions: bool = True
    mixed_order_max_rnumel: int = 16384
    # Rows per block of a mixed-order kernel (its column accumulators are a whole tile, so this
    # bounds their registers on a GPU; the interpreter pays per loop step, so it takes large tiles).
    mixed_order_max_xblock: int = _by_mode(4096, 256)
    # A mixed-order kernel whose column accumulators take more than mixed_order_wide_bytes per program is
    # wide: one program per SM, at most mixed_order_wide_warps warps, so each thread may keep 255 registers
    # (layer norm 4096 x 10240's backward holds 128 KiB, half an SM's register file).
    mixed_order_wide_bytes: int = 65536
    mixed_order_wide_warps: int = 8
    # Forced block sizes / split count (None: chosen automatically).  A forced value that
    # breaks max_triton_tensor_numel raises ReductionTooLarge.
    xblock: Optional[int] = None
    rblock: Optional[int] = None
    split_count: Optional[int] = None
    # Software-pipelining depth of a generated reduction's loop (a mixed-order kernel's row loop, a
    # looped or split kernel's chunk loop): the loop is emitted as tl.range(..., num_stages=N), and
    # Triton then loads the next N - 1 steps' inputs (into shared memory) while a step computes.
    # Triton pipelines a loop without tl.dot only when the loop itself asks; a launch's num_stages does
    # not reach it.  None: no directive (plain range); 1: none either.
    loop_stages: Optional[int] = None
    # The same for mixed-order kernels' row loops alone (None: loop_stages), so their pipelining can be
    # measured apart from the forward's loops.
    mixed_order_loop_stages: Optional[int] = None
    # A mixed-order kernel's row held as static chunks instead of one padded block: at most
    # mixed_order_row_chunks chunks of a power of two columns, each at least mixed_order_min_chunk, where they
    # cover the row in fewer lanes than the padded block (heuristics.mixed_order_row_chunk; 1: always the
    # padded block); the lanes saved hold the next row's loads (mixed_order_prefetch).
    mixed_order_row_chunks: int = 8
    mixed_order_min_chunk: int = _by_mode(64, 1024)
    # Load the next row block's inputs at the top of each step of a mixed-order kernel's row loop, so they are in
    # flight through the current block's reductions and stores (codegen.kernel.prefetch_next_rows): "wide"
    # kernels only (one program per SM, which has no other program to overlap: mixed_order_wide_bytes), "all",
    # or "off".  Not with mixed_order_loop_stages (Triton's own pipelining of the loop).
    mixed_order_prefetch: str = "wide"

    # --- pointwise -------------------------------------------------------------------------
    # Elements per program of a 1-D pointwise kernel (a power of two).
    pointwise_block: int = _by_mode(65_536, 1024)
    # "auto" uses 2-D tiles when a load is transposed relative to the output, else unrolls a short
    # dim when that saves streaming loads (below), else 1-D; "1d" / "2d" / "unrolled" force one
    # ("unrolled" is 1-D where the output has no short dim to unroll).
    pointwise_tiling: str = "auto"
    # Unrolled tiling: each program computes every index of one short output dim (extent at most
    # this, not the last dim) for a block of the other dims, so a load that does not depend on that
    # dim is issued once for all of them instead of once per output -- mHC post_res reads each
    # x_streams row once for its 4 output streams, not 4 times.  1: never unroll; at most
    # MAX_UNROLL_EXTENT (each index is one more copy of the kernel body).
    pointwise_unroll_max_extent: int = 8
    # Elements per 2-D pointwise tile (YBLOCK * XBLOCK).
    pointwise_tile_numel: int = _by_mode(65_536, 1024)

    # --- fusion ----------------------------------------------------------------------------
    # Master switch for the scheduler's fusions (pointwise chains, epilogues, siblings).
    fusion: bool = True
    # Inline pointwise producers into their consumers (recompute instead of store + load).
    inline_pointwise: bool = True
    # Largest expression (ops calls, after inlining) a producer may have and still be inlined.
    max_inline_ops: int = 96
    # A producer with more users than this is stored once instead of recomputed per user (except a
    # widening cast such as x.float(): storing it moves more bytes than rereading its input).
    max_inline_users: int = 4

    # --- codegen / runtime -----------------------------------------------------------------
    # Use int64 index arithmetic in every kernel (it is used anyway when an index can pass
    # 2**31 - 1).
    force_int64_indexing: bool = False
    # L2 eviction hints on the loads in a loop (a reduction's chunk loop, a mixed-order kernel's row
    # loop; tl.load's eviction_policy): 'evict_last'
    # where the kernel reads the buffer again in a later pass or every program reads it (a row
    # vector such as a layer norm's weight), 'evict_first' on the last streaming read, so a
    # two-pass looped reduction finds its rows still in L2 on the second pass.  No effect on
    # results, and none in the interpreter.
    eviction_hints: bool = True
    # Inside a loop, write each load (and the index it needs) as early in its straight-line block as its
    # inputs allow (codegen.kernel.hoist_loads), so a row's loads are all in flight before its first reduction.
    hoist_loads: bool = True
    # Move a load (and an index) that does not change inside a loop above the loop (codegen.kernel.
    # lift_invariant_loads): a mixed-order kernel's row loop would read its weight vector again on every row.
    lift_invariant_loads: bool = True
    # Where a whole row is in one block (persistent and mixed-order kernels), take a load of each row's first
    # element -- the shift of layer norm's two-pass variance -- from the row already in registers (its lane 0,
    # bit-exact) instead of a second, strided load (codegen.kernel.TritonKernel.row_element).
    row_elements_from_registers: bool = True
    # In a reduction kernel none of whose loads moves along the reduced axis (every input expanded along it),
    # load each value over the whole [XBLOCK, RBLOCK] tile instead of as an [XBLOCK, 1] block: Triton
    # otherwise lays the tile out a row per thread (codegen.reduction.reads_along_reduced_axis).
    spread_row_loads: bool = True
    # num_warps of every launch (None: one warp per elements_per_warp elements of the block, at least 4 and
    # at most max_num_warps; a streaming split partial takes split_streaming_warps).  GPU only.
    num_warps: Optional[int] = None
    elements_per_warp: int = 512
    # ... but kernels whose grid is one wave of looping programs (split partials, mixed-order kernels) take
    # one warp per one_wave_elements_per_warp: their warps per SM are fixed by it.
    one_wave_elements_per_warp: int = 256
    max_num_warps: int = 16
    # A split reduction's partial pass of one reduction that loops over at least split_streaming_min_steps
    # RBLOCK steps per program streams its chunk at split_streaming_warps warps (a whole SM's warp slots at
    # two programs per SM).  Launch-bound partials, and partials of several reductions (whose registers do
    # not fit two such programs an SM), keep the one-wave warps.
    split_streaming_warps: int = 32
    split_streaming_min_steps: int = 8
    # A split reduction runs its final pass in the partial kernel: the last of a row block's partial programs
    # to finish (an int32 arrival count per row block, kept zeroed per device and stream by the runtime)
    # reduces the block's partials in split order, as the final kernel would, when that is at most
    # split_last_program_max_numel partials.  One launch, not two: less host time where a split is
    # launch-bound.  Off: a second kernel.
    split_last_program_final: bool = True
    split_last_program_max_numel: int = 4096
    # How the last program learns that the others' partials are in.  "fence": each program stores its
    # partials and counts in with an acq_rel atomic.  "tagged": each program writes each partial with a flag
    # bit into a 64-bit slot (a relaxed atomic exchange; slots kept zeroed per device and stream) and counts
    # in relaxed; the last polls its block's slots, one thread to a slot (checked in the compiled layout,
    # compiler.layouts), reduces them in split order and zeroes them: no fence in any program.  Partials of
    # 32 bits or fewer only (an int64 index or a float64 sum takes "fence").
    split_last_program_sync: str = "tagged"
    # Let Triton / LLVM contract a * b + c into one FMA (Triton's enable_fp_fusion).  Off: contraction
    # changes rounding where the IR says otherwise (layer norm's backward at N = 1 gave dx = 5.7e-7 for an
    # exact 0).  Passed to every generated and GEMM template launch.  TRITONDIFF_COMPILER_FP_FUSION=1.
    fp_fusion: bool = dataclasses.field(default_factory=lambda: _env_flag("TRITONDIFF_COMPILER_FP_FUSION"))
    # bf16 conversions as Triton's own casts (one cvt instruction, round to nearest even on a GPU) instead
    # of the prelude's integer helpers, which exist because Triton's interpreter truncates fp32 -> bf16 and
    # loses bf16 subnormals; the helpers cost about ten integer operations an element.  The interpreter keeps
    # the helpers.
    native_bf16_casts: bool = bool(_by_mode(False, True))
    # ATen ops (e.g. "aten.exp.default" or "aten.exp") lowered to ExternKernel regardless of
    # the registry.  TRITONDIFF_COMPILER_FALLBACK, comma separated.
    fallback_ops: frozenset = dataclasses.field(default_factory=lambda: frozenset(
        o.strip() for o in _env("TRITONDIFF_COMPILER_FALLBACK", "").split(",") if o.strip()))
    # How a compiled graph executes: "triton" (generated kernels), "ir" (the fused IR run by the
    # eager evaluator), "ir_unfused" (the IR straight out of lowering, run by the evaluator).
    # Comparing the three tells a lowering bug from a fusion bug from a codegen bug.
    # TRITONDIFF_COMPILER_EXECUTION.
    execution: str = dataclasses.field(default_factory=lambda: _env("TRITONDIFF_COMPILER_EXECUTION", "triton"))

    # Run a graph in compiler.lean's runtime (one autograd.Function for a training graph, a plain call
    # for inference) instead of AOTAutograd's runtime wrappers, where the graph needs none of them (no
    # input mutation, no output aliasing, no tensor subclass, ...: compiler.lean lists them).  Read when
    # dynamo compiles a frame (torch._dynamo.reset() to change a compiled function).
    # TRITONDIFF_COMPILER_LEAN_RUNTIME=0: off.
    # How a training graph is split into forward and backward (compiler.partition): "min_cut" saves the
    # fewest bytes for the backward and recomputes the rest there, reductions over rows that fit one block
    # included (layer norm over rows of 16 saves neither mean nor rstd); "default" saves everything the
    # backward uses.  Read when dynamo compiles a frame.  TRITONDIFF_COMPILER_PARTITIONER.
    partitioner: str = dataclasses.field(default_factory=lambda: _env("TRITONDIFF_COMPILER_PARTITIONER", "min_cut"))
    lean_runtime: bool = dataclasses.field(default_factory=lambda: _env_flag(
        "TRITONDIFF_COMPILER_LEAN_RUNTIME") if "TRITONDIFF_COMPILER_LEAN_RUNTIME" in os.environ else True)

    # Rewrite hand-written attention (softmax(q @ k^T * scale [masked]) @ v) into scaled_dot_product_attention
    # before AOTAutograd (compiler.attention), as Inductor's pattern matcher does.  TRITONDIFF_COMPILER_FUSE_ATTENTION=0.
    fuse_attention: bool = dataclasses.field(default_factory=lambda: _env_flag(
        "TRITONDIFF_COMPILER_FUSE_ATTENTION") if "TRITONDIFF_COMPILER_FUSE_ATTENTION" in os.environ else True)

    # --- matmul templates and autotuning (compiler.templates, compiler.autotune) --------------
    # How mm / addmm / bmm with an inner size past matmul_small_k_max run: "template" (the Triton
    # GEMM template with a heuristic tile and fused pointwise epilogues), "extern" (call ATen),
    # "autotune" (benchmark a few template tiles and the ATen call, cache the winner), "auto"
    # (ATen on CUDA unless the template reads an operand narrow; the template elsewhere:
    # lowerings.matmul).  TRITONDIFF_COMPILER_MATMUL.
    matmul: str = dataclasses.field(default_factory=lambda: _env("TRITONDIFF_COMPILER_MATMUL", "auto"))
    # Inner sizes (K) at or below this are not given to the GEMM template (tl.dot wants K >= 16;
    # such matmuls are lowered as pointwise + reduction, or call ATen).
    matmul_small_k_max: int = 16
    # An fp32 GEMM whose operands are both fp16 / bf16 values widened by the graph (read narrow by
    # the template's cast prologue) multiplies them on tensor cores: exact products, fp32 sums
    # (templates.gemm.GemmTemplate.dot_dtype).  False: widen and use the fp32 "ieee" dot.
    matmul_narrow_dot: bool = True
    # Autotune every generated kernel (pointwise / reduction block sizes, warps, stages) and every
    # GEMM template (as matmul="autotune").  Off by default and in CI.  TRITONDIFF_COMPILER_AUTOTUNE=1.
    autotune: bool = dataclasses.field(default_factory=lambda: _env_flag("TRITONDIFF_COMPILER_AUTOTUNE"))
    # Directory of the persistent autotune cache (autotune.sqlite3).  TRITONDIFF_AUTOTUNE_CACHE.
    autotune_cache_dir: str = dataclasses.field(default_factory=lambda: _env(
        "TRITONDIFF_AUTOTUNE_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "tritondiff")))
    # Keep tuned choices on disk (False: in memory for this process only).
    autotune_persist: bool = True
    # Under Triton's interpreter, time every candidate once (slow) instead of taking the first.
    autotune_cpu_timing: bool = False
    # After tuning, run the winner once more from pristine inputs and compare with the real
    # launch: a trial that leaked state into the real arguments raises AutotuneError.
    autotune_recheck: bool = True

    # --- debugging -------------------------------------------------------------------------
    # Check the IR between pipeline steps (dtypes, shapes, in-bounds loads).
    # TRITONDIFF_COMPILER_VERIFY=1.
    verify_ir: bool = dataclasses.field(default_factory=lambda: _env_flag("TRITONDIFF_COMPILER_VERIFY"))
    # Directory each compiled graph's FX graph, IR before/after fusion, Triton source and
    # launch plan are written to (None: kept in memory only).  TRITONDIFF_COMPILER_DUMP.
    dump_dir: Optional[str] = dataclasses.field(default_factory=lambda: _env_opt("TRITONDIFF_COMPILER_DUMP"))
    # How many recent compilations compiler.dump.last_artifacts() can return.
    keep_artifacts: int = 16
    # Where generated modules are written so Triton can read their source.
    # TRITONDIFF_COMPILER_CACHE.
    cache_dir: str = dataclasses.field(default_factory=lambda: _env(
        "TRITONDIFF_COMPILER_CACHE", os.path.join(tempfile.gettempdir(), f"tritondiff-compiler-{os.getuid()}")))

    @contextlib.contextmanager
    def patch(self, **changes: Any) -> Iterator["CompilerConfig"]:
        """Temporarily override knobs (``with config.patch(reduction_strategy="looped"): ...``)."""
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
_NOT_IN_KEY = frozenset({"lean_runtime", "partitioner", "execution", "verify_ir", "dump_dir", "keep_artifacts", "cache_dir",
                         "autotune_cache_dir", "autotune_persist", "autotune_cpu_timing", "autotune_recheck"})


_CHOICES = {
    # codegen.reduction.FORCIBLE (config sits below codegen; tests/compiler/test_reduction.py holds them equal)
    "reduction_strategy": ("auto", "persistent", "looped", "split"),
    "pointwise_tiling": ("auto", "1d", "2d", "unrolled"),
    "execution": ("triton", "ir", "ir_unfused"),
    "matmul": ("auto", "template", "extern", "autotune"),
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
