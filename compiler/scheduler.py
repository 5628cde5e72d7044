"""Scheduler: decide inlining, group nodes into kernels, order kernels and extern calls.

Four fusions, each with a legality check that says *why* when it says no:

- pointwise chains: a Pointwise producer is *inlined* (recomputed inside each consumer's
  body at the consumer's index), so chains of any shape (views, broadcasts) fuse;
- reduction + epilogue / dependent reductions: nodes over the same (rows, reduced axis)
  domain share one kernel and read each other's results from registers, which is legal
  only when the consumer reads the producer at exactly the element the kernel row holds
  (checked symbolically) -- softmax and layer norm become one kernel with several phases;
- siblings: independent nodes over the same domain (layer-norm backward's dW and dB sums)
  share one kernel and one pass over the data.

- mixed order: a row-reduction group and a column-reduction group over the same rows
  (layer-norm backward's dx and dW/dB) become one kernel that reads the shared inputs once
  (``build_mixed_group``), after the ordinary fusions have settled.

Candidate fusions are tried in the order ``heuristics.fusion_score`` gives (HBM bytes saved,
then proximity); whether a fusion is *legal* is decided here, whether it is worth it in
``heuristics`` (kept apart on purpose).  Every refusal is kept with its reason: on the
schedule (``Schedule.refused``, written into the "scheduled" dump) and on the
``compiler.scheduler`` logger at DEBUG level.
"""
from __future__ import annotations

import dataclasses
import logging
from typing import Callable, NamedTuple, Optional, Union

import sympy

from . import heuristics, indexing
from .analysis import BodyInfo, Read, analyze
from .config import config
from .counters import counters
from .exc import CodegenError
from .ir import ComputedBuffer, ExternKernel, Loops, Pointwise, Reduction, StridedView
from .ir import LoweredGraph

XSYM = indexing.index_symbol("xindex")
RSYM = indexing.index_symbol("rindex")

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class WhyNoFuse:
    """A refused fusion, with the reason (for dumps and tests)."""

    reason: str

    def __bool__(self) -> bool:
        return False


@dataclasses.dataclass
class SNode:
    """A computed buffer that the scheduler places in a kernel."""

    buf: ComputedBuffer
    info: BodyInfo
    order: int

    @property
    def name(self) -> str:
        return self.buf.name

    @property
    def is_reduction(self) -> bool:
        return isinstance(self.buf.data, Reduction)


@dataclasses.dataclass
class Placed:
    """A node's role in a kernel group and its index in kernel symbols (xindex, rindex)."""

    node: SNode
    kind: str  # "x" (one value per row), "xr" (full domain), "reduction"
    index: tuple  # the node's index, as expressions of XSYM / RSYM
    rindex: tuple = ()
    split: int = 0  # "xr": ranges[:split] are rows, ranges[split:] the inner axis
    phase: int = 0  # xr / reduction: which pass over the inner axis; x: computed before that pass

    @property
    def name(self) -> str:
        return self.node.name

    def subst(self) -> dict:
        index, rindex = self.node.info.index, self.node.info.rindex
        mapping = {s: e for s, e in zip(index, self.index) if isinstance(s, sympy.Symbol)}
        mapping.update({s: e for s, e in zip(rindex, self.rindex) if isinstance(s, sympy.Symbol)})
        return mapping


