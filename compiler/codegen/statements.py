"""A generated kernel's body as statements, and the passes over them before the Triton source is written.

Each line a kernel emits becomes a ``Statement`` at once: what it defines and reads, whether it loads, stores,
updates in place or orders memory (a barrier, an atomic, a volatile load), and the loop variables of a ``for``
header.  The passes below read those fields, never the text, and return statements in the order to write them;
``finish`` runs them in the order ``PASSES`` lists, and the source is rendered last (``render``).
"""
from __future__ import annotations

import dataclasses
import re
from typing import Iterable, Optional, Sequence

from ..counters import counters


_ASSIGN = re.compile(r"^([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*=\s*(.*)$")
_AUGMENTED = re.compile(r"^([A-Za-z_]\w*)\s*[-+*/%&|^@]=|^([A-Za-z_]\w*)\s*(?://|\*\*|<<|>>)=")
_NAME = re.compile(r"[A-Za-z_]\w*")
_FOR = re.compile(r"^for\s+(.+?)\s+in\s")
_PLAIN_RANGE = re.compile(r"^for \w+ in range\((\d+), (\d+), (\d+)\):$")
_POINTER = re.compile(r"\bp_\w+")                                 # a kernel argument's pointer
_STORE = re.compile(r"tl\.store\(\s*(\w+)")
_ORDERED = ("tl.debug_barrier", "tl.atomic_", "volatile=True")   # no load moves across these


#: What a statement does, as ``Statement.kind`` names it.
KINDS = ("load", "index", "compute", "reduce", "update", "store", "atomic", "barrier", "loop", "branch", "other")
_REDUCE = re.compile(r"\btl\.(?:sum|max|min|reduce|argmax|argmin|cumsum|associative_scan)\(")


def _strip_strings(src: str) -> str:
    return re.sub(r"'[^']*'|\"[^\"]*\"", "''", src)


def _names(src: Optional[str]) -> frozenset:
    """The names ``src`` mentions, string literals left out."""
    return frozenset(_NAME.findall(_strip_strings(src))) if src else frozenset()


def _address(expr: str) -> str:
    """The first argument of the call ``expr`` (a ``tl.load``'s address, its mask and options left out)."""
    call = expr[expr.index("(") + 1:]
    depth = 0
    for i, ch in enumerate(call):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            if depth == 0:
                return call[:i]
            depth -= 1
        elif ch == "," and depth == 0:
            return call[:i]
    return call


def _kind(text: str, header: bool, loop: bool, store: Optional[str], update: Optional[str], expr: Optional[str],
          target_text: str) -> str:
    """What a line of free text does (``KINDS``): a load, an index, arithmetic, a block reduction or scan (a
    barrier among the block's threads), an update in place, a store, an atomic, a barrier, a loop or other block
    header, or something else (an assert)."""
    if "tl.atomic_" in text:
        return "atomic"
    if "tl.debug_barrier" in text:
        return "barrier"
    if header:
        return "loop" if loop else "branch"
    if store is not None:
        return "store"
    if update is not None:
        return "update"
    if expr is None:
        return "other"
    if expr.startswith("tl.load("):
        return "load"
    if target_text.startswith("idx"):
        return "index"
    return "reduce" if _REDUCE.search(expr) else "compute"


