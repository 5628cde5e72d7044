"""The GEMM template: mm / addmm / bmm as one tiled Triton kernel with an epilogue injection point.

Each program computes a ``BLOCK_M x BLOCK_N`` tile of ``C = A @ B`` (one batch of a bmm per
grid column; past CUDA's 65,535 columns the batch folds into grid axis 0 with the tiles),
walking K in ``BLOCK_K`` chunks and accumulating in fp32 with ``tl.dot``.
Programs are numbered in groups of ``GROUP_M`` tile rows so that neighbouring programs share
A rows and B columns in L2 (the "grouped ordering" of tiled GEMMs).  Everything the compiler
knows is baked into the source: sizes, strides and offsets of the operands (a transposed or
sliced operand is just other strides), whether K needs a mask, whether 64-bit offsets are
needed.  Tile sizes are literals too, so each configuration is its own kernel.

Under Triton's interpreter the product is written as a broadcast multiply and an fp32 sum
(IEEE inf / NaN semantics, unlike the interpreter's numpy ``tl.dot``), with smaller tiles.

An operand may be stored narrower than the template computes (the *cast prologue*,
``lowerings.matmul_operands``): an fp16 / bf16 buffer that the graph up-casts to fp32 is loaded
as it is and each tile widened in the K loop, exactly, instead of a separate kernel writing an
fp32 copy; the template's ATen equivalent (``WidenedCall``) widens those operands first.

Rows past M and columns past N are read at ``index % M`` / ``index % N`` (valid addresses,
values never stored), so the inner loop's loads need a mask only when K is not a multiple of
BLOCK_K.  After the loop: ``acc * alpha + beta * bias`` for addmm, in fp32, cast to the output
dtype once -- then the *epilogue*: the pointwise consumers the scheduler moved into this
kernel (``templates.epilogue``) are emitted by the compiler's ordinary Triton interpretation
of their IR bodies, reading the GEMM result from registers, before the tile is stored.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional

import sympy
import torch
import triton

from tritondiff.base import device as _device
from tritondiff.base.limits import GRID_LIMITS

from .. import indexing
from ..codegen.kernel import CSEVar, KernelSpec, TritonKernel, cast_source, helper_bf16_casts
from ..codegen.nodes import INT32_SAFE, GroupContext, KernelResolver, canonical_index, publish
from ..codegen.triton_ops import TritonOps
from ..config import config
from ..exc import CodegenError
from ..ir import Buffer, ExternKernel, Layout, StridedView, use_resolver
from ..ops import use_handler
from ..scheduler import RSYM, XSYM, KernelGroup

YSYM = indexing.index_symbol("yindex")
ZSYM = indexing.index_symbol("zindex")
DTYPES = (torch.float32, torch.float16, torch.bfloat16)
#: CUDA's programs per grid axis (harness.launches.GRID_LIMITS): a batch of more GEMMs than axis 1 holds runs
#: folded into axis 0.
MAX_GRID_X, MAX_GRID_Y = GRID_LIMITS[:2]
#: The smallest tile edge of every config (``_clamp_pow2(.., 16, ..)``): the most programs a GEMM can need.
MIN_BLOCK = 16


def grid_fits(batch: int, m: int, n: int) -> bool:
    """Whether the grid fits CUDA's limits at any tile config (all have edges of at least
    :data:`MIN_BLOCK`): ``batch`` on axis 1 (the tiles of one GEMM on axis 0 stay far below 2^31), or,
    past :data:`MAX_GRID_Y`, the batch folded with the tiles into axis 0."""
    return batch <= MAX_GRID_Y or batch * triton.cdiv(m, MIN_BLOCK) * triton.cdiv(n, MIN_BLOCK) <= MAX_GRID_X


def _folded(node: "GemmTemplate") -> bool:
    """The batch rides axis 0 with the tiles (``pid = batch * tiles + tile``) instead of axis 1."""
    return node.batch > MAX_GRID_Y


# ------------------------------------------------------------------------------ the IR node

class GemmTemplate(ExternKernel):
    """``out = alpha * (A @ B) + beta * bias`` over ``batch`` matrices, computed by the template.

    An ``ExternKernel`` to the scheduler (its inputs are stored before it runs, its output is an
    ``ExternOutput``); ``target`` with the argument ``template`` is the equivalent ATen call, used
    by the eager execution modes and as the ATen candidate when autotuning.  The scheduler's
    epilogue hook fills ``epilogue`` (a pointwise KernelGroup run inside this kernel) and
    ``store_output`` (False when nothing but the epilogue reads the GEMM result).
    """

    def __init__(self, name: str, target: Any, template: tuple, inputs: list, origin: str, *, batch: int,
                 m: int, n: int, k: int, dtype: torch.dtype, alpha: float = 1.0, beta: float = 0.0,
                 operands: tuple[int, int, Optional[int]] = (0, 1, None)):
        if any(x.get_dtype() != dtype for x in inputs):
            target = WidenedCall(target, dtype)
        super().__init__(name, target, template, inputs, [], None, origin)
        self.batch, self.m, self.n, self.k = batch, m, n, k
        self.dtype = dtype
        self.alpha, self.beta = float(alpha), float(beta)
        self.operands = operands  # positions of A, B and bias (or None) in ``inputs``
        self.epilogue: Optional[KernelGroup] = None
        self.store_output = True
        self.row_reductions: Optional[KernelGroup] = None  # reductions over A's rows run in the K loop

    @property
    def output(self) -> Buffer:
        return self.outputs[0]

    @property
    def dot_dtype(self) -> torch.dtype:
        """The dtype the K-loop multiplies in on a GPU.

        An fp32 GEMM whose A and B are both read narrow (the same fp16 / bf16, widened by the
        graph) multiplies the narrow tiles on tensor cores with fp32 accumulation when
        ``config.matmul_narrow_dot``: each product of two fp16 / bf16 values is exact in fp32,
        so this differs from the widened fp32 ("ieee") dot only in how the fp32 sums round.
        """
        a, b = (self.inputs[i].get_dtype() for i in self.operands[:2])
        if self.dtype == torch.float32 and a == b and a in (torch.float16, torch.bfloat16) \
                and config.matmul_narrow_dot:
            return a
        return self.dtype

    @property
    def epilogue_nodes(self) -> list:
        return list(self.epilogue.placed) if self.epilogue is not None else []

    def a_operand(self) -> tuple[str, Layout]:
        """(buffer name, layout) through which A is read (a view's own strides and offset)."""
        return _operand(self.inputs[self.operands[0]])

    def a_element(self, row: sympy.Expr, col: sympy.Expr) -> sympy.Expr:
        """Storage offset of A[row, col] (a non-batched template); a dim of size 1 is indexed by 0."""
        _, layout = self.a_operand()
        return layout.index((row if self.m > 1 else 0, col if self.k > 1 else 0))

    @property
    def row_reduction_nodes(self) -> list:
        return list(self.row_reductions.placed) if self.row_reductions is not None else []

    def describe(self) -> str:
        shape = f"{self.batch}x" if self.batch > 1 else ""
        ep = f", epilogue {self.epilogue.names}" if self.epilogue is not None else ""
        if self.row_reductions is not None:
            ep += f", row reductions of A {self.row_reductions.names} in the K loop"
        return (f"{self.name}: GEMM template {shape}{self.m}x{self.n}x{self.k} {self.dtype} ({self.origin}{ep}, "
                f"{'stores' if self.store_output else 'keeps in registers'} {self.output.name})")

    def __repr__(self) -> str:
        return f"GemmTemplate({self.name}, {self.batch}x{self.m}x{self.n}x{self.k}, {self.dtype})"


class WidenedCall:
    """``op`` with its narrower tensor arguments widened to ``dtype`` first.

    The ATen equivalent of a template that reads some operands narrow (cast prologue): the
    eager execution modes and the ATen autotune candidate call this instead of ``op``.
    """

    def __init__(self, op: Any, dtype: torch.dtype):
        self.op, self.dtype = op, dtype
        self._schema = op._schema  # the scheduler asks whether the call mutates its inputs

    def name(self) -> str:
        return self.op.name()

    def _widen(self, x: Any) -> Any:
        return x.to(self.dtype) if isinstance(x, torch.Tensor) and x.dtype != self.dtype else x

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.op(*map(self._widen, args), **{key: self._widen(v) for key, v in kwargs.items()})


# --------------------------------------------------------------------------- configurations

@dataclasses.dataclass(frozen=True)
class GemmConfig:
    """One tile configuration (seed 002, section 5.4: M_t, N_t, K_t, stages, warps)."""

    block_m: int
    block_n: int
    block_k: int
    group_m: int = 8
    num_stages: int = 3
    num_warps: int = 4

    @property
    def name(self) -> str:
        return (f"bm{self.block_m}_bn{self.block_n}_bk{self.block_k}_g{self.group_m}_s{self.num_stages}"
                f"_w{self.num_warps}")

    def smem_bytes(self, itemsize: int) -> int:
        return max(self.num_stages - 1, 1) * (self.block_m + self.block_n) * self.block_k * itemsize


def _clamp_pow2(n: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, triton.next_power_of_2(max(int(n), 1))))


