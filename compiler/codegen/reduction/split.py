"""The split strategy: programs per row block each reduce a chunk of the axis; a final pass (or the last
program to finish) reduces the partials in a fixed order."""
from __future__ import annotations

import contextlib
from typing import Optional

import torch
import triton

from ...config import config
from ...heuristics import (ReductionChoice, loop_stages, next_pow2, num_warps, split_count, split_last_program_final,
                           split_partial_warps, tagged_split_warps)
from ..kernel import CSEVar, KernelSpec, TritonKernel, literal
from ..prelude import tl_dtype
from ..nodes import GroupContext, emit_pointwise, publish
from .algebra import reduction_op
from .base import ReductionStrategy, block_budget, group_prologue, new_kernel, row_mask, rows_block, spread_loads
from .looped import LoopedReduction


#: Partial dtypes that the tagged last-program form carries (their bits below the flag), and the flag: bit 32.
_TAG_BITS = {torch.float32: 32, torch.int32: 32}
_TAG_FLAG = 1 << 32


def tagged_partials(ops) -> bool:
    """Does a split whose last program finishes (``split_last_program_final``) learn that the partials of
    reductions ``ops`` are in from flags stored with them (``config.split.last_program_sync``)?  Only where each
    partial fits in 32 bits beside its flag: an arg reduction's int64 index or a float64 sum takes the fence.  Not
    on ROCm: the poll's padding counts 32 threads a warp (``_tagged_last_program``)."""
    return (config.split.last_program_sync == "tagged" and torch.version.hip is None
            and all(op.repr_dtype in _TAG_BITS and not op.is_arg for op in ops))