@dataclasses.dataclass(frozen=True)
class Statement:
    """One line of a kernel's body at its block depth, typed when emitted.

    ``kind``: one of ``KINDS``.  ``origin``: its position among the kernel's emitted lines (passes move
    statements; it stays).  An assignment (``targets = expr``) has ``targets`` and ``expr``; ``update`` names what
    an augmented assignment (``acc += v``) changes; ``loop_vars`` are a ``for`` header's.  ``names``: every name
    the line mentions, ``reads``: those of an assignment's right side (strings left out of both).  ``writes``: the
    kernel pointers a store names; ``store_pointer``: the variable a ``tl.store`` writes through ("" where it is
    not a plain name).  ``ordered``: a barrier, an atomic or a volatile load, which no load crosses.  A load
    made by ``Statement.load`` also knows its ``address``, the ``buffer`` it reads, the ``loop`` it was emitted in
    (a serial; None: outside every loop), whether that loop reads the same address again anyway (``reread``:
    the address does not move with the loop, or every row block reads it) and whether it takes an eviction hint
    (``hinted``).  A loop made by ``Statement.for_loop`` knows its ``bounds`` (start, stop, step) where they are
    integers and the loop a plain ``range`` (not pipelined).  ``options``: keyword arguments a pass adds to a
    load (an eviction hint), written before its closing parenthesis."""

    indent: int
    text: str
    origin: int = -1
    kind: str = "other"
    targets: tuple[str, ...] = ()
    target_text: str = ""
    expr: Optional[str] = None
    update: Optional[str] = None
    loop_vars: frozenset = frozenset()
    header: bool = False
    names: frozenset = frozenset()
    reads: frozenset = frozenset()
    writes: frozenset = frozenset()
    store_pointer: Optional[str] = None
    ordered: bool = False
    address: str = ""
    bounds: tuple = ()
    buffer: str = ""
    loop: Optional[int] = None
    reread: bool = False
    hinted: bool = False
    options: tuple[tuple[str, str], ...] = ()

    @staticmethod
    def parse(indent: int, text: str, origin: int = -1) -> "Statement":
        """A line of free text, typed from what it says (arithmetic, indices, headers, barriers)."""
        header = text.rstrip().endswith(":")
        m = _ASSIGN.match(text)
        aug = _AUGMENTED.match(text)
        loop = _FOR.match(text)
        store = None
        if "tl.store(" in text:
            s = _STORE.search(text)
            store = s.group(1) if s is not None else ""
        assign = m is not None and not header
        expr = m.group(2) if assign else None
        update = (aug.group(1) or aug.group(2)) if aug is not None else None
        target_text = m.group(1).strip() if assign else ""
        loop_vars = frozenset(_NAME.findall(loop.group(1))) if loop is not None else frozenset()
        return Statement(
            indent=indent, text=text, origin=origin,
            kind=_kind(text, header, bool(loop_vars), store, update, expr, target_text),
            targets=tuple(_NAME.findall(m.group(1))) if assign else (),
            target_text=target_text, expr=expr, update=update, loop_vars=loop_vars, header=header,
            names=_names(text), reads=_names(expr) if assign else frozenset(),
            writes=frozenset(_POINTER.findall(text)) if store is not None else frozenset(),
            store_pointer=store,
            ordered=any(mark in text for mark in _ORDERED),
            address=_address(expr) if expr is not None and expr.startswith("tl.load(") and update is None else "",
            bounds=tuple(int(v) for v in plain.groups()) if (plain := _PLAIN_RANGE.match(text)) else ())

    @staticmethod
    def load(indent: int, origin: int, target: str, address: str, mask: Optional[str], *, buffer: str,
             loop: Optional[int], reread: bool, hinted: bool) -> "Statement":
        """``target = tl.load(address[, mask, other=0])``, read from ``buffer``."""
        expr = f"tl.load({address}, {mask}, other=0)" if mask else f"tl.load({address})"
        reads = _names(expr)
        return Statement(indent=indent, text=f"{target} = {expr}", origin=origin, kind="load", targets=(target,),
                         target_text=target, expr=expr, names=reads | {target}, reads=reads, address=address,
                         buffer=buffer, loop=loop, reread=reread, hinted=hinted)

    @staticmethod
    def for_loop(indent: int, origin: int, var: str, start, stop, step, text: str) -> "Statement":
        """The header ``text`` of a loop of ``var`` over ``range(start, stop, step)`` (pipelined where ``text`` is
        a ``tl.range``)."""
        plain = not text.split(" in ", 1)[1].startswith("tl.")
        ints = all(isinstance(v, int) and not isinstance(v, bool) for v in (start, stop, step))
        return Statement(indent=indent, text=text, origin=origin, kind="loop", loop_vars=frozenset({var}),
                         header=True, names=_names(text), bounds=(start, stop, step) if plain and ints else ())

    @staticmethod
    def store(indent: int, origin: int, pointer: str, address: str, value: str, mask: Optional[str], *,
              buffer: str) -> "Statement":
        """``tl.store(address, value[, mask])`` through the kernel argument ``pointer``."""
        text = f"tl.store({address}, {value}, {mask})" if mask else f"tl.store({address}, {value})"
        return Statement(indent=indent, text=text, origin=origin, kind="store", names=_names(text),
                         writes=frozenset({pointer}), store_pointer=pointer, address=address, buffer=buffer)

    @staticmethod
    def atomic_add(indent: int, origin: int, address: str, value: str, mask: Optional[str], *,
                   buffer: str) -> "Statement":
        """``tl.atomic_add(address, value[, mask=mask], sem='relaxed')``: ordered, no load crosses it."""
        where = f", mask={mask}" if mask else ""
        text = f"tl.atomic_add({address}, {value}{where}, sem='relaxed')"
        return Statement(indent=indent, text=text, origin=origin, kind="atomic", names=_names(text), ordered=True,
                         address=address, buffer=buffer)

    @property
    def is_assign(self) -> bool:
        """A plain assignment ``targets = expr`` (no update in place, no block header)."""
        return self.expr is not None and self.update is None

    @property
    def is_load(self) -> bool:
        return self.kind == "load"

    @property
    def is_index(self) -> bool:
        return self.kind == "index"

    @property
    def is_loop(self) -> bool:
        return self.header and bool(self.loop_vars)          # a ``for`` header names at least one variable

    def at(self, indent: int) -> "Statement":
        return dataclasses.replace(self, indent=indent)

    def rewritten(self, text: str) -> "Statement":
        """This statement with new text (names renamed), typed again; same origin, and what it reads and how."""
        return dataclasses.replace(Statement.parse(self.indent, text, self.origin), buffer=self.buffer,
                                   loop=self.loop, reread=self.reread, hinted=self.hinted, options=self.options)

    def with_option(self, key: str, value: str) -> "Statement":
        return dataclasses.replace(self, options=self.options + ((key, value),))

    def source(self) -> str:
        """The line's text, a load's added options before its closing parenthesis."""
        text = self.text
        for key, value in self.options:
            text = f"{text[:-1]}, {key}='{value}')"
        return text