def heuristic_config(m: int, n: int, k: int, dtype: torch.dtype) -> GemmConfig:
    """The tile used when nothing is tuned: big tiles for big problems, shrunk to tiny ones.

    Under the interpreter every program costs milliseconds, so tiles are as large as the problem
    allows (few programs, few K steps); on a GPU 128x128 (64x64 for fp32) tiles keep the tensor
    cores fed while shared memory holds three pipeline stages.
    """
    if _device.is_interpreter():  # the product tile BM x BK x BN stays at 2**17 elements
        return GemmConfig(_clamp_pow2(m, 16, 64), _clamp_pow2(n, 16, 64), _clamp_pow2(k, 16, 32), 8, 1, 4)
    wide = dtype != torch.float32
    bm = _clamp_pow2(m, 16, 128 if wide else 64)
    bn = _clamp_pow2(n, 16, 128 if wide else 64)
    bk = _clamp_pow2(k, 16, 64 if wide else 32)
    warps = 8 if bm * bn >= 128 * 128 else 4
    return GemmConfig(bm, bn, bk, 8, 3 if bm * bn >= 64 * 64 else 4, warps)


_GPU_CANDIDATES = (
    GemmConfig(128, 128, 64, 8, 3, 8), GemmConfig(128, 128, 32, 8, 4, 8), GemmConfig(128, 64, 32, 8, 4, 4),
    GemmConfig(64, 128, 32, 8, 4, 4), GemmConfig(64, 64, 64, 8, 3, 4), GemmConfig(128, 256, 64, 8, 3, 8),
    GemmConfig(64, 64, 32, 8, 5, 4), GemmConfig(32, 64, 32, 8, 5, 2), GemmConfig(16, 64, 64, 8, 4, 2),
)
SMEM_LIMIT = 200 * 1024