@dataclasses.dataclass
class KernelGroup:
    """Nodes that become one kernel: a domain of ``xnumel`` rows by ``rnumel`` inner elements."""

    placed: list[Placed]
    xnumel: int
    rnumel: int
    has_reduction: bool
    name: str = ""
    # Mixed order: a group of column reductions over this group's rows (its xnumel is our
    # rnumel and the other way round), computed in the same pass over the rows.  Its nodes
    # are also in ``placed`` (after ours), in their own frame: xindex a column, rindex a row.
    columns: Optional["KernelGroup"] = None

    @property
    def alone(self) -> Optional[Loops]:
        """The body of the group's one node when it runs alone (``ir.Scatter``, ``ir.Scan``), else None."""
        data = self.placed[0].node.buf.data if len(self.placed) == 1 else None
        return data if data is not None and data.runs_alone else None

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.placed]

    def rows(self) -> "KernelGroup":
        """This group without its mixed-order column part."""
        if self.columns is None:
            return self
        theirs = {id(p) for p in self.columns.placed}
        return KernelGroup([p for p in self.placed if id(p) not in theirs], self.xnumel, self.rnumel,
                           self.has_reduction, self.name)

    def label(self) -> str:
        """``buf3+buf5 (reduction of 341 rows over 16)`` for refusal messages."""
        names = self.names if len(self.names) <= 3 else self.names[:2] + [f"...{len(self.names)} nodes"]
        if self.columns is not None:
            kind = f"mixed-order reduction of {self.xnumel} rows over {self.rnumel} and back"
        elif self.has_reduction:
            kind = f"reduction of {self.xnumel} rows over {self.rnumel}"
        else:
            kind = f"pointwise, {self.xnumel} elements"
        return f"{'+'.join(names)} ({kind})"

    @property
    def num_phases(self) -> int:
        return 1 + max((p.phase for p in self.placed if p.kind != "x"), default=0)

    def bounds(self) -> dict:
        return {XSYM: max(self.xnumel, 1), RSYM: max(self.rnumel, 1)}

    def accumulator_bytes(self) -> int:
        """Bytes per tile element of this group's reduction accumulators (one lane each; a bool's is int32)."""
        return sum(max(4, p.node.buf.data.acc_dtype.itemsize) for p in self.placed if p.kind == "reduction")

    def mixed_order_choice(self) -> "heuristics.ReductionChoice":
        """Blocks and programs of this mixed-order group (``heuristics.choose_mixed_order``)."""
        return heuristics.choose_mixed_order(self.xnumel, self.rnumel, self.columns.accumulator_bytes())

    def split_ok(self) -> bool:
        """Can this group run as a split reduction (partials, then a final pass)?"""
        if not self.has_reduction or self.columns is not None:
            return False
        for p in self.placed:
            if p.kind in ("reduction", "xr") and p.phase != 0:
                return False
            if p.kind == "x" and p.phase == 0:
                return False
        return True


def _split_point(ranges: tuple, xnumel: int, rnumel: int) -> Optional[int]:
    prod = 1
    for k in range(len(ranges) + 1):
        if prod == xnumel:
            rest = 1
            for s in ranges[k:]:
                rest *= s
            if rest == rnumel:
                return k
        if k < len(ranges):
            prod *= ranges[k]
    return None


def _place(node: SNode, xnumel: int, rnumel: int, has_reduction: bool) -> Union[Placed, WhyNoFuse]:
    data = node.buf.data
    if isinstance(data, Reduction):
        if data.numel != xnumel or data.reduction_numel != rnumel:
            return WhyNoFuse(f"{node.name} reduces a {data.numel}x{data.reduction_numel} domain, the kernel's is "
                             f"{xnumel}x{rnumel}")
        return Placed(node, "reduction", indexing.delinearize(XSYM, data.ranges),
                      indexing.delinearize(RSYM, data.reduction_ranges))
    if data.numel == xnumel:
        return Placed(node, "x", indexing.delinearize(XSYM, data.ranges))
    if has_reduction and data.numel == xnumel * rnumel:
        k = _split_point(data.ranges, xnumel, rnumel)
        if k is not None:
            index = indexing.delinearize(XSYM, data.ranges[:k]) + indexing.delinearize(RSYM, data.ranges[k:])
            return Placed(node, "xr", index, split=k)
        return WhyNoFuse(f"{node.name}'s ranges {list(data.ranges)} do not split into {xnumel} rows x {rnumel}")
    return WhyNoFuse(f"{node.name} has {data.numel} elements, the kernel's domain is {xnumel}x{rnumel}")


def _canonical(p: Placed, bounds: dict, storage: bool):
    if storage:
        return indexing.simplify(p.node.buf.layout.index(p.index), bounds)
    return tuple(indexing.simplify(sympy.sympify(e), bounds) for e in p.index)


def _read_in_kernel(read: Read, p: Placed, bounds: dict, frame: Optional[dict] = None):
    """The element ``p`` reads in kernel symbols (its index tuple, or its storage offset); ``frame``: a
    symbol swap applied first (a column group's read seen in its row group's frame)."""
    mapping = p.subst()
    if frame:
        mapping = {s: sympy.sympify(e).xreplace(frame) for s, e in mapping.items()}
    if read.offset is not None:
        return indexing.simplify(sympy.sympify(read.offset).xreplace(mapping), bounds)
    return tuple(indexing.simplify(sympy.sympify(e).xreplace(mapping), bounds) for e in read.index)


