"""How a joint forward + backward graph is split into the forward and backward graphs we compile.

``config.partitioner``:

* ``"min_cut"`` (default): functorch's min-cut rematerialisation partitioner, which saves for the backward
  the fewest bytes it can and recomputes the rest there from what it saved, as Inductor's does -- with one
  difference.  Inductor's keeps it from recomputing any reduction that shrinks its input 4x (functorch's
  ``ban_recompute_reductions``).  Here a reduction may be recomputed when its reduced extent is at most
  ``config.persistent.max_rnumel``: its rows then sit whole in one block of the backward kernel, which loads
  them anyway, so recomputing costs no memory traffic.  Layer norm over rows of 16 then saves neither mean
  nor rstd (8 bytes a row, against 64 of fp32 input): the forward writes only y, and the backward recomputes
  both from x.  A longer reduction keeps the 4x rule (its recomputation would be another pass over memory).
* ``"default"``: functorch's default partition (everything the backward uses from the forward is saved).

User activation checkpointing (its ``recompute`` tags) is left as it is: we tag only untagged nodes.

Before the min cut, common subexpressions of the joint graph are merged here (:func:`merge_common`), not by
functorch's own pass: that one imports Inductor's pattern matcher, and with it Inductor's lowerings and kernel
templates -- about a second of every process's first compile, warm starts included, for a backend that uses
none of them.  The merge leaves alone what functorch's leaves alone: random draws (any op tagged
``nondeterministic_seeded``, not a list of them), uninitialised allocations, values sharing an output's
storage (two gradients computed alike must stay two tensors), non-tensor values; a graph with an op that
mutates is handed to functorch's pass instead.
"""
from __future__ import annotations

from typing import Any

import torch
import torch.fx

from .config import config

def partition(joint: torch.fx.GraphModule, joint_inputs: Any, *, num_fwd_outputs: int,
              **options: Any) -> tuple[torch.fx.GraphModule, torch.fx.GraphModule]:
    """(forward, backward) of ``joint`` (an AOTAutograd joint graph), by ``config.partitioner``; the
    signature of AOTAutograd's ``partition_fn`` (``options``, e.g. ``static_lifetime_input_indices``, go
    to the partitioner as AOTAutograd passed them)."""
    from torch._functorch import partitioners
    if config.partitioner == "default":
        return partitioners.default_partition(joint, joint_inputs, num_fwd_outputs=num_fwd_outputs, **options)
    _save_long_reductions(joint)
    merged = merge_common(joint)
    # functorch's pass where ours declined (an op that mutates); never on a graph that draws random numbers,
    # whose random ops outside functorch's own list it would merge
    functorch_cse = merged is None and not _draws_random(joint)
    with torch._functorch.config.patch(ban_recompute_reductions=False, cse=functorch_cse):
        return partitioners.min_cut_rematerialization_partition(joint, joint_inputs,
                                                                num_fwd_outputs=num_fwd_outputs, **options)


def _draws_random(joint: torch.fx.GraphModule) -> bool:
    """Does the graph call an op tagged ``nondeterministic_seeded`` (randn_like, uniform, exponential, ...)?"""
    seeded = torch.Tag.nondeterministic_seeded
    return any(seeded in getattr(node.target, "tags", ()) for node in joint.graph.nodes if node.op == "call_function")


_UNMERGED_TAGS = (torch.Tag.nondeterministic_seeded, torch.Tag.nondeterministic_bitwise)


def merge_common(gm: torch.fx.GraphModule) -> int | None:
    """Merge the call_function nodes of ``gm`` that apply the same op to the same arguments into the first of
    them; the number merged, or None (``gm`` untouched) where some op mutates its inputs."""
    import operator

    from torch.multiprocessing.reductions import StorageWeakRef

    nodes = list(gm.graph.nodes)
    ops = [n for n in nodes if n.op == "call_function"]
    if any(isinstance(n.target, torch._ops.OpOverload) and n.target._schema.is_mutable for n in ops):
        return None
    outputs = [n for n in nodes if n.op == "output"]
    returned = {a for out in outputs for a in out.all_input_nodes}
    returned_storages = {ref for a in returned for ref in _storages(a, StorageWeakRef)}
    seen: dict[tuple, torch.fx.Node] = {}
    merged = 0
    for node in ops:
        mergeable = (node.target is operator.getitem
                     or (isinstance(node.target, torch._ops.OpOverload)
                         and not any(tag in node.target.tags for tag in _UNMERGED_TAGS)))
        storages = _storages(node, StorageWeakRef)
        if not mergeable or storages is None or node in returned or returned_storages.intersection(storages):
            continue
        key = (node.target, _key(node.args), _key(tuple(sorted(node.kwargs.items()))))
        first = seen.setdefault(key, node)
        if first is not node:
            node.replace_all_uses_with(first)
            gm.graph.erase_node(node)
            merged += 1
    if merged:
        gm.recompile()
    return merged


def _storages(node: torch.fx.Node, weak_ref: Any) -> list | None:
    """Weak references to the storages of ``node``'s tensor value(s), or None where its value is not a tensor
    (or a tuple of them) with a storage: a symbolic size, an opaque value -- never merged."""
    if "val" not in node.meta:
        return None
    val = node.meta["val"]
    values = val if isinstance(val, (tuple, list)) else (val,)
    refs = []
    for v in values:
        if v is None:
            continue
        if not isinstance(v, torch.Tensor):
            return None
        try:
            refs.append(weak_ref(v.untyped_storage()))
        except (NotImplementedError, RuntimeError):
            return None
    return refs


def _key(value: Any) -> Any:
    """A hashable form of an argument: nodes as themselves, floats by their bits (0.0 and -0.0 differ, as do
    1 and 1.0 and True), sequences element by element."""
    if isinstance(value, torch.fx.Node):
        return value
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, float):
        return ("float", value.hex())
    if isinstance(value, (tuple, list)):
        return (type(value).__name__,) + tuple(_key(v) for v in value)
    if isinstance(value, (str, torch.dtype, torch.device, torch.layout, torch.memory_format, type(None))):
        return (type(value).__name__, value)
    return ("id", id(value))          # anything else merges only with itself


def _save_long_reductions(joint: torch.fx.GraphModule) -> None:
    """Mark MUST_SAVE each node whose inputs have more than ``config.persistent.max_rnumel`` times its
    output's elements -- a reduction whose rows a backward kernel cannot hold whole (functorch's own rule
    measures reductions the same way, at 4x)."""
    from torch.utils.checkpoint import CheckpointPolicy
    for node in joint.graph.nodes:
        if node.op != "call_function" or "recompute" in node.meta:
            continue
        out = _numel(node.meta.get("val"))
        inputs = sum(_numel(a.meta.get("val")) for a in node.args if isinstance(a, torch.fx.Node))
        if out and inputs > config.persistent.max_rnumel * out:
            node.meta["recompute"] = CheckpointPolicy.MUST_SAVE


def _numel(value: Any) -> int:
    """Elements of a traced value (a tensor, or the first tensor of a tuple such as var_mean's); 0 for
    anything else or a symbolic size."""
    if isinstance(value, (tuple, list)):
        value = next((v for v in value if isinstance(v, torch.Tensor)), None)
    if not isinstance(value, torch.Tensor):
        return 0
    n = value.numel()
    if isinstance(n, torch.SymInt):            # a dynamic size: its hint, never a guard; none: no decision
        hint = getattr(n.node, "hint", None)
        return int(hint) if isinstance(hint, int) else 0
    return int(n)


__all__ = ["partition"]