def candidate_configs(m: int, n: int, k: int, dtype: torch.dtype) -> list[GemmConfig]:
    """Tiles worth benchmarking: the heuristic one first, then a fixed menu that fits the problem."""
    first = heuristic_config(m, n, k, dtype)
    out = [first]
    if _device.is_interpreter():
        smaller = GemmConfig(_clamp_pow2(m, 16, 32), _clamp_pow2(n, 16, 32), _clamp_pow2(k, 16, 32), 4, 1, 4)
        return out + ([smaller] if smaller != first else [])
    itemsize = torch.empty((), dtype=dtype).element_size()
    for cfg in _GPU_CANDIDATES:
        fitted = dataclasses.replace(cfg, block_m=min(cfg.block_m, _clamp_pow2(m, 16, 256)),
                                     block_n=min(cfg.block_n, _clamp_pow2(n, 16, 256)),
                                     block_k=min(cfg.block_k, _clamp_pow2(k, 16, 128)))
        if fitted.smem_bytes(itemsize) <= SMEM_LIMIT and fitted not in out:
            out.append(fitted)
    return out


# ------------------------------------------------------------------------------- codegen

def _operand(x: Any) -> tuple[str, Layout]:
    if isinstance(x, StridedView):
        return x.buffer.name, x.layout
    if isinstance(x, Buffer):
        return x.name, x.layout
    raise CodegenError(f"GEMM operand {x!r} is not a realized buffer")