def build_group(nodes: list[SNode]) -> Union[KernelGroup, WhyNoFuse]:
    """A kernel for ``nodes`` (topologically ordered), or the reason there can be none."""
    if len(nodes) > 1 and any(n.buf.data.runs_alone for n in nodes):
        return WhyNoFuse("a scatter or a scan runs as a kernel of its own (ir.Loops.runs_alone)")
    reductions = [n for n in nodes if n.is_reduction]
    if reductions:
        first = reductions[0].buf.data
        xnumel, rnumel = first.numel, first.reduction_numel
    else:
        xnumel, rnumel = nodes[0].buf.data.numel, 1
    has_reduction = bool(reductions)
    placed: dict[str, Placed] = {}
    for n in nodes:
        p = _place(n, xnumel, rnumel, has_reduction)
        if isinstance(p, WhyNoFuse):
            return p
        placed[n.name] = p
    group = KernelGroup(list(placed.values()), xnumel, rnumel, has_reduction)
    bounds = group.bounds()
    canon: dict = {}
    for p in group.placed:
        xr_deps = []
        phase = 0
        for read in p.node.info.reads:
            q = placed.get(read.buffer.name)
            if q is None:
                continue
            storage = read.offset is not None
            key = (q.name, storage)
            if key not in canon:
                canon[key] = _canonical(q, bounds, storage)
            if _read_in_kernel(read, p, bounds) != canon[key]:
                return WhyNoFuse(f"{p.name} reads {q.name} at another element than the one its kernel row holds")
            if q.kind == "xr":
                if p.kind == "x":
                    return WhyNoFuse(f"{p.name} (one value per row) reads {q.name}, a full-domain value")
                xr_deps.append(q)
                phase = max(phase, q.phase)
            elif q.kind == "reduction":
                phase = max(phase, q.phase + 1)
            else:
                phase = max(phase, q.phase)
        p.phase = phase
        for q in xr_deps:
            if q.phase != phase:
                return WhyNoFuse(f"{p.name} needs {q.name} from pass {q.phase} but runs in pass {phase}")
    if has_reduction and config.reduction_strategy == "split" and not group.split_ok():
        return WhyNoFuse("a forced split reduction cannot hold a node that needs a finished reduction")
    return group


# --------------------------------------------------------------------------- the schedule

@dataclasses.dataclass
class Schedule:
    """Execution order of kernel groups and extern calls, and what each buffer needs."""

    steps: list  # KernelGroup | ExternKernel
    inlined: frozenset
    stored: frozenset  # computed buffers written to memory
    snodes: dict[str, SNode]
    refused: list  # Refusal(a, b, reason) (or plain 3-tuples) of every refused fusion, in the order tried

    def groups(self) -> list[KernelGroup]:
        return [s for s in self.steps if isinstance(s, KernelGroup)]


def _direct_reads(buf: ComputedBuffer) -> list[str]:
    return sorted({r.buffer.name for r in analyze(buf).reads})


def _extern_reads(kernel: ExternKernel) -> list[str]:
    names = []
    for x in kernel.inputs:
        names.append(x.buffer.name if isinstance(x, StridedView) else x.name)
    return names


def schedule(graph: LoweredGraph, *passes: "SchedulePass") -> Schedule:
    """Inline, fuse and order ``graph``'s nodes; then, with fusion on, run ``passes`` over the result
    in order (the pipeline passes the GEMM templates' fusion, ``templates.fuse_templates``)."""
    output_names = {o.name for o in graph.outputs if o.kind == "buffer"}
    computed = graph.computed()
    extern_read = {n for k in graph.nodes if isinstance(k, ExternKernel) for n in _extern_reads(k)}
    inlined = _decide_inlining(computed, output_names, extern_read)
    snodes = {b.name: SNode(b, analyze(b, inlined), i) for i, b in enumerate(graph.nodes)
              if isinstance(b, ComputedBuffer) and b.name not in inlined}
    snodes = _live(snodes, output_names | extern_read)
    counters["inlined_nodes"] += len(inlined)
    groups = [_single(n) for n in snodes.values()]
    refused: list = []
    if config.fusion:
        groups = _fuse(groups, snodes, graph, refused, output_names | extern_read)
    steps = _order(groups, graph, snodes)
    for i, g in enumerate(g for g in steps if isinstance(g, KernelGroup)):
        g.name = f"k{i}"
    stored = _stored(steps, snodes, output_names, extern_read)
    sched = Schedule(steps, inlined, stored, snodes, refused)
    if config.fusion:
        for fuse in passes:
            sched = fuse(sched, graph)
    return sched