def parse_lines(lines: Iterable[tuple[int, str]]) -> list[Statement]:
    """(indent, text) pairs as statements, in order."""
    return [Statement.parse(indent, text, i) for i, (indent, text) in enumerate(lines)]


def render(statements: Sequence[Statement]) -> list[str]:
    """The source lines of ``statements`` (four spaces a block level)."""
    return ["    " * s.indent + s.source() for s in statements]


# ------------------------------------------------------------------------------------------------ the passes

def _block_end(statements: Sequence[Statement], h: int) -> int:
    """One past the last statement of the block ``statements[h]`` opens."""
    end = h + 1
    while end < len(statements) and statements[end].indent > statements[h].indent:
        end += 1
    return end


def lift_invariant_loads(statements: Sequence[Statement]) -> list[Statement]:
    """``statements`` with each loop-invariant load moved out of its loop, to just above the loop's ``for``
    header (``config.lift_invariant_loads``).

    A statement of a loop's body (at the body's own indent, so executed on every trip) moves out when it is a
    load or an index (``idxN = ...``), its names are all defined outside the loop, its own name is assigned once
    in the loop and not read there before that, and the loop writes nothing through any pointer it names, nor
    through any input pointer (``p_arg*``, which could alias it) when it reads an input.  A loop with a store
    through anything but a kernel argument, a barrier, an atomic or a volatile load keeps all its loads, and a
    loop keeps at least one statement.  A mixed-order kernel's row loop read its weight vector (indexed by
    rindex alone) again on every row (measured: reports/performance-log.md, lift_invariant_loads).  Repeated
    until nothing moves, so a load leaves nested loops too.  The runtime's loops have static trip counts of at
    least one, so a lifted load reads nothing the loop would not have."""
    placed = list(statements)
    moved = True
    while moved:
        moved = False
        for h, head in enumerate(placed):
            if not head.is_loop:
                continue
            end = _block_end(placed, h)
            lift = _invariant(placed[h + 1:end], head.indent + 1, set(head.loop_vars))
            if lift and len(lift) < end - h - 1:
                body = [s for j, s in enumerate(placed[h + 1:end]) if j not in lift]
                out = [s.at(head.indent) for j, s in enumerate(placed[h + 1:end]) if j in lift]
                placed = placed[:h] + out + [head] + body + placed[end:]
                moved = True
                break
    return placed


