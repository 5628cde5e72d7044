"""Scheduler: decide inlining, group nodes into kernels, order kernels and extern calls.

Three fusions, each with a legality check that says *why* when it says no:

- pointwise chains: a Pointwise producer is *inlined* (recomputed inside each consumer's
  body at the consumer's index), so chains of any shape (views, broadcasts) fuse;
- reduction + epilogue / dependent reductions: nodes over the same (rows, reduced axis)
  domain share one kernel and read each other's results from registers, which is legal
  only when the consumer reads the producer at exactly the element the kernel row holds
  (checked symbolically) -- softmax and layer norm become one kernel with several phases;
- siblings: independent nodes over the same domain (layer-norm backward's dW and dB sums)
  share one kernel and one pass over the data.

Whether a legal fusion is worth it is asked of ``heuristics`` (kept apart on purpose).
"""
from __future__ import annotations

import dataclasses
from typing import Optional, Union

import sympy

from . import heuristics, indexing
from .analysis import BodyInfo, Read, analyze
from .config import config
from .counters import counters
from .exc import CodegenError
from .ir import ComputedBuffer, ExternKernel, Pointwise, Reduction, StridedView
from .lowering import LoweredGraph

XSYM = indexing.index_symbol("xindex")
RSYM = indexing.index_symbol("rindex")


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

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.placed]

    @property
    def num_phases(self) -> int:
        return 1 + max((p.phase for p in self.placed if p.kind != "x"), default=0)

    def bounds(self) -> dict:
        return {XSYM: max(self.xnumel, 1), RSYM: max(self.rnumel, 1)}

    def split_ok(self) -> bool:
        """Can this group run as a split reduction (partials, then a final pass)?"""
        if not self.has_reduction:
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


def _read_in_kernel(read: Read, p: Placed, bounds: dict):
    mapping = p.subst()
    if read.offset is not None:
        return indexing.simplify(sympy.sympify(read.offset).xreplace(mapping), bounds)
    return tuple(indexing.simplify(sympy.sympify(e).xreplace(mapping), bounds) for e in read.index)


def build_group(nodes: list[SNode]) -> Union[KernelGroup, WhyNoFuse]:
    """A kernel for ``nodes`` (topologically ordered), or the reason there can be none."""
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
    refused: list[tuple[str, str, str]]  # (group a, group b, reason) of legal-looking refused fusions

    def groups(self) -> list[KernelGroup]:
        return [s for s in self.steps if isinstance(s, KernelGroup)]


def _direct_reads(buf: ComputedBuffer) -> list[str]:
    return sorted({r.buffer.name for r in analyze(buf).reads})


def _extern_reads(kernel: ExternKernel) -> list[str]:
    names = []
    for x in kernel.inputs:
        names.append(x.buffer.name if isinstance(x, StridedView) else x.name)
    return names


def schedule(graph: LoweredGraph) -> Schedule:
    """Inline, fuse and order ``graph``'s nodes."""
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
        groups = _fuse(groups, snodes, graph, refused)
    steps = _order(groups, graph, snodes)
    for i, g in enumerate(g for g in steps if isinstance(g, KernelGroup)):
        g.name = f"k{i}"
    stored = _stored(steps, snodes, output_names, extern_read)
    return Schedule(steps, inlined, stored, snodes, refused)


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
        if heuristics.should_inline(info.op_count, users.get(b.name, 0)):
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


def _fuse(groups: list[KernelGroup], snodes: dict, graph: LoweredGraph, refused: list) -> list[KernelGroup]:
    tried: set = set()
    while True:
        owner = {n: g for g in groups for n in g.names}
        candidates = []
        for gi, a in enumerate(groups):
            reads_a = _producers(a, snodes)
            for b in groups[gi + 1:]:
                reads_b = _producers(b, snodes)
                if set(a.names) & reads_b or set(b.names) & reads_a:
                    relation = "producer"
                elif reads_a & reads_b:
                    relation = "sibling"
                else:
                    continue
                if not _compatible_domains(a, b):
                    continue
                key = (tuple(a.names), tuple(b.names))
                if key in tried:
                    continue
                distance = abs(min(snodes[n].order for n in a.names) - min(snodes[n].order for n in b.names))
                candidates.append((heuristics.fusion_priority(relation, len(reads_a & reads_b), distance), a, b, key))
        candidates.sort(key=lambda c: c[0], reverse=True)
        merged = False
        for _, a, b, key in candidates:
            tried.add(key)
            if _creates_cycle(a, b, groups, owner, graph):
                refused.append((a.names[0], b.names[0], "fusing would create a cycle through another kernel"))
                continue
            nodes = sorted([p.node for p in a.placed + b.placed], key=lambda n: n.order)
            result = build_group(nodes)
            if isinstance(result, WhyNoFuse):
                refused.append((a.names[0], b.names[0], result.reason))
                continue
            counters["fused_nodes"] += 1
            groups = [g for g in groups if g is not a and g is not b] + [result]
            merged = True
            break
        if not merged:
            return groups


def _compatible_domains(a: KernelGroup, b: KernelGroup) -> bool:
    if a.has_reduction and b.has_reduction:
        return (a.xnumel, a.rnumel) == (b.xnumel, b.rnumel)
    red, other = (a, b) if a.has_reduction else (b, a)
    if red.has_reduction:
        return other.xnumel in (red.xnumel, red.xnumel * red.rnumel)
    return a.xnumel == b.xnumel


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


def _creates_cycle(a: KernelGroup, b: KernelGroup, groups: list, owner: dict, graph: LoweredGraph) -> bool:
    steps = list(groups) + [k for k in graph.nodes if isinstance(k, ExternKernel)]
    full_owner = dict(owner)
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
            lines.append(f"{step.name}: extern {step.origin} -> {[o.name for o in step.outputs]}")
            continue
        kind = "reduction" if step.has_reduction else "pointwise"
        lines.append(f"{step.name}: {kind} kernel, {step.xnumel} rows x {step.rnumel}, {step.num_phases} pass(es)")
        for p in step.placed:
            store = "stored" if p.name in sched.stored else "register"
            lines.append(f"  [{p.kind} pass {p.phase}, {store}] " +
                         describe_node(p.node.buf, sched.inlined).replace("\n", "\n  "))
    for a, b, why in sched.refused:
        lines.append(f"# not fused {a} + {b}: {why}")
    return "\n".join(lines)


__all__ = ["schedule", "build_group", "Schedule", "KernelGroup", "Placed", "SNode", "WhyNoFuse", "describe",
           "XSYM", "RSYM"]