#: A fusion pass over a finished schedule (GEMM templates absorbing their consumers): it returns the
#: new schedule and appends each fusion it refuses to ``Schedule.refused``.
SchedulePass = Callable[[Schedule, LoweredGraph], Schedule]


def _decide_inlining(computed: list[ComputedBuffer], outputs: set, extern_read: set) -> frozenset:
    users: dict[str, int] = {}
    for b in computed:
        for name in _direct_reads(b):
            users[name] = users.get(name, 0) + 1
    inlined: set = set()
    for b in computed:  # topological: producers are decided before their consumers
        if not isinstance(b.data, Pointwise) or b.name in outputs or b.name in extern_read:
            continue
        if not config.fusion or users.get(b.name, 0) == 0:
            continue
        info = analyze(b, frozenset(inlined))
        widening = info.widening_load and b.get_dtype().itemsize >= info.reads[0].buffer.get_dtype().itemsize
        if heuristics.should_inline(info.op_count, users.get(b.name, 0), widening_load=widening):
            inlined.add(b.name)
    return frozenset(inlined)


def _live(snodes: dict[str, SNode], roots: set) -> dict[str, SNode]:
    """Drop nodes nothing needs (a lowering's unused by-product, e.g. var_mean's mean)."""
    live: set = set()
    stack = [n for n in roots if n in snodes]
    while stack:
        name = stack.pop()
        if name in live:
            continue
        live.add(name)
        stack.extend(r.buffer.name for r in snodes[name].info.reads if r.buffer.name in snodes)
    dead = len(snodes) - len(live)
    if dead:
        counters["dead_nodes"] += dead
    return {k: v for k, v in snodes.items() if k in live}


def _single(node: SNode) -> KernelGroup:
    group = build_group([node])
    if isinstance(group, WhyNoFuse):
        raise CodegenError(f"a node cannot form a kernel alone: {group.reason}")
    return group


def _producers(group: KernelGroup, snodes: dict) -> set[str]:
    names = set(group.names)
    return {r.buffer.name for p in group.placed for r in p.node.info.reads if r.buffer.name not in names}


def _fuse(groups: list[KernelGroup], snodes: dict, graph: LoweredGraph, refused: list, keep: set) -> list[KernelGroup]:
    """Greedy fusion: ordinary fusions until none is left, then mixed-order pairs of what remains.

    Mixed-order pairs go last so that the row group and the column group are complete
    (every epilogue and sibling already in) before they are tied together.
    """
    groups = _greedy(groups, snodes, graph, refused, keep, mixed=False)
    if config.mixed_order.reductions:
        groups = _greedy(groups, snodes, graph, refused, keep, mixed=True)
    return groups


def _greedy(groups: list[KernelGroup], snodes: dict, graph: LoweredGraph, refused: list, keep: set, *,
            mixed: bool) -> list[KernelGroup]:
    """Try candidates best score first; after each fusion, score again (the merged group is new)."""
    tried: set = set()
    while True:
        candidates = _candidates(groups, snodes, graph, keep, tried, mixed)
        candidates.sort(key=lambda c: c[0], reverse=True)
        merged = False
        for _, a, b, key, traffic in candidates:
            tried.add(key)
            result = _try_mixed(a, b, groups, graph, traffic) if mixed else _try_fuse(a, b, groups, graph)
            if isinstance(result, WhyNoFuse):
                _refuse(refused, a, b, result.reason)
                continue
            counters["mixed_order_reductions" if mixed else "fused_nodes"] += 1
            groups = [g for g in groups if g is not a and g is not b] + [result]
            merged = True
            break
        if not merged:
            return groups


def _candidates(groups: list[KernelGroup], snodes: dict, graph: LoweredGraph, keep: set, tried: set,
                mixed: bool) -> list:
    """(score, a, b, key, traffic) for every related pair not tried yet.

    Related: one reads the other's output, or both read a common buffer; only those can
    save memory traffic.  The mixed stage looks only at pairs of reductions over
    transposed domains (every other pair was decided in the ordinary stage).
    """
    reads = {id(g): _producers(g, snodes) for g in groups}
    readers: dict[str, set] = {}
    for g in groups:
        for n in reads[id(g)]:
            readers.setdefault(n, set()).add(id(g))
    out = []
    for gi, a in enumerate(groups):
        for b in groups[gi + 1:]:
            key = (tuple(a.names), tuple(b.names))
            if key in tried or (mixed and not _transposed(a, b)):
                continue
            names_a, names_b = set(a.names), set(b.names)
            shared = reads[id(a)] & reads[id(b)]
            handoff = (names_a & reads[id(b)]) | (names_b & reads[id(a)])
            if not shared and not handoff:
                continue
            pair = {id(a), id(b)}
            dropped = [n for n in handoff if n not in keep and readers.get(n, set()) <= pair]
            traffic = heuristics.FusionTraffic(shared_read=_nbytes(graph, shared), handoff_load=_nbytes(graph, handoff),
                                               dropped_store=_nbytes(graph, dropped))
            if mixed:
                traffic = _mixed_traffic(*_orientations(a, b)[0], traffic.shared_read)
            distance = min(snodes[n].order for n in a.names) - min(snodes[n].order for n in b.names)
            out.append((heuristics.fusion_score(traffic, distance), a, b, key, traffic))
    return out


