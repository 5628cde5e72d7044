"""The mixed-order strategy: row and column reductions of the same rows in one pass over the rows."""
from __future__ import annotations

from typing import Optional

import triton

from ... import indexing
from ...counters import counters
from ...heuristics import mixed_order_prefetch, mixed_order_row_chunk, mixed_order_warps
from ...scheduler import RSYM, XSYM, KernelGroup, domain_reads
from ..kernel import CSEVar, KernelSpec, TritonKernel
from ..nodes import GroupContext, evaluate
from .algebra import ReductionOp, reduction_op
from .base import ReductionStrategy, new_kernel
from .persistent import PersistentReduction, RowChunk
from .split import SplitReduction


def row_read_bytes(group: KernelGroup) -> int:
    """Bytes a lane of ``group``'s rows holds of the reads that move along the row and from row to row (each
    buffer and offset once), what a prefetch loads a second time: layer norm's backward, x and dy (w, the same
    for every row, is not prefetched)."""
    rows, seen = group.rows(), {}
    for _, read, offset in domain_reads(rows, skip=frozenset(rows.names)):
        if {RSYM, XSYM} <= offset.free_symbols:
            seen[(read.buffer.name, offset)] = read.buffer.get_dtype().itemsize
    return sum(seen.values())


class MixedOrderReduction(ReductionStrategy):
    """Row reductions and column reductions of the same rows, in one pass over the rows.

    Layer-norm backward reads x and dy for dx (per-row sums) and again for dW and dB
    (per-column sums over every row).  Here each program owns a contiguous range of rows
    and walks it XBLOCK whole rows at a time (RBLOCK >= the row length, so the row group
    runs as in the persistent strategy, all its passes on the same loaded tile).  On that
    tile each column reduction is evaluated too -- its body's output index is the column
    (``rindex``), its reduced index the row (``xindex``) -- and combined element-wise into
    an [XBLOCK, RBLOCK] accumulator that lives across the row loop (no cross-row reduce per
    step); after the loop the accumulator is folded over its rows once (``_fold_rows``).
    Loads of a shared input are the same expression in both parts, so the kernel's CSE
    reads it once.

    Kernel 1 stores each program's column partials to a workspace of programs x columns;
    kernel 2 is the split strategy's final pass: it reduces the partials of each column in
    program order (deterministic, no atomics) and runs the column group's epilogue.
    """

    name = "mixed_order"
    knobs = "mixed_order"
    forcible = False        # it needs a row group and a column group the scheduler paired

    def kernels(self, name, ctx, choice):
        group = ctx.group
        rows_per_program = choice.xblock * triton.cdiv(triton.cdiv(max(group.xnumel, 1), choice.splits),
                                                       choice.xblock)
        programs = max(1, triton.cdiv(group.xnumel, rows_per_program))
        partial = self._partial(f"{name}_partial", ctx, choice, rows_per_program, programs)
        columns = GroupContext(group.columns, ctx.inlined, ctx.stored, ctx.buffers)
        final = SplitReduction()._final(f"{name}_final", columns, choice, programs, partial)
        return [partial, final]

    def _partial(self, name, ctx, choice, rows_per_program, programs):
        group, cols = ctx.group, ctx.group.columns
        xnumel, rnumel, xblock, rblock = group.xnumel, group.rnumel, choice.xblock, choice.rblock
        k = new_kernel(name, ctx, "mixed_order", choice)
        width = mixed_order_row_chunk(rnumel, rblock)       # lanes of a row chunk (rblock: the whole padded row)
        lanes = xblock * triton.cdiv(rnumel, width) * width
        prefetch = mixed_order_prefetch(lanes, cols.accumulator_bytes(), row_read_bytes(group))
        k.meta.update(programs=programs, rows_per_program=rows_per_program, row_chunk=width,
                      prefetch_next_rows=prefetch)
        k.guard([xblock, width], "tile")
        k.tile = [xblock, width]
        k.add_axis(XSYM, xnumel, xblock, mask=xnumel % rows_per_program != 0)
        k.add_axis(RSYM, rnumel, width, mask=rnumel % width != 0)
        pid = "tl.program_id(0).to(tl.int64)" if k.int64 else "tl.program_id(0)"
        cast = ".to(tl.int64)" if k.int64 else ""
        if width < rblock:
            counters["mixed_order_row_chunks"] += 1
            k.emit(f"rbase = {k.arange(width, 'a row chunk')}{cast}[None, :]")
            k.row_chunks = chunks = []
            for c in range(triton.cdiv(rnumel, width)):
                symbol = indexing.index_symbol(f"rindex{c}")
                k.emit(f"{symbol.name} = {c * width} + rbase" if c else f"{symbol.name} = rbase")
                mask = f"rmask{c}" if (c + 1) * width > rnumel else None
                if mask:
                    k.emit(f"{mask} = {symbol.name} < {rnumel}")
                chunks.append(RowChunk(symbol, mask))
        else:
            k.emit(f"rbase = {k.arange(rblock, 'the row')}{cast}[None, :]")
            k.emit("rindex = rbase")
            k.whole_row = RSYM
            if k.axes[RSYM].mask:
                k.emit(f"rmask = rindex < {rnumel}")
            chunks = [RowChunk(RSYM, k.axes[RSYM].mask)]      # the whole row, its registers the loop's
        ops_ = {p.name: reduction_op(p) for p in cols.placed if p.kind == "reduction"}
        accs = {pname: [op.init(k, [xblock, width], rnumel)[0] for _ in chunks] for pname, op in ops_.items()}
        rows = GroupContext(group.rows(), ctx.inlined, ctx.stored, ctx.buffers)
        transposed = GroupContext(cols, ctx.inlined, ctx.stored, ctx.buffers, subst={XSYM: RSYM, RSYM: XSYM},
                                  held=frozenset(rows.group.names))
        pending = {(p.name, c) for p in cols.placed if p.kind == "reduction" for c in range(len(chunks))}
        passes = _column_passes(cols, rows.group)

        def column_terms(c: int, phase: Optional[int] = None) -> None:
            """Chunk ``c``'s terms of the column reductions (all those left, or those whose row values pass
            ``phase`` has by now: ``_column_passes``), combined into their accumulators."""
            for p in cols.placed:
                if (p.name, c) not in pending or (phase is not None and passes[p.name] != phase):
                    continue
                pending.discard((p.name, c))
                op = ops_[p.name]
                v = op.prepare(k, evaluate(k, transposed, p), axis=0)
                op.combine(k, [accs[p.name][c]], [v])    # element-wise: one lane per (row slot, column)
                if chunks[c].mask:
                    # lanes past the last column stay at the identity: a padded row's mask is known per lane
                    # at compile time, so their accumulation is dead code LLVM drops (16384 lanes for 10240
                    # columns: 49 of ~700 FADDs a row, sm_90)
                    ident = k.newvar(k.full(k.scalar_shape, op.identity(), op.repr_dtype), op.repr_dtype)
                    k.emit(f"{accs[p.name][c]} = tl.where({chunks[c].mask}, {accs[p.name][c]}, {ident.name})")

        if k.row_chunks:
            # a chunk's column terms as soon as the row pass has their inputs, before the pass's reductions:
            # the row's values they read (layer norm's dy and xhat) need not stay live through the barriers
            k.row_chunk_hook = column_terms
        with k.loop("xstep", 0, rows_per_program, xblock, choice.stages, over_reduction=False):
            k.emit(f"xindex = {pid} * {rows_per_program} + xstep + {k.arange(xblock, 'rows')}{cast}[:, None]")
            if k.axes[XSYM].mask:
                k.emit(f"xmask = xindex < {xnumel}")
            k.active = [XSYM]
            PersistentReduction().run_passes(k, rows, choice)
            k.row_chunk_hook = None
            for c, chunk in enumerate(chunks):
                with chunk.entered(k):
                    column_terms(c)
            k.active = [XSYM]
        workspaces = {}
        for pname, op in ops_.items():
            ws = k.workspace(f"{pname}_partials", programs * rnumel, op.repr_dtype)
            for c, chunk in enumerate(chunks):
                with chunk.entered(k):
                    folded = self._fold_rows(k, op, CSEVar(accs[pname][c], op.repr_dtype), xblock, width)
                    mask = f", {chunk.mask}" if chunk.mask else ""
                    k.emit(f"tl.store({ws} + ({pid} * {rnumel} + {chunk.symbol.name}), {folded.name}{mask})")
            workspaces[pname] = [(f"{pname}_partials", op.repr_dtype)]
        k.active = [XSYM, RSYM]
        k.meta["workspaces"] = workspaces
        k.meta["comments"] = [f"mixed-order reduction: {xnumel} rows x {rnumel}, rows reduced in registers, "
                              f"{len(ops_)} column reduction(s) into {programs} partials of {rows_per_program} rows, "
                              f"XBLOCK={xblock} RBLOCK={rblock}"]
        return KernelSpec(name, k.source(), (programs,), list(k.args.values()),
                          mixed_order_warps(xblock * rblock, cols.accumulator_bytes()), dict(k.meta))

    @staticmethod
    def _fold_rows(k: TritonKernel, op: ReductionOp, acc: CSEVar, xblock: int, rblock: int) -> CSEVar:
        """[XBLOCK, RBLOCK] lane accumulators -> [1, RBLOCK], once, after the row loop.

        Max / min / any / all are exact in any order: one block reduce.  A float sum of many
        rows folds in two stages, [A, B, RBLOCK] summed over B then A (A * B = XBLOCK), so no
        chain of additions is longer than ~sqrt(XBLOCK) even where the reduction runs
        sequentially (Triton's interpreter sums along a strided axis one row after another:
        3,626 equal rows in one chain came out 4e-5 off).
        """
        if op.rtype != "sum" or op.boolish or not op.repr_dtype.is_floating_point or xblock <= 64:
            return op.block(k, acc, None, axis=0)[0]
        b = 1 << ((xblock.bit_length() - 1) // 2)
        return k.newvar(f"tl.sum(tl.sum(tl.reshape({acc.name}, [{xblock // b}, {b}, {rblock}]), 1), 0)[None, :]",
                        op.repr_dtype)


def _column_passes(cols: KernelGroup, rows: KernelGroup) -> dict[str, int]:
    """Column reduction -> the row pass during which a mixed-order kernel can take its terms: its row-group
    inputs (per-row values, ``scheduler._column_reads_of_rows``) are a pass's per-row nodes, held from that
    pass's start, or a pass's reductions, held once the pass is over."""
    held = {q.name: q.phase + (q.kind == "reduction") for q in rows.placed}
    return {p.name: max((held[r.buffer.name] for r in p.node.info.reads if r.buffer.name in held), default=0)
            for p in cols.placed if p.kind == "reduction"}