def _loop_effects(body: Sequence[Statement]) -> Optional[tuple[dict[str, int], set[str]]]:
    """(times each name is assigned, the kernel pointers written) over a loop's statements, or None where no load
    may move across them: a barrier, an atomic, a volatile load, or a store through a pointer variable (it could
    be anything)."""
    defined: dict[str, int] = {}
    written: set[str] = set()
    for s in body:
        if s.ordered:
            return None
        names = set(s.loop_vars)
        if s.update is not None:
            names.add(s.update)
        elif s.expr is not None:
            names |= set(s.targets)
        for name in names:
            defined[name] = defined.get(name, 0) + 1 + (s.update is not None)    # an update: a second definition
        if s.store_pointer is not None:               # (atomics returned above)
            if not s.store_pointer.startswith("p_"):
                return None
            written |= s.writes
    return defined, written


def _load_may_move(s: Statement, written: set[str]) -> bool:
    """May the load ``s`` leave its place in a loop that writes the pointers ``written``?  Not where the loop
    writes any pointer it names, nor any input pointer when it reads an input (two inputs may alias)."""
    pointers = set(_POINTER.findall(s.expr or ""))
    return bool(pointers) and not pointers & written and not (
        any(p.startswith("p_arg") for p in pointers) and any(w.startswith("p_arg") for w in written))


def _invariant(body: Sequence[Statement], indent: int, loop_vars: set) -> set[int]:
    """Positions in ``body`` (a loop's statements) of the loads and indices that may move above it."""
    effects = _loop_effects(body)
    if effects is None:
        return set()
    defined, written = effects
    inside = set(defined) | loop_vars
    lift: set[int] = set()
    seen: set[str] = set()                        # names read by the body's statements so far
    for j, s in enumerate(body):
        if s.indent != indent or not s.is_assign:
            seen |= s.names
            continue
        target = s.target_text
        ok = (s.is_load or s.is_index) and defined.get(target) == 1 and target not in seen and not s.reads & inside
        if ok and s.is_load:
            ok = _load_may_move(s, written)
        seen |= s.reads
        if ok:
            lift.add(j)
            inside.discard(target)          # an index that leaves makes the loads using it invariant too
    return lift