def _nbytes(graph: LoweredGraph, names) -> int:
    total = 0
    for n in names:
        buf = graph.buffers.get(n)
        if buf is not None:
            total += buf.layout.numel * buf.get_dtype().itemsize
    return total


def _try_fuse(a: KernelGroup, b: KernelGroup, groups: list, graph: LoweredGraph) -> Union[KernelGroup, WhyNoFuse]:
    """Legality of an ordinary fusion: compatible domains, no cycle, then ``build_group``'s checks."""
    why = _domain_refusal(a, b)
    if why is not None:
        return why
    if _creates_cycle(a, b, groups, graph):
        return WhyNoFuse("fusing would create a cycle through another kernel")
    return build_group(sorted([p.node for p in a.placed + b.placed], key=lambda n: n.order))


def _domain_refusal(a: KernelGroup, b: KernelGroup) -> Optional[WhyNoFuse]:
    if a.columns is not None or b.columns is not None:
        return WhyNoFuse("a mixed-order kernel takes no further fusions")
    if a.has_reduction and b.has_reduction:
        if (a.xnumel, a.rnumel) == (b.xnumel, b.rnumel):
            if a.xnumel == a.rnumel and _reads_transposed(a, b):
                return WhyNoFuse(f"a square domain ({a.xnumel} x {a.rnumel}) read one way by one group and "
                                 "transposed by the other: a mixed-order candidate once ordinary fusion is done")
            return None
        why = (f"different reduction ranges ({a.xnumel} rows over {a.rnumel} vs {b.xnumel} rows over "
               f"{b.rnumel})")
        if _transposed(a, b):
            why += "; one is the other transposed: a mixed-order candidate once ordinary fusion is done"
        return WhyNoFuse(why)
    red, other = (a, b) if a.has_reduction else (b, a)
    if red.has_reduction:
        if other.xnumel in (red.xnumel, red.xnumel * red.rnumel):
            return None
        return WhyNoFuse(f"{other.xnumel} elements are neither one per row ({red.xnumel}) nor one per element "
                         f"({red.xnumel}x{red.rnumel}) of the reduction's domain")
    if a.xnumel == b.xnumel:
        return None
    return WhyNoFuse(f"different sizes ({a.xnumel} vs {b.xnumel} elements)")


def _transposed(a: KernelGroup, b: KernelGroup) -> bool:
    """Is one reduction group the other transposed: its rows the other's reduced axis?  Told by the extents, and
    for a square domain (extents alike either way) by how the two read a buffer they share."""
    if not (a.has_reduction and b.has_reduction and (a.xnumel, a.rnumel) == (b.rnumel, b.xnumel)):
        return False
    return a.xnumel != a.rnumel or _reads_transposed(a, b)


def domain_reads(group: KernelGroup, nodes: Optional[list[Placed]] = None, skip: frozenset = frozenset()):
    """(node, read, storage offset in kernel symbols) of each read of ``nodes`` (default: the group's) in the
    reduction domain; reads of the buffers in ``skip`` left out."""
    bounds = group.bounds()
    for p in group.placed if nodes is None else nodes:
        if p.kind not in ("reduction", "xr"):
            continue
        for read in p.node.info.reads:
            if read.buffer.name in skip:
                continue
            offset = _read_in_kernel(read, p, bounds)
            if read.offset is None:
                offset = read.buffer.layout.index(offset)
            yield p, read, sympy.expand(offset)