def needs_int64(node: GemmTemplate, ctx: Optional[GroupContext]) -> bool:
    spans = [_operand(x)[1].storage_span for x in node.inputs] + [node.output.layout.storage_span]
    if ctx is not None:
        for p in ctx.group.placed:
            spans.append(p.node.buf.layout.storage_span)
            spans.extend(r.buffer.layout.storage_span for r in p.node.info.reads)
    return max(spans, default=0) >= INT32_SAFE or node.batch * node.m * node.n >= INT32_SAFE


class _EpilogueResolver(KernelResolver):
    """Reads of the GEMM output (and of row reductions of A) resolve to values held in registers."""

    def __init__(self, kernel: TritonKernel, ctx: GroupContext, held: set[str]):
        super().__init__(kernel, ctx)
        self.names = self.names | held


class _TileResolver(KernelResolver):
    """Inside the K loop: a row reduction's reads of A are the tile ``a`` the loop just loaded."""

    def __init__(self, kernel: TritonKernel, ctx: GroupContext, node: GemmTemplate):
        super().__init__(kernel, ctx)
        self.a_name, layout = node.a_operand()
        self.want = indexing.simplify(node.a_element(YSYM, RSYM), kernel.bounds())
        self.tile = CSEVar("a", layout.dtype)

    def load(self, buffer: Buffer, index: tuple):
        if buffer.name in self.ctx.inlined:
            return buffer.data.inner_fn(index)
        return self.load_storage(buffer, buffer.layout.index(index))

    def load_storage(self, buffer: Buffer, offset: sympy.Expr):
        if buffer.name in self.ctx.inlined:
            return buffer.data.inner_fn(indexing.delinearize(offset, buffer.layout.size))
        got = indexing.simplify(sympy.sympify(offset), self.k.bounds())
        if buffer.name != self.a_name or got != self.want:
            raise CodegenError(f"{self.k.name}: a row reduction reads {buffer.name} at {got}, the K loop holds "
                               f"{self.a_name} at {self.want} (a fusion legality bug)")
        return self.tile


def template_kernel(name: str, node: GemmTemplate, cfg: GemmConfig, ctx: Optional[GroupContext],
                    buffers: dict) -> KernelSpec:
    """The template's kernel for one tile configuration, with the epilogue of ``ctx`` (or none); bf16 cast
    through the prelude's helpers (``codegen.kernel.helper_bf16_casts``: measured faster in a GEMM)."""
    with helper_bf16_casts():
        return _template_kernel(name, node, cfg, ctx, buffers)


