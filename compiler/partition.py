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

User activation checkpointing (its ``recompute`` tags) is left as it is: we tag only untagged nodes.  A graph
that draws random numbers is partitioned without the min cut's common-subexpression pass (``_draws_random``).
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
    with torch._functorch.config.patch(ban_recompute_reductions=False, cse=not _draws_random(joint)):
        return partitioners.min_cut_rematerialization_partition(joint, joint_inputs,
                                                                num_fwd_outputs=num_fwd_outputs, **options)


def _draws_random(joint: torch.fx.GraphModule) -> bool:
    """Does the graph call an op tagged ``nondeterministic_seeded`` (randn_like, uniform, exponential, ...)?
    The min cut's common-subexpression pass skips only its own list of random ops: two ``randn_like(x)``
    draws outside that list would become one tensor, so such a graph is partitioned without it."""
    seeded = torch.Tag.nondeterministic_seeded
    return any(seeded in getattr(node.target, "tags", ()) for node in joint.graph.nodes if node.op == "call_function")


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