def hoist_loads(statements: Sequence[Statement]) -> list[Statement]:
    """``statements`` with, inside a loop, each load and each index it needs moved up its straight-line block to
    just below the last statement it depends on (``config.hoist_loads``).

    The code generator emits a load where a node first needs it, so a layer-norm backward row (a mixed-order
    kernel's row loop) loaded dy, reduced over it (a block reduction: a barrier), and only then loaded x: two
    trips to memory per row.  Hoisted, every load of the row is in flight before the first reduction.  Only loop
    bodies: at a kernel's top level the loads of a persistent reduction's later passes (a row vector such as a
    weight) would stay live across every earlier reduction.

    Loads keep their order among themselves.  A load never passes a statement that defines or uses a name it
    uses or defines, one that is not an assignment (a store, an assert, an update in place), or a block boundary
    (a ``for`` header, a change of indent), so no load moves above a store or out of its loop."""
    order: list[int] = []
    top = min((s.indent for s in statements), default=0)
    block: list[tuple[int, set, set, bool]] = []    # (position, names defined, names used, hoisted) of the block
    indent_of_block = None
    for i, s in enumerate(statements):
        control = s.expr is None
        if control or s.indent != indent_of_block:
            order += [j for j, _, _, _ in block]    # a barrier, or a new block: the open one is done
            block = []
            indent_of_block = None if control else s.indent
            if control:
                order.append(i)
                continue
        defined, used = set(s.targets), set(s.reads)
        hoistable = s.indent > top and (s.is_load or s.is_index)
        at = len(block)
        if hoistable:
            while at > 0:
                _, d, u, moved = block[at - 1]
                if moved or d & (used | defined) or u & defined:    # loads keep their order among themselves
                    break
                at -= 1
        block.insert(at, (i, defined, used, hoistable))
    return [statements[i] for i in order + [j for j, _, _, _ in block]]


def prefetch_next_rows(statements: Sequence[Statement]) -> list[Statement]:
    """``statements`` with a mixed-order kernel's row loop (its one ``for xstep in range(A, B, S):``) rotated so
    each step loads the next step's rows while it works on its own (``config.mixed_order.prefetch``):

    - the loads of the body that depend only on the loop variable and on names defined outside the loop, with
      the index statements they need, run once above the loop for the first step, into ``NAME_nx``;
    - each step starts with ``NAME = NAME_nx`` for those loads, then issues them again for the step after
      (the last step reads its own rows again: in bounds, and from L1 / L2), and its body runs as before.

    The next row's loads are then in flight through the current row's reductions (barriers) and stores: one
    program per SM has no other program to overlap them with (measured: reports/performance-log.md,
    mixed_order_row_chunks).  A load stays in place where the loop writes through any pointer it names (or
    through any input pointer when it reads an input), and nothing rotates in a loop with a nested block, a
    barrier, an atomic, a volatile load, a store through a pointer variable, or a single step.  Returns
    ``statements`` unchanged where nothing rotates."""
    for h, head in enumerate(statements):
        if not head.bounds:
            continue
        end = _block_end(statements, h)
        rotated = _rotated(statements[h + 1:end], head.indent + 1, next(iter(head.loop_vars)), *head.bounds)
        if rotated is None:
            return list(statements)
        before, body = rotated
        counters["mixed_order_prefetch"] += 1
        return list(statements[:h]) + before + [head] + body + list(statements[end:])
    return list(statements)


def _rotated(body: Sequence[Statement], indent: int, var: str, start: int, stop: int,
             step: int) -> Optional[tuple[list[Statement], list[Statement]]]:
    """(statements above the loop, the loop's new body) of ``prefetch_next_rows``, or None: nothing rotates."""
    if stop - start <= step or any(s.indent != indent or s.header for s in body):
        return None                               # one step, or a nested block
    effects = _loop_effects(body)
    if effects is None:
        return None
    defined, written = effects
    fetch: dict[str, int] = {}                    # target -> position: loads and the indices they may use
    varying = {var}                               # names that change from step to step
    seen: set[str] = set()
    for j, s in enumerate(body):
        if not s.is_assign:
            seen |= s.names
            continue
        target = s.target_text
        ok = (s.is_load or target in ("xindex", "xmask") or s.is_index) and target.isidentifier() \
            and defined.get(target) == 1 and target not in seen \
            and all(r == var or r not in defined or r in fetch for r in s.reads)
        if ok and s.is_load:
            ok = _load_may_move(s, written)
        if s.reads & varying:
            varying.add(target)
        if ok and s.reads & varying:             # a load the same on every step stays (lift_invariant_loads)
            fetch[target] = j
        seen |= s.reads
    loads = {t for t, j in fetch.items() if body[j].is_load}
    if not loads:
        return None
    needed, todo = set(loads), list(loads)
    while todo:                                   # the index statements the rotated loads read, transitively
        for r in body[fetch[todo.pop()]].reads & set(fetch) - needed:
            needed.add(r)
            todo.append(r)
    rotated = sorted(fetch[t] for t in needed)
    renames = {t: f"{t}_nx" for t in needed}

    def at(s: Statement, row: str, indent: int) -> Statement:
        text = _NAME.sub(lambda n: renames.get(n.group(0), row if n.group(0) == var else n.group(0)), s.text)
        return s.rewritten(text).at(indent)

    last = start + (stop - start - 1) // step * step
    before = [at(body[j], str(start), indent - 1) for j in rotated]
    new_body = [Statement.parse(indent, f"{t} = {renames[t]}") for t in sorted(loads, key=fetch.get)]
    new_body += [at(body[j], f"tl.minimum({var} + {step}, {last})", indent) for j in rotated]
    new_body += [s for j, s in enumerate(body) if j not in {fetch[t] for t in loads}]
    return before, new_body