def _read_strides(g: KernelGroup) -> dict[str, set]:
    """Buffer name -> the (kept-axis, reduced-axis) strides of ``g``'s reduction-domain reads of it (affine ones)."""
    out: dict[str, set] = {}
    for _, read, offset in domain_reads(g):
        strides = indexing.affine_strides(offset, [XSYM, RSYM])
        if strides is not None:
            out.setdefault(read.buffer.name, set()).add(tuple(strides))
    return out


def _reads_transposed(a: KernelGroup, b: KernelGroup) -> bool:
    """Does a buffer both groups read walk with stride 1 along one group's reduced axis and along the other's
    kept axis?  Two reductions of a square matrix, one over its rows and one over its columns (layer norm's dx
    and its dW / dB at 4096 x 4096), have alike extents: fused as siblings, the column sums ran one column a
    program, each step a row apart (4x eager's time); they are a mixed-order pair instead."""
    sa, sb = _read_strides(a), _read_strides(b)
    for name in sa.keys() & sb.keys():
        for xa, ra in sa[name]:
            for xb, rb in sb[name]:
                if (ra == 1 and xa != 1 and xb == 1 and rb != 1) or (xa == 1 and ra != 1 and rb == 1 and xb != 1):
                    return True
    return False


# ------------------------------------------------------------------------------ mixed order

_MIXED_TYPES = ("sum", "max", "min", "any", "all")


def build_mixed_group(rows: KernelGroup, cols: KernelGroup) -> Union[KernelGroup, WhyNoFuse]:
    """One kernel for row reductions (``rows``) and column reductions (``cols``) of the same rows.

    ``cols`` reduces over the rows what ``rows`` reduces along them (layer-norm backward:
    dx needs per-row sums, dW and dB per-column sums, both of x and dy).  Legal when the row
    group reads nothing of the column group (column sums exist only after every row), a whole
    row fits one block (the row group runs persistent), and the column group is column reductions
    of a type whose partials combine (sum, max, min, any, all) plus epilogues that need them
    finished.  The column group may read the row group's per-row values (its reductions and their
    epilogues) at their own row: a row block's row passes run before its column step, which takes
    them from registers -- layer norm's backward recomputing mean and rstd (``compiler.partition``).
    """
    if not (rows.has_reduction and cols.has_reduction) or rows.columns is not None or cols.columns is not None:
        return WhyNoFuse("mixed order joins two plain reduction groups")
    if (rows.xnumel, rows.rnumel) != (cols.rnumel, cols.xnumel):
        return WhyNoFuse(f"different reduction ranges ({rows.xnumel} rows over {rows.rnumel} vs {cols.xnumel} "
                         f"rows over {cols.rnumel}), not one the other transposed")
    if rows.xnumel == 0 or rows.rnumel == 0:
        return WhyNoFuse("an empty domain has nothing to share")
    needed = set(cols.names) & {r.buffer.name for p in rows.placed for r in p.node.info.reads}
    if needed:
        return WhyNoFuse(f"{sorted(needed)[0]} is read in the same pass that computes it")
    why = _column_reads_of_rows(rows, cols)
    if why is not None:
        return why
    if config.reduction_strategy != "auto":
        return WhyNoFuse(f"reduction_strategy={config.reduction_strategy!r} is forced")
    limit = min(config.mixed_order.max_rnumel, config.max_triton_tensor_numel)
    if heuristics.next_pow2(rows.rnumel) > limit or (config.rblock and config.rblock < rows.rnumel):
        return WhyNoFuse(f"rows of {rows.rnumel} elements do not fit one block (mixed_order_max_rnumel="
                         f"{config.mixed_order.max_rnumel}, rblock={config.rblock})")
    for p in cols.placed:
        rtype = p.node.buf.data.reduction_type if p.kind == "reduction" else None
        if p.kind == "xr":
            return WhyNoFuse(f"{p.name} is a full-domain value of the column group; only reductions and "
                             f"their epilogues run transposed")
        if p.kind == "x" and p.phase == 0:
            return WhyNoFuse(f"{p.name} is computed per column before the column reductions")
        if p.kind == "reduction" and (p.phase != 0 or rtype not in _MIXED_TYPES):
            return WhyNoFuse(f"{p.name} ({rtype}) needs a finished reduction or has no combinable partials "
                             f"(mixed order takes {', '.join(_MIXED_TYPES)})")
    return KernelGroup(list(rows.placed) + list(cols.placed), rows.xnumel, rows.rnumel, True, columns=cols)