def _template_kernel(name: str, node: GemmTemplate, cfg: GemmConfig, ctx: Optional[GroupContext],
                     buffers: dict) -> KernelSpec:
    k = TritonKernel(name, buffers, what=f"GEMM template {name}", int64=needs_int64(node, ctx))
    bm, bn, bk = cfg.block_m, cfg.block_n, cfg.block_k
    k.meta.update(kind="gemm", config=cfg.name, num_stages=cfg.num_stages, block_m=bm, block_n=bn, block_k=bk)
    a_pos, b_pos, bias_pos = node.operands
    a_name, a_lay = _operand(node.inputs[a_pos])
    b_name, b_lay = _operand(node.inputs[b_pos])
    pa, pb = k.arg(a_name), k.arg(b_name)
    _emit_tile_indices(k, node, cfg)
    rows = None
    if node.row_reductions is not None:
        rows = GroupContext(node.row_reductions, ctx.inlined, ctx.stored, buffers, subst={XSYM: YSYM})
    acc = _emit_main_loop(k, node, cfg, pa, a_lay, pb, b_lay, rows)
    k.active = ([ZSYM] if node.batch > 1 else []) + [YSYM, XSYM]
    value = _emit_alpha_beta(k, node, acc, bias_pos)
    out = node.output
    flat = (ZSYM * node.m * node.n if node.batch > 1 else 0) + YSYM * node.n + XSYM
    out_index = indexing.delinearize(flat, out.layout.size)  # the path epilogue reads take too
    canonical = canonical_index(k, out_index)
    k.set_register(out.name, value, canonical, indexing.simplify(out.layout.index(canonical), k.bounds()))
    if node.store_output:
        k.store(out.name, out.layout.index(out_index), value)
    if ctx is not None:
        _emit_epilogue(k, ctx, {out.name} | {p.name for p in node.row_reduction_nodes}, flat)
    grid_mn = triton.cdiv(node.m, bm) * triton.cdiv(node.n, bn)
    k.meta["comments"] = [f"GEMM {node.batch}x{node.m}x{node.n}x{node.k} {node.dtype}, tile {cfg.name}"
                          + (f", epilogue {ctx.group.names}" if ctx is not None else "")
                          + (f", row reductions {rows.group.names}" if rows is not None else "")]
    grid = (grid_mn * node.batch,) if _folded(node) else (grid_mn, node.batch) if node.batch > 1 else (grid_mn,)
    return KernelSpec(name, k.source(), grid,
                      list(k.args.values()), cfg.num_warps, dict(k.meta))


def _emit_tile_indices(k: TritonKernel, node: GemmTemplate, cfg: GemmConfig) -> None:
    m, n = node.m, node.n
    bm, bn, group = cfg.block_m, cfg.block_n, cfg.group_m
    pid_m_count, pid_n_count = triton.cdiv(m, bm), triton.cdiv(n, bn)
    cast = ".to(tl.int64)" if k.int64 else ""
    if _folded(node):
        k.emit(f"zindex = (tl.program_id(0) // {pid_m_count * pid_n_count}){cast}")
        k.emit(f"pid = tl.program_id(0) % {pid_m_count * pid_n_count}")
    else:
        k.emit("pid = tl.program_id(0)")
    k.emit(f"group_id = pid // {group * pid_n_count}")
    k.emit(f"first_pid_m = group_id * {group}")
    k.emit(f"group_size_m = tl.minimum({pid_m_count} - first_pid_m, {group})")
    k.emit(f"pid_m = first_pid_m + ((pid % {group * pid_n_count}) % group_size_m)")
    k.emit(f"pid_n = (pid % {group * pid_n_count}) // group_size_m")
    if node.batch > 1 and not _folded(node):
        k.emit(f"zindex = tl.program_id(1){cast}")
    k.emit(f"yindex = pid_m{cast} * {bm} + tl.arange(0, {bm})[:, None]")
    k.emit(f"xindex = pid_n{cast} * {bn} + tl.arange(0, {bn})[None, :]")
    if node.batch > 1:
        k.add_axis(ZSYM, node.batch, 1, mask=False)
    k.add_axis(YSYM, m, bm, mask=m % bm != 0)
    k.add_axis(XSYM, n, bn, mask=n % bn != 0)
    k.guard([bm, bn], "accumulator tile")
    k.tile = [bm, bn]
    if m % bm:
        k.emit(f"ymask = yindex < {m}")
    if n % bn:
        k.emit(f"xmask = xindex < {n}")