def eviction_hints(statements: Sequence[Statement]) -> list[Statement]:
    """``statements`` with each hinted load in a loop given an L2 eviction policy (``config.eviction_hints``):
    keep what is read again -- by a later pass or outside the loop, by every row block, on every step
    (``Statement.reread``) -- and let the last streaming read go first, so the others' lines stay in L2.

    Where every load kept so was lifted out of every loop (now at the kernel's top level: a mixed-order kernel's
    weight, a looped kernel's per-row scalar) nothing is read from L2 again, and the streaming reads get no hint
    (measured: reports/performance-log.md, eviction hints).  Runs after ``lift_invariant_loads``."""
    loads = [s for s in statements if s.is_load and s.hinted]
    policies = {}
    for s in loads:
        if s.loop is None:
            continue
        later = any(t.buffer == s.buffer and t.origin > s.origin and t.loop != s.loop for t in loads)
        policies[s.origin] = "evict_last" if s.reread or later else "evict_first"
    top = min((s.indent for s in statements), default=0)
    lifted = {s.origin for s in loads if s.indent == top and s.loop is not None}
    kept = [origin for origin, policy in policies.items() if policy == "evict_last"]
    if kept and all(origin in lifted for origin in kept):
        policies = {origin: policy for origin, policy in policies.items() if policy == "evict_last"}
    return [s.with_option("eviction_policy", policies[s.origin]) if s.origin in policies else s for s in statements]


#: The passes in the order ``finish`` runs them: (the ``Switches`` field that turns it on, the function of this
#: module, looked up when it runs so that a test can plant a bug in one).
PASSES: tuple[tuple[str, str], ...] = (
    ("lift", "lift_invariant_loads"),      # loop-invariant loads above their loops
    ("hints", "eviction_hints"),           # eviction policies of the loads in loops (which left them counts)
    ("hoist", "hoist_loads"),              # loads up their straight-line blocks
    ("prefetch", "prefetch_next_rows"),    # a mixed-order row loop's next rows loaded a step ahead
)


@dataclasses.dataclass(frozen=True)
class Switches:
    """Which of ``PASSES`` run for one kernel."""

    lift: bool = True
    hints: bool = True
    hoist: bool = True
    prefetch: bool = False


def finish(statements: Sequence[Statement], switches: Switches) -> list[Statement]:
    """``statements`` through every pass of ``PASSES`` that ``switches`` turns on, in order."""
    out = list(statements)
    for name, function in PASSES:
        if getattr(switches, name):
            out = globals()[function](out)
    return out


__all__ = ["Statement", "KINDS", "parse_lines", "render", "lift_invariant_loads", "hoist_loads", "prefetch_next_rows",
           "eviction_hints", "PASSES", "Switches", "finish"]