class SplitReduction(ReductionStrategy):
    """Few outputs over a huge axis: S programs per row block each reduce one chunk of the axis.

    Kernel 1 (grid: row blocks x S) loops over its chunk like the looped strategy and
    stores its [XBLOCK, 1] partials to a workspace of S x rows; kernel 2 reduces the S
    partials of each row in a fixed order (deterministic, no atomics on values) and runs the
    epilogue.  Where the partials are few (``heuristics.split_last_program_final``) kernel 2's
    body runs instead in whichever of a row block's programs finishes last, counted on an
    arrival counter (``_last_program_final``): one launch.  Legal only for groups whose reductions need no
    finished reduction (``KernelGroup.split_ok``): layer-norm backward's dW/dB sums, a norm over 2^21 elements.
    """

    name = "split"
    precedence = 0
    knobs = "split"

    def applies(self, facts):
        """At most ``config.split.max_xnumel`` rows of at least ``config.split.min_rnumel``, where the group's
        reductions need no finished reduction."""
        return (facts.split_ok and facts.xnumel <= config.split.max_xnumel
                and facts.rnumel >= config.split.min_rnumel)

    def choose(self, facts):
        """The looped strategy's chunks, ``heuristics.split_count`` partials per row block."""
        rblock = config.rblock or min(next_pow2(facts.rnumel), config.looped.rblock, block_budget())
        xblock = rows_block(facts.xnumel, rblock)
        splits = split_count(triton.cdiv(max(facts.xnumel, 1), xblock), facts.rnumel, rblock, facts.tagged)
        return ReductionChoice(self.name, xblock, rblock, splits, loop_stages(self.name))

    def kernels(self, name, ctx, choice):
        group = ctx.group
        if group.columns is not None:
            return super().kernels(name, ctx, choice)       # raises: the column part is the mixed-order kernel's
        chunk = max(choice.rblock, triton.cdiv(triton.cdiv(group.rnumel, choice.splits), choice.rblock) * choice.rblock)
        splits = max(1, triton.cdiv(group.rnumel, chunk))
        if split_last_program_final(choice.xblock, splits):
            return [self._partial(f"{name}_partial", ctx, choice, chunk, splits, last_program_final=True)]
        partial = self._partial(f"{name}_partial", ctx, choice, chunk, splits)
        final = self._final(f"{name}_final", ctx, choice, splits, partial)
        return [partial, final]

    def _partial(self, name, ctx, choice, chunk, splits, last_program_final: bool = False):
        group = ctx.group
        k = new_kernel(name, ctx, "split", choice)
        k.meta.update(splits=splits, chunk=chunk, last_program_final=last_program_final)
        # the chunks (multiples of RBLOCK) tile the axis exactly: no step reads past it, no mask
        group_prologue(k, group, choice.xblock, choice.rblock, rmask=chunk * splits != group.rnumel or not group.rnumel)
        pid = "tl.program_id(1).to(tl.int64)" if k.int64 else "tl.program_id(1)"
        k.emit(f"rstart = {pid} * {chunk}")
        nodes = [p for p in group.placed if p.kind != "x"]
        spread_loads(k, group, nodes)
        ops_, folded = LoopedReduction().loop(k, ctx, choice, nodes, start="rstart + ", span=chunk)
        k.spread_loads = None
        comments = [f"split reduction, partial pass: {group.xnumel} rows x {group.rnumel} in {splits} "
                    f"chunks of {chunk}, XBLOCK={choice.xblock} RBLOCK={choice.rblock}"]
        workspaces = {}
        steps = triton.cdiv(chunk, choice.rblock)
        warps = split_partial_warps(choice.xblock * choice.rblock, steps, len(ops_))
        if last_program_final and tagged_partials(ops_.values()):
            warps = tagged_split_warps(warps, steps, choice.xblock * next_pow2(splits))
            width = self._tagged_last_program(k, ctx, choice, splits, ops_, folded, 32 * warps)
            # the poll's volatile loads: one of each slot array before its loop, one in it
            k.meta.update(max_warps=choice.xblock * width // 32, owned_loads=2 * len(ops_))
            comments.append(f"the last of a row block's {splits} programs to count in polls their flagged "
                            f"partials (tagged, no fence), reduces them and zeroes them")
        else:
            for pname, op in ops_.items():
                ws = k.workspace(f"{pname}_partials", splits * group.xnumel, op.repr_dtype)
                k.emit(f"tl.store({ws} + ({pid} * {group.xnumel} + xindex), {folded[pname][0].name}, {row_mask(k)})")
                entry = [(f"{pname}_partials", op.repr_dtype)]
                if op.is_arg:
                    wsi = k.workspace(f"{pname}_partial_idx", splits * group.xnumel, torch.int64)
                    k.emit(f"tl.store({wsi} + ({pid} * {group.xnumel} + xindex), {folded[pname][1].name}, "
                           f"{row_mask(k)})")
                    entry.append((f"{pname}_partial_idx", torch.int64))
                workspaces[pname] = entry
            if last_program_final:
                self._last_program_final(k, ctx, choice, splits, workspaces)
                comments.append(f"the last of a row block's {splits} programs to finish reduces their "
                                f"partials (an arrival count per row block)")
        k.meta["workspaces"] = workspaces
        k.meta["comments"] = comments
        return KernelSpec(name, k.source(), (triton.cdiv(group.xnumel, choice.xblock), splits),
                          list(k.args.values()), warps, dict(k.meta))

    def _tagged_last_program(self, k, ctx, choice, splits, ops_, folded, threads: int) -> int:
        """The partial kernel's end where its last program finishes through tagged partials
        (``config.split.last_program_sync``): no program waits on a fence.  Returns the poll's padded width.

        Each program writes each of its partials as one 64-bit word, the partial's bits below bit 32 and a flag
        at bit 32, with a relaxed atomic exchange into a slot of its own; then it counts itself in on its row
        block's counter with a relaxed atomic.  The program that takes the count's last value polls the row
        block's slots (volatile loads, which L1 cannot answer) until every flag is set, reduces the partials in
        split order as the final kernel would, and leaves the slots and the counter zeroed for the next launch,
        which the stream runs after this one.  The flag travels in the same word as its partial, so no program
        has to order its partial before its count.  The poll ends: every program that counted is running and
        waits on nothing, so each of its threads issues its exchange.

        One thread alone loads each slot.  A tile smaller than the program's ``threads`` would have Triton give
        several warps a copy of each word, each loaded on its own, and a reduction takes each element from
        whichever copy writes shared memory last: the poll's count could then come from a copy that saw a flag
        while the sum took one that did not.  So the poll's tile
        (XBLOCK x width words, padded splits masked off) holds at least one word per thread: Triton's coalescing
        then gives a thread at most words / threads of them and covers the tile without a copy (the kernel
        records ``max_warps``, which tuning keeps to, and ``owned_loads``, its count of volatile loads, which the
        runtime checks in the compiled layout before the first launch: ``compiler.layouts``).  The count and the
        sum read the same registers, and the poll's last count, a reduction across the warps, has every load in
        before any slot is zeroed.  (A barrier and
        a second load of the slots would close the race too, at several times the poll's cost:
        reports/performance-log.md, split_last_program_sync.)"""
        group = ctx.group
        pid = "tl.program_id(1).to(tl.int64)" if k.int64 else "tl.program_id(1)"
        xmask = row_mask(k)
        width = max(next_pow2(splits), next_pow2(triton.cdiv(threads, choice.xblock)))
        slots = {}
        for pname, op in ops_.items():
            slot = k.semaphore(f"{pname}_slots", splits * group.xnumel, torch.int64)
            bits = _TAG_BITS[op.repr_dtype]
            word = (f"({folded[pname][0].name}.to(tl.int{bits}, bitcast=True).to(tl.int64) & {(1 << bits) - 1})"
                    f" | {_TAG_FLAG}")
            where = f", mask={xmask}" if xmask else ""
            k.emit(f"tl.atomic_xchg({slot} + ({pid} * {group.xnumel} + xindex), {word}{where}, sem='relaxed')")
            slots[pname] = (slot, op.repr_dtype)
        with self._counted_last(k, ctx, choice, splits, "relaxed", width=width) as sblock:
            mask = " & ".join(m for m in (xmask, f"(sbase < {splits})" if splits % sblock else None) if m)
            at = f"sbase * {group.xnumel} + xindex"
            words = {p: k.fresh("words") for p in slots}
            pending = k.fresh("pending")

            def poll() -> None:
                for p, (slot, _) in slots.items():
                    load = (f"tl.load({slot} + ({at}), {mask}, other={_TAG_FLAG}, volatile=True)" if mask
                            else f"tl.load({slot} + ({at}), volatile=True)")
                    k.emit(f"{words[p]} = {load}")
                k.emit(f"{pending} = " + " + ".join(f"tl.sum(tl.where({words[p]} < {_TAG_FLAG}, 1, 0))"
                                                     for p in slots))
            poll()
            with k.branch(f"while {pending} > 0:"):
                poll()
            decoded = {}
            for p, (slot, dtype) in slots.items():
                bits = _TAG_BITS[dtype]
                value = f"({words[p]} & {(1 << bits) - 1}).to(tl.int{bits})"
                if dtype.is_floating_point:
                    value += f".to({tl_dtype(dtype)}, bitcast=True)"
                decoded[f"{p}_partials"] = k.newvar(value, dtype).name
            self._final_body(k, ctx, splits, sblock, lambda p: [(f"{p.name}_partials", slots[p.name][1])],
                             decoded=decoded)
            for p, (slot, _) in slots.items():
                zeros = k.full([choice.xblock, sblock], 0, torch.int64)
                k.emit(f"tl.store({slot} + ({at}), {zeros}" + (f", {mask})" if mask else ")"))
        return width

    @staticmethod
    def _last_program_final(k: TritonKernel, ctx: GroupContext, choice: ReductionChoice, splits: int,
                            workspaces: dict) -> None:
        """The final pass inside the partial kernel: each program counts itself in on its row block's
        counter once its partials are stored, and the one that arrives last reduces the block's partials in
        split order (as the final kernel would: deterministic, no atomics on values) and resets the counter.

        Ordering: a barrier puts every thread's partial stores before the count, whose acq_rel atomic
        publishes them at GPU scope (a release) and, in the last program, orders its reads after the others'
        stores (an acquire); those reads bypass L1 (``.cg``), where a line of an earlier launch may linger.
        One launch instead of two; the counters are a semaphore workspace (``KernelArg.semaphore``)."""
        with SplitReduction._counted_last(k, ctx, choice, splits, "acq_rel", barrier=True) as sblock:
            SplitReduction._final_body(k, ctx, splits, sblock, lambda p: workspaces[p.name], cache=".cg")

    @staticmethod
    @contextlib.contextmanager
    def _counted_last(k: TritonKernel, ctx: GroupContext, choice: ReductionChoice, splits: int, sem: str,
                      barrier: bool = False, width: Optional[int] = None):
        """Count this program in on its row block's arrival counter (an atomic add of semantics ``sem``; a
        semaphore workspace).  The body runs in the program that takes the last count, on an [XBLOCK, padded
        splits] tile that ``sbase`` indexes (the padded width, ``width`` where given, is yielded), and then the
        counter is zeroed.  ``barrier``: a CTA barrier before the count and after it, so that every thread's
        stores precede the count and the last program's reads follow it."""
        counter = k.semaphore("arrivals", ctx.group.xnumel)
        if barrier:
            k.emit("tl.debug_barrier()")
        arrived = k.fresh("arrived")
        k.emit(f"{arrived} = tl.atomic_add({counter} + tl.program_id(0), 1, sem='{sem}')")
        with k.branch(f"if {arrived} == {splits - 1}:"), k.reads_once():
            if barrier:
                k.emit("tl.debug_barrier()")
            sblock = width or next_pow2(splits)
            k.guard([choice.xblock, sblock], "the last program's partials")
            cast = ".to(tl.int64)" if k.int64 else ""
            k.emit(f"sbase = {k.arange(sblock, 'the split partials')}{cast}[None, :]")
            tile, k.tile = k.tile, [choice.xblock, sblock]
            try:
                yield sblock
            finally:
                k.tile = tile
            k.emit(f"tl.store({counter} + tl.program_id(0), 0)")

    def _final(self, name, ctx, choice, splits, partial: KernelSpec):
        group = ctx.group
        sblock = next_pow2(splits)
        xblock = max(1, min(next_pow2(group.xnumel), max(1, 4096 // sblock)))
        k = new_kernel(name, ctx, "split", ReductionChoice("split", xblock, sblock, splits))
        group_prologue(k, group, xblock, sblock, rname="sbase", rmask=False)
        self._final_body(k, ctx, splits, sblock, lambda p: partial.meta["workspaces"][p.name])
        k.meta["comments"] = [f"split reduction, final pass: {splits} partials per row, XBLOCK={xblock}"]
        return KernelSpec(name, k.source(), (triton.cdiv(group.xnumel, xblock),), list(k.args.values()),
                          num_warps(xblock * sblock), dict(k.meta))

    @staticmethod
    def _final_body(k: TritonKernel, ctx: GroupContext, splits: int, sblock: int, entry_of, cache: str = "",
                    decoded: Optional[dict] = None) -> None:
        """Reduce each row's ``splits`` partials (``sbase`` indexes them; ``entry_of(p)``: the workspaces
        that hold reduction ``p``'s; ``decoded``: workspace name -> a variable already holding its tile, as the
        tagged form's poll leaves them), publish the results and run the epilogue."""
        group = ctx.group
        if splits % sblock:
            k.emit(f"smask = sbase < {splits}")
        mask = " & ".join(m for m in (row_mask(k), "smask" if splits % sblock else None) if m)
        hint = f", cache_modifier='{cache}'" if cache else ""
        for p in group.placed:
            if p.kind != "reduction":
                continue
            op = reduction_op(p)
            loaded = []
            for ws_name, dtype in entry_of(p):
                if decoded is not None:
                    loaded.append(CSEVar(decoded[ws_name], dtype))
                    continue
                ws = k.workspace(ws_name, splits * group.xnumel, dtype)
                other = op.identity() if dtype == op.repr_dtype else 0
                load = f"tl.load({ws} + (sbase * {group.xnumel} + xindex)" + (
                    f", {mask}, other={literal(other, dtype)}{hint})" if mask else f"{hint})")
                loaded.append(k.newvar(load, dtype))
            if mask:
                ident = k.newvar(k.full(k.scalar_shape, op.identity(), op.repr_dtype), op.repr_dtype)
                loaded[0] = k.newvar(f"tl.where({mask}, {loaded[0].name}, {ident.name})", op.repr_dtype)
            values = op.block(k, loaded[0], loaded[1].name if op.is_arg else None)
            publish(k, ctx, p, op.finish(k, values))
        for p in group.placed:
            if p.kind == "x":
                emit_pointwise(k, ctx, p)