def _emit_main_loop(k: TritonKernel, node: GemmTemplate, cfg: GemmConfig, pa: str, a_lay: Layout, pb: str,
                    b_lay: Layout, rows: Optional[GroupContext] = None) -> CSEVar:
    """The K loop: fp32 accumulator, operands read through their strides; ``rows``: row reductions of A
    folded from each A tile (``templates.row_reductions``), registers after the loop."""
    m, n, kk = node.m, node.n, node.k
    bk = cfg.block_k
    batched = node.batch > 1
    sa = a_lay.stride[-3:] if batched else (0,) + tuple(a_lay.stride[-2:])
    sb = b_lay.stride[-3:] if batched else (0,) + tuple(b_lay.stride[-2:])
    row_src = f"(yindex % {m})" if m % cfg.block_m else "yindex"
    col_src = f"(xindex % {n})" if n % cfg.block_n else "xindex"
    k.emit(f"rk = tl.arange(0, {bk})")
    z_a = f" + zindex * {sa[0]}" if batched and sa[0] else ""
    z_b = f" + zindex * {sb[0]}" if batched and sb[0] else ""
    k.emit(f"a_ptrs = {pa} + ({a_lay.offset}{z_a} + {row_src} * {sa[1]} + rk[None, :] * {sa[2]})")
    k.emit(f"b_ptrs = {pb} + ({b_lay.offset}{z_b} + rk[:, None] * {sb[1]} + {col_src} * {sb[2]})")
    k.emit(f"acc = tl.zeros([{cfg.block_m}, {cfg.block_n}], dtype=tl.float32)")
    folds = _init_row_reductions(k, rows, cfg, kk) if rows is not None else []
    ragged = kk % bk != 0
    with k.loop("k0", 0, kk, bk, over_reduction=True):
        if ragged:
            k.emit(f"a = tl.load(a_ptrs, mask=rk[None, :] < {kk} - k0, other=0.0)")
            k.emit(f"b = tl.load(b_ptrs, mask=rk[:, None] < {kk} - k0, other=0.0)")
        else:
            k.emit("a = tl.load(a_ptrs)")
            k.emit("b = tl.load(b_ptrs)")
        if _device.is_interpreter():
            # The interpreter's tl.dot is numpy's BLAS matmul, which does not follow IEEE for inf
            # products (+inf + -inf gave -inf, not NaN: found by the harness).  Products and fp32
            # sums written out give what the GPU's fp32 dot gives, NaN and inf included.
            k.guard([cfg.block_m, bk, cfg.block_n], "interpreter product tile")
            wa, wb = _widened("a", a_lay), _widened("b", b_lay)
            k.emit(f"acc += tl.sum({wa}[:, :, None] * {wb}[None, :, :], 1)")
        elif node.dot_dtype != node.dtype:
            # both operands narrow (GemmTemplate.dot_dtype): tensor cores, exact products, fp32 sums.
            k.emit("acc += tl.dot(a, b, out_dtype=tl.float32)")
        elif node.dtype == torch.float32:
            # "ieee": no TF32, as torch's default fp32 matmul (operands read narrow are widened first).
            wa, wb = _widened("a", a_lay), _widened("b", b_lay)
            k.emit(f'acc += tl.dot({wa}, {wb}, input_precision="ieee")')
        else:
            k.emit("acc += tl.dot(a, b)")
        if folds:
            _fold_row_reductions(k, node, rows, folds, cfg)
        k.emit(f"a_ptrs += {bk * sa[2]}")
        k.emit(f"b_ptrs += {bk * sb[1]}")
    if folds:
        _finish_row_reductions(k, rows, folds)
    return CSEVar("acc", torch.float32)


def _init_row_reductions(k: TritonKernel, rows: GroupContext, cfg: GemmConfig, kk: int) -> list:
    """One [BLOCK_M, BLOCK_K] lane accumulator per row reduction, before the K loop: [(op, names)]."""
    from ..codegen.reduction import reduction_op
    k.add_axis(RSYM, kk, cfg.block_k, mask=kk % cfg.block_k != 0)
    return [(op, op.init(k, [cfg.block_m, cfg.block_k], kk)) for op in map(reduction_op, rows.group.placed)]