def _column_reads_of_rows(rows: KernelGroup, cols: KernelGroup) -> Optional[WhyNoFuse]:
    """Why the column group cannot take what it reads of the row group from the row pass's registers, or None:
    every such read must be of a per-row value (not a full-domain one, which a row pass holds only as a tile)
    at the row of the column step, i.e. the element its register holds once the frames are swapped."""
    held = {p.name: p for p in rows.placed}
    swap = {XSYM: RSYM, RSYM: XSYM}
    bounds = rows.bounds()
    for p in cols.placed:
        for read in p.node.info.reads:
            q = held.get(read.buffer.name)
            if q is None:
                continue
            if q.kind == "xr":
                return WhyNoFuse(f"{p.name} reads {q.name}, a full-domain value of the row group")
            if _read_in_kernel(read, p, bounds, frame=swap) != _canonical(q, bounds, read.offset is not None):
                return WhyNoFuse(f"{p.name} reads {q.name} at another row than the one its column step holds")
    return None


def _orientations(a: KernelGroup, b: KernelGroup) -> list[tuple[KernelGroup, KernelGroup]]:
    """(rows, cols) to try: the group with the short reduced axis as the rows first."""
    return [(a, b), (b, a)] if a.rnumel <= b.rnumel else [(b, a), (a, b)]


def _mixed_traffic(rows: KernelGroup, cols: KernelGroup, shared_read: int) -> "heuristics.FusionTraffic":
    choice = heuristics.choose_mixed_order(rows.xnumel, rows.rnumel, cols.accumulator_bytes())
    accs = [p.node.buf.data.acc_dtype for p in cols.placed if p.kind == "reduction"]
    acc_bytes = max((d.itemsize for d in accs), default=4)
    return heuristics.mixed_order_saving(shared_read, programs=choice.splits, columns=cols.xnumel,
                                         column_reductions=len(accs), acc_bytes=acc_bytes)


def _try_mixed(a: KernelGroup, b: KernelGroup, groups: list, graph: LoweredGraph,
               traffic: "heuristics.FusionTraffic") -> Union[KernelGroup, WhyNoFuse]:
    reasons = []
    for rows, cols in _orientations(a, b):
        result = build_mixed_group(rows, cols)
        if isinstance(result, WhyNoFuse):
            reasons.append(f"as rows {rows.names[0]}: {result.reason}")
            continue
        if _creates_cycle(a, b, groups, graph):
            return WhyNoFuse("a mixed-order kernel would create a cycle through another kernel")
        cost = _mixed_traffic(rows, cols, traffic.shared_read)
        if cost.saved <= 0:
            return WhyNoFuse(f"legal mixed order, but not worth it: the shared read saves {cost.shared_read} bytes, "
                             f"the column partials cost {cost.extra}")
        return result
    return WhyNoFuse(f"not a mixed-order pair: {'; '.join(reasons)}")
class Refusal(NamedTuple):
    """A refused fusion: the two groups (as ``KernelGroup.label``) and why."""

    a: str
    b: str
    reason: str

    def __str__(self) -> str:
        return f"cannot fuse {self.a} with {self.b}: {self.reason}"


def _refuse(refused: list, a: KernelGroup, b: KernelGroup, reason: str) -> None:
    record = Refusal(a.label(), b.label(), reason)
    refused.append(record)
    log.debug("%s", record)


def _step_deps(step, owner: dict, graph: LoweredGraph) -> set:
    """Names of the steps (group id / extern name) that ``step`` reads from."""
    if isinstance(step, ExternKernel):
        names = _extern_reads(step)
    else:
        names = [r.buffer.name for p in step.placed for r in p.node.info.reads]
    deps = set()
    for n in names:
        producer = owner.get(n)
        if producer is not None and producer is not step:
            deps.add(id(producer))
    return deps


def _creates_cycle(a: KernelGroup, b: KernelGroup, groups: list, graph: LoweredGraph) -> bool:
    """Would one kernel for ``a`` and ``b`` depend on itself through another step?"""
    steps = list(groups) + [k for k in graph.nodes if isinstance(k, ExternKernel)]
    full_owner = {n: g for g in groups for n in g.names}
    for k in graph.nodes:
        if isinstance(k, ExternKernel):
            for o in k.outputs:
                full_owner[o.name] = k
    by_id = {id(s): s for s in steps}
    users: dict[int, set] = {id(s): set() for s in steps}
    for s in steps:
        for d in _step_deps(s, full_owner, graph):
            users.setdefault(d, set()).add(id(s))

    def reaches(src, dst) -> bool:
        stack = [u for u in users[id(src)] if u != id(dst)]
        seen = set()
        while stack:
            cur = stack.pop()
            if cur == id(dst):
                return True
            if cur in seen:
                continue
            seen.add(cur)
            stack.extend(users.get(cur, ()))
        return False
    del by_id
    return reaches(a, b) or reaches(b, a)


