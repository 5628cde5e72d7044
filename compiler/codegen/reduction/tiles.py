"""What a persistent kernel of a group would keep in registers between passes, read from a trial emission."""
from __future__ import annotations

import re

from ...counters import counters
from ...heuristics import ReductionChoice, next_pow2
from ..kernel import TritonKernel
from ..nodes import GroupContext
from ..statements import Statement
from .persistent import PersistentReduction


def live_row_tiles(ctx: GroupContext) -> int:
    """Row tiles ([XBLOCK, RBLOCK] values) a persistent kernel of the group keeps in registers from one pass to a
    later one: the group is emitted persistent (one row a program, nothing kept) and, at the start of each pass
    after the first, the row-shaped values defined before it that it or a later pass uses are counted; the
    largest count is returned.  Softmax keeps x into its sum's pass and exp(x - max) into its output's: 1.  An
    entropy, -(softmax(x) * log_softmax(x)).sum(-1), keeps both x - max and its exp into the last pass: 2.
    Values inside one pass (a max's NaN flags) are not counted: the compiler schedules them together."""
    k = _persistent_trial(ctx)
    return max(map(len, _live_across(k.lines, k.pass_starts)), default=0)


def held_tiles_are_loads(ctx: GroupContext) -> bool:
    """Is a persistent kernel of the group two passes, keeping row tiles from the first to the second, every one
    of them a plain load of an input (cast or broadcast at most)?  An RMSNorm keeps x: reading it again costs a
    cache hit and nothing else (``config.persistent.reread_loads``).  Softmax keeps exp(x - max): computing it
    again costs more than holding it.  A layer norm's forward (three passes) would read x twice more and
    subtract its mean twice: unmeasured, it stays persistent."""
    k = _persistent_trial(ctx)
    if len(k.pass_starts) != 2:
        return False
    held = set().union(*_live_across(k.lines, k.pass_starts))
    if not held:
        return False
    exprs = {s.target_text: s.expr for s in reversed(k.lines) if s.is_assign and len(s.targets) == 1}
    return all(_is_load(name, exprs) for name in held)


_LOAD_OF = (re.compile(r"^(\w+)\.to\(tl\.\w+\)$"), re.compile(r"^_td_bf16_to_f32\((\w+)\)$"),
            re.compile(r"^tl\.broadcast_to\((\w+), \[[\d, ]*\]\)$"))


def _is_load(name: str, exprs: dict) -> bool:
    """``name`` is a ``tl.load`` in ``exprs`` (name -> source), through casts and broadcasts."""
    for _ in range(8):
        src = exprs.get(name, "")
        if src.startswith("tl.load("):
            return True
        inner = next((m.group(1) for m in (p.match(src) for p in _LOAD_OF) if m), None)
        if inner is None:
            return False
        name = inner
    return False


def _persistent_trial(ctx: GroupContext) -> TritonKernel:
    """The group emitted persistent, one row a program, on trial (the debug counters count real emissions only)."""
    choice = ReductionChoice("persistent", 1, next_pow2(ctx.group.rnumel))
    before = dict(counters)
    try:
        k, _ = PersistentReduction().emit("live_row_tiles", ctx, choice)
    finally:
        counters.clear()
        counters.update(before)
    return k


_BLOCK_REDUCE = re.compile(r"\btl\.(?:sum|max|min)\(.*, 1\)\[:, None\]")
_ROW_AXIS = ("rbase", "rindex", "rmask")
_SPREAD = re.compile(r"\+ 0 \* \w+")                      # a load spread over the row at one address
_NAME = re.compile(r"\b[A-Za-z_]\w*\b")


def _live_across(lines: list[Statement], starts: list[int]) -> list[set]:
    """For each of ``starts`` (statement counts) after the first, the row tiles of ``lines`` (a kernel's statements)
    defined before it and used at or after it.  A row tile is row-shaped -- computed from the reduced axis's
    ``rbase`` / ``rindex`` / ``rmask`` or from another row-shaped value, and not a block reduction's [XBLOCK, 1]
    result -- and read from the row: a load whose address moves along the reduced axis, or computed from one.
    Index arithmetic (``idx``) and values of the axis alone (a one-hot compare against ``rindex``, a load spread
    over the row at one address) are left out: a loop computes them again at no memory cost."""
    row, moving, reads, defined = set(_ROW_AXIS), set(_ROW_AXIS), set(), {}
    uses: list[set] = []
    for i, s in enumerate(lines):
        names = s.reads if s.is_assign else s.names
        uses.append(set(names))
        if not s.is_assign:
            continue
        shaped = not _BLOCK_REDUCE.search(s.expr) and any(n in row for n in names)
        moves = any(n in moving for n in _NAME.findall(_SPREAD.sub("", s.expr)))
        read = any(n in reads for n in names) or (
            s.is_load and any(n in moving for n in _NAME.findall(_SPREAD.sub("", s.address))))
        for t in s.targets:
            defined.setdefault(t, i)
            for flag, into in ((shaped, row), (moves, moving), (read, reads)):
                if flag:
                    into.add(t)
    tiles = row.difference(_ROW_AXIS) & reads
    out = []
    for start in starts[1:]:
        later = set().union(*uses[start:]) if start < len(uses) else set()
        out.append({t for t in tiles if defined[t] < start and t in later and not t.startswith("idx")})
    return out