def _fold_row_reductions(k: TritonKernel, node: GemmTemplate, rows: GroupContext, folds: list,
                         cfg: GemmConfig) -> None:
    """Each row reduction's body over this step's tile ``a``, folded into its lanes (lanes past K take the
    identity)."""
    saved_tile, saved_active = k.tile, k.active
    k.tile, k.active = [cfg.block_m, cfg.block_k], [YSYM, RSYM]
    k.emit("rindex = k0 + rk[None, :]")
    if node.k % cfg.block_k:
        k.emit(f"rmask = rindex < {node.k}")
    resolver = _TileResolver(k, rows, node)
    for p, (op, accs) in zip(rows.group.placed, folds):
        with use_handler(TritonOps(k)), use_resolver(resolver):
            value = p.node.buf.data.inner_fn(rows.index(p), rows.rindex(p))
        op.combine(k, accs, [op.prepare(k, value)])
    k.tile, k.active = saved_tile, saved_active


def _finish_row_reductions(k: TritonKernel, rows: GroupContext, folds: list) -> None:
    """After the K loop: each accumulator's lanes folded to one value per row, a register the epilogue reads."""
    saved_active = k.active
    k.active = [YSYM]
    for p, (op, accs) in zip(rows.group.placed, folds):
        value = op.finish(k, op.block(k, CSEVar(accs[0], op.repr_dtype), None))
        canonical = canonical_index(k, rows.index(p))
        layout = p.node.buf.layout
        k.set_register(p.name, value, canonical, indexing.simplify(layout.index(canonical), k.bounds()))
    k.active = saved_active


def _widened(var: str, lay: Layout) -> str:
    """Source of operand tile ``var`` in fp32 (bf16 bit-exactly, as every generated kernel widens it)."""
    return cast_source(CSEVar(var, lay.dtype), torch.float32)


def _emit_alpha_beta(k: TritonKernel, node: GemmTemplate, acc: CSEVar, bias_pos: Optional[int]) -> CSEVar:
    """``alpha * acc + beta * bias`` in fp32 (addmm), then the one rounding to the output dtype."""
    value = acc
    if node.alpha != 1.0:
        value = k.newvar(f"{value.name} * {node.alpha!r}", torch.float32)
    if bias_pos is not None and node.beta != 0.0:
        bias = node.inputs[bias_pos]
        with use_handler(TritonOps(k)):
            b = bias.make_loader()((YSYM, XSYM))
        bf = k.newvar(cast_source(b, torch.float32), torch.float32) if b.dtype != torch.float32 else b
        scaled = bf.name if node.beta == 1.0 else f"{bf.name} * {node.beta!r}"
        value = k.newvar(f"{value.name} + {scaled}", torch.float32)
    if node.dtype == torch.float32:
        return value
    return k.newvar(cast_source(value, node.dtype), node.dtype)


def _emit_epilogue(k: TritonKernel, ctx: GroupContext, held: str, flat: sympy.Expr) -> None:
    """Each epilogue node's body, through the ordinary Triton ``ops`` interpretation.

    The group's flat row index becomes ``flat`` (batch, tile row, tile column), so its loads
    and stores address the tile; reads of the GEMM output come from the accumulator registers.
    """
    ctx.subst = {XSYM: flat}
    for p in ctx.group.placed:
        data = p.node.buf.data
        with use_handler(TritonOps(k)), use_resolver(_EpilogueResolver(k, ctx, held)):
            value = data.inner_fn(ctx.index(p))
        if not isinstance(value, CSEVar) or value.dtype != data.dtype:
            raise CodegenError(f"{p.name}: epilogue body returned {value!r}, node declares {data.dtype}")
        publish(k, ctx, p, value)


__all__ = ["GemmTemplate", "WidenedCall", "GemmConfig", "heuristic_config", "candidate_configs", "template_kernel",
           "DTYPES"]