def _order(groups: list[KernelGroup], graph: LoweredGraph, snodes: dict) -> list:
    """Topological order of groups and externs (Kahn), ties broken by original position."""
    position = {id(n): i for i, n in enumerate(graph.nodes)}
    externs = [k for k in graph.nodes if isinstance(k, ExternKernel)]
    steps = list(groups) + externs
    owner = {n: g for g in groups for n in g.names}
    for k in externs:
        for o in k.outputs:
            owner[o.name] = k
    key = {id(g): min(snodes[n].order for n in g.names) for g in groups}
    key.update({id(k): position[id(k)] for k in externs})
    deps = {id(s): _step_deps(s, owner, graph) for s in steps}
    _add_barriers(steps, key, deps)
    done: set = set()
    order = []
    while len(order) < len(steps):
        ready = [s for s in steps if id(s) not in done and deps[id(s)] <= done]
        if not ready:
            raise CodegenError("the fused schedule has a cycle (a fusion legality bug)")
        nxt = min(ready, key=lambda s: key[id(s)])
        order.append(nxt)
        done.add(id(nxt))
    return order


def _add_barriers(steps: list, key: dict, deps: dict) -> None:
    """Extern calls that may mutate their inputs keep their place relative to every other step."""
    for s in steps:
        if isinstance(s, ExternKernel) and _may_mutate(s.target):
            for t in steps:
                if t is s:
                    continue
                if key[id(t)] < key[id(s)]:
                    deps[id(s)].add(id(t))
                else:
                    deps[id(t)].add(id(s))


def _may_mutate(target) -> bool:
    schema = getattr(target, "_schema", None)
    if schema is None:
        return True
    return bool(getattr(schema, "is_mutable", False))


def _stored(steps: list, snodes: dict, outputs: set, extern_read: set) -> frozenset:
    owner = {}
    for s in steps:
        if isinstance(s, KernelGroup):
            for n in s.names:
                owner[n] = s
    stored = set()
    for s in steps:
        if not isinstance(s, KernelGroup):
            continue
        for p in s.placed:
            for r in p.node.info.reads:
                producer = owner.get(r.buffer.name)
                if producer is not None and producer is not s:
                    stored.add(r.buffer.name)
    for name in owner:
        if name in outputs or name in extern_read:
            stored.add(name)
    return frozenset(stored)


def describe(sched: Schedule) -> str:
    """The fused IR, for dumps: each kernel with its nodes, roles and passes."""
    from .analysis import describe as describe_node
    lines = [f"# inlined (recomputed in consumers): {sorted(sched.inlined)}"]
    for step in sched.steps:
        if isinstance(step, ExternKernel):
            if hasattr(step, "describe"):  # a GEMM template, with its row reductions and epilogue
                lines.append(step.describe())
                for p in step.row_reduction_nodes:
                    lines.append("  [row reduction of A, register] " +
                                 describe_node(p.node.buf, sched.inlined).replace("\n", "\n  "))
                step = step.epilogue
                if step is None:
                    continue
            else:
                lines.append(f"{step.name}: extern {step.origin} -> {[o.name for o in step.outputs]}")
                continue
        kind = "reduction" if step.has_reduction else "pointwise"
        if step.columns is not None:
            kind = f"mixed-order reduction (columns: {step.columns.xnumel} over the rows)"
        lines.append(f"{step.name}: {kind} kernel, {step.xnumel} rows x {step.rnumel}, {step.num_phases} pass(es)")
        transposed = {id(p) for p in step.columns.placed} if step.columns is not None else set()
        for p in step.placed:
            store = "stored" if p.name in sched.stored else "register"
            role = f"column {p.kind}" if id(p) in transposed else p.kind
            lines.append(f"  [{role} pass {p.phase}, {store}] " +
                         describe_node(p.node.buf, sched.inlined).replace("\n", "\n  "))
    for a, b, why in sched.refused:
        lines.append(f"# {Refusal(a, b, why)}")
    return "\n".join(lines)


__all__ = ["schedule", "build_group", "build_mixed_group", "Schedule", "KernelGroup", "Placed", "SNode", "WhyNoFuse",
           "Refusal", "describe", "XSYM", "RSYM"]
