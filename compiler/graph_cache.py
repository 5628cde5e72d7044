"""Warm starts: the lean runtime's traced and partitioned graphs, kept on disk by what their trace depends on.

A new process compiling a graph it compiled before (a restarted training job, the next CI run) spends most of
its compile time outside Triton: AOTAutograd's joint trace of the dynamo graph, the partition into forward
and backward, then the pipeline -- whose kernels Triton's own cache already holds.  This cache keeps the
first two steps' result, the graphs ``compiler.lean`` compiles, so a warm start goes from the dynamo graph
straight to the pipeline.

The key is everything the trace and the partition read: the dynamo graph's code (and its submodules' and
tensor constants' contents), each input's shape, strides, storage offset, dtype, device, whether it requires
grad and which inputs share storage; grad mode, the autocast state, deterministic algorithms, the default dtype
and the backend switches composite ops read (SDPA's kernels, cuDNN, oneDNN); the decomposition table's entries
(op, function), functorch's config, this compiler's config (``config.cache_key()`` and the partitioner) and the
source of this package and its base (decompositions, partitioner, runtime); the torch, Triton and Python
versions.  A graph that calls anything
whose code the key does not hold -- a custom op (its Python kernels and autograd formula are the user's), a
function outside torch, a Python callable passed as an argument -- takes symbolic sizes or holds a large constant
is not cached (``counters["graph_cache.uncacheable"]``, the reason in this module's debug log).

A graph is stored node by node (name, op, target, arguments; ATen operators by name) with its tensor
attributes, and rebuilt with the same names -- so the same kernel names and sources, which a warm start finds
in Triton's cache -- each node's ``val`` recomputed by fake-tensor propagation from the stored placeholders.
A graph whose rebuilt code differs from its own is not stored.

The store is an SQLite file, ``<config.graph_cache_dir>/graphs.sqlite3`` (``config.graph_cache`` turns it
off) of at most ``MAX_ENTRIES`` entries, the oldest dropped first; an entry is read back with ``pickle``, so the
directory must be as trusted as Triton's cache.  An entry that does not revive is a miss, replaced by the trace.
Eviction goes by when an entry was written, not when it was last read (a hit writes nothing).
A file that cannot be used now (locked past ``sqlite_file.TIMEOUT_S``, a full disk, a directory that cannot
be made) costs the trace, never the compile: a warning, once per file.  Counters: ``graph_cache.hits`` /
``.misses`` / ``.stored`` / ``.uncacheable`` / ``.errors`` / ``.cache_rebuilt``.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import logging
import os
import pickle
import sys
import time
import warnings
from typing import Any, Optional, Sequence

import torch
import torch.fx
import triton

from .config import config
from .counters import counters
from .exc import GraphCacheError
from .lowering import SAVED_FROM
from .sqlite_file import SqliteFile

log = logging.getLogger(__name__)

CACHE_FILE = "graphs.sqlite3"
_FORMAT = 1                                  # the entry layout; a change makes every older entry a miss
_SCHEMA = "CREATE TABLE IF NOT EXISTS graphs (key TEXT PRIMARY KEY, entry BLOB NOT NULL, created REAL NOT NULL)"
#: Tensor constants up to this many elements are hashed into the key; a graph holding a larger one is not cached.
MAX_CONSTANT_NUMEL = 1 << 20
#: Entries kept; the oldest beyond go (a fuzz campaign compiles a new graph at almost every example).
MAX_ENTRIES = 2048
_TORCH_MODULES = ("torch", "_operator", "operator", "math", "builtins")
_TORCH_NAMESPACES = ("aten", "prims")


@dataclasses.dataclass
class Traced:
    """What the lean runtime compiles for one dynamo graph: ``(inference,)`` or ``(forward, backward)``, and
    how a training graph's outputs and backward inputs line up (``lean.Plan``'s fields)."""

    graphs: tuple[torch.fx.GraphModule, ...]
    num_outputs: int = 0
    non_differentiable: tuple[int, ...] = ()
    backward_inputs: tuple[tuple[str, int], ...] = ()

    @property
    def training(self) -> bool:
        return len(self.graphs) == 2


# ----------------------------------------------------------------------------------------------- the key

class Uncacheable(Exception):
    """Why a graph's trace cannot be looked up by a key (a message for the debug log)."""


def key(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], training: bool,
        decompositions: Optional[dict] = None) -> Optional[str]:
    """The cache key of tracing ``gm`` at ``example_inputs`` with ``decompositions``, or None (the reason logged)
    where it has none."""
    try:
        parts = [_FORMAT, _versions(), repr(config.cache_key()), config.partitioner, training, _global_state(),
                 _table(decompositions or {}), _graph_text(gm), _inputs(example_inputs)]
    except Exception as e:  # noqa: BLE001  (Uncacheable, or a constant that does not hash: trace it)
        counters["graph_cache.uncacheable"] += 1
        log.debug("graph not cached: %s: %s", type(e).__name__, e)
        return None
    return hashlib.sha256(repr(parts).encode()).hexdigest()


@functools.lru_cache(maxsize=1)
def _versions() -> tuple:
    """torch, Triton, Python, and a digest of the source of this package and the base it builds on (their
    decompositions, partitioner, runtime)."""
    from tritondiff import base
    digest = hashlib.sha256()
    for root in (os.path.dirname(os.path.abspath(__file__)), os.path.dirname(os.path.abspath(base.__file__))):
        for folder, dirs, files in sorted(os.walk(root)):
            dirs.sort()
            for name in sorted(f for f in files if f.endswith(".py")):
                path = os.path.join(folder, name)
                digest.update(os.path.relpath(path, root).encode())
                with open(path, "rb") as fh:
                    digest.update(fh.read())
    return torch.__version__, triton.__version__, sys.version_info[:2], digest.hexdigest()


#: Backend switches a composite op reads while it is traced: scaled_dot_product_attention picks its kernel by
#: the SDPA flags, batch norm and convolutions by cuDNN's and oneDNN's; (name, how to read it).
_BACKEND_FLAGS = (
    ("flash_sdp", lambda: torch.backends.cuda.flash_sdp_enabled()),
    ("mem_efficient_sdp", lambda: torch.backends.cuda.mem_efficient_sdp_enabled()),
    ("math_sdp", lambda: torch.backends.cuda.math_sdp_enabled()),
    ("cudnn_sdp", lambda: torch.backends.cuda.cudnn_sdp_enabled()),
    ("fp16_bf16_reduction_math_sdp", lambda: torch.backends.cuda.fp16_bf16_reduction_math_sdp_allowed()),
    ("cudnn", lambda: torch.backends.cudnn.enabled),
    ("cudnn_deterministic", lambda: torch.backends.cudnn.deterministic),
    ("mkldnn", lambda: torch.backends.mkldnn.enabled),
)


def _global_state() -> tuple:
    """The process state a trace reads besides its inputs."""
    import torch._functorch.config as functorch_config
    autocast = tuple((d, torch.is_autocast_enabled(d), str(torch.get_autocast_dtype(d))) for d in ("cpu", "cuda"))
    functorch = sorted((k, repr(v)) for k, v in functorch_config.get_config_copy().items())
    backends = []
    for name, read in _BACKEND_FLAGS:
        try:
            backends.append((name, bool(read())))
        except (AttributeError, RuntimeError):      # a switch this torch does not have
            backends.append((name, None))
    return (torch.is_grad_enabled(), autocast, torch.is_autocast_cache_enabled(),
            torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled(),
            str(torch.get_default_dtype()), functorch, tuple(backends))


def _table(decompositions: dict) -> str:
    """The decomposition table by what each entry runs: an op's name and its function's module and name (a
    table with another function for an op -- a test's, a caller's -- is another key)."""
    entries = sorted((str(op), getattr(fn, "__module__", "?"), getattr(fn, "__qualname__", type(fn).__name__))
                     for op, fn in decompositions.items())
    return hashlib.sha256(repr(entries).encode()).hexdigest()


def _graph_text(gm: torch.fx.GraphModule) -> list:
    """``gm``'s code and its constants' contents; raises ``Uncacheable`` for what its text does not pin down."""
    text = [gm.code]
    for node in gm.graph.nodes:
        if node.op == "call_module":
            raise Uncacheable(f"node {node.name} calls a module ({node.target})")
        if node.op == "call_function" and not _from_torch(node.target):
            raise Uncacheable(f"node {node.name} calls {getattr(node.target, '__qualname__', node.target)!r}: "
                              f"its code (a custom op's Python kernels and autograd) is not in the key")
        _no_python_callables(node)
        if node.op == "get_attr":
            value = _attr(gm, node.target)
            if isinstance(value, torch.fx.GraphModule):
                text.append((node.target, _graph_text(value)))
            elif isinstance(value, torch.Tensor):
                text.append((node.target, _tensor_digest(value)))
            else:
                raise Uncacheable(f"attribute {node.target} is a {type(value).__name__}")
    return text


def _from_torch(target: Any) -> bool:
    """A target whose behaviour the torch version pins down: an ATen or prims operator, a higher-order operator,
    a function of torch's own modules -- not a custom op (its Python kernels and autograd are the user's), not a
    ``functools.partial`` of anything."""
    if isinstance(target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return target.namespace in _TORCH_NAMESPACES
    if isinstance(target, torch._ops.HigherOrderOperator):
        return True
    if isinstance(target, functools.partial):
        return False
    module = getattr(target, "__module__", None) or ""
    return module.split(".", 1)[0] in _TORCH_MODULES


def _no_python_callables(node: torch.fx.Node) -> None:
    """Arguments are data: a Python callable among them (a checkpoint's context function) is keyed by its name
    only."""
    def check(a: Any) -> Any:
        if callable(a) and not isinstance(a, (torch.fx.Node, torch.dtype, torch.device, torch.memory_format,
                                                torch.layout, type)) and not _from_torch(a):
            raise Uncacheable(f"node {node.name} takes the callable {a!r} as an argument")
        return a
    torch.fx.node.map_aggregate((node.args, node.kwargs), check)


def _attr(gm: torch.nn.Module, target: str) -> Any:
    value: Any = gm
    for part in target.split("."):
        value = getattr(value, part)
    return value


def _tensor_digest(t: torch.Tensor) -> tuple:
    if t.numel() > MAX_CONSTANT_NUMEL:
        raise Uncacheable(f"a tensor constant of {t.numel()} elements (hashed up to {MAX_CONSTANT_NUMEL})")
    data = t.detach().to("cpu").contiguous()
    raw = data.view(torch.uint8) if data.dtype != torch.bool and data.numel() else data.to(torch.uint8)
    return (_meta(t), hashlib.sha256(raw.numpy().tobytes()).hexdigest())


def _meta(t: torch.Tensor) -> tuple:
    return tuple(t.shape), tuple(t.stride()), str(t.dtype), str(t.device)


def _inputs(example_inputs: Sequence[Any]) -> list:
    out, storages = [], {}
    for i, a in enumerate(example_inputs):
        if isinstance(a, torch.Tensor):
            if any(isinstance(s, torch.SymInt) for s in (*a.shape, *a.stride())):
                raise Uncacheable(f"input {i} has symbolic sizes")
            base = storages.setdefault(_storage_id(a), i)
            out.append(("tensor", _meta(a), a.storage_offset(), a.requires_grad, base))
        elif isinstance(a, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            raise Uncacheable(f"input {i} is symbolic ({a})")
        elif isinstance(a, float):
            out.append(("float", a.hex()))
        elif a is None or isinstance(a, (bool, int)):
            out.append((type(a).__name__, a))
        else:
            raise Uncacheable(f"input {i} is a {type(a).__name__}")
    return out


def _storage_id(t: torch.Tensor) -> Any:
    try:
        return ("storage", t.untyped_storage().data_ptr(), str(t.device))
    except (RuntimeError, NotImplementedError):      # a fake or meta tensor: no storage to share
        return ("tensor", id(t))


# ------------------------------------------------------------------------------------------- the entries

def _file() -> SqliteFile:
    return SqliteFile(os.path.join(config.graph_cache_dir, CACHE_FILE), _SCHEMA, "SELECT key, entry FROM graphs LIMIT 1",
                      name="graph cache", counter="graph_cache.cache_rebuilt",
                      error=lambda message, path: GraphCacheError(message, path=path))


def load(digest: str) -> Optional[Traced]:
    """The graphs stored under ``digest``, revived, or None (a file that cannot be read now: a warning, once)."""
    try:
        row = _file().fetchone("SELECT entry FROM graphs WHERE key = ?", (digest,))
    except GraphCacheError as e:
        _unusable(e)
        return None
    blob = None if row is None else row[0]
    if blob is None:
        counters["graph_cache.misses"] += 1
        return None
    try:
        traced = _revive(blob)
    except Exception as e:  # noqa: BLE001  (a torch upgrade's pickles, a damaged row: recompute, then replace)
        counters["graph_cache.misses"] += 1
        log.debug("graph cache entry %s does not revive: %s: %s", digest[:12], type(e).__name__, e)
        return None
    counters["graph_cache.hits"] += 1
    return traced


def store(digest: str, traced: Traced) -> None:
    """Keep ``traced`` under ``digest``, and drop the oldest entries past ``MAX_ENTRIES``."""
    try:
        blob = _serialise(traced)
        for gm, revived in zip(traced.graphs, _rebuild_graphs(blob)):
            if revived.code != gm.code:          # what a warm start would compile is exactly this graph
                raise Uncacheable(f"graph {gm.__class__.__name__} does not rebuild to the same code")
    except Exception as e:  # noqa: BLE001  (a target or argument the record cannot hold: not cached)
        counters["graph_cache.uncacheable"] += 1
        log.debug("graph not cached, it does not round-trip: %s: %s", type(e).__name__, e)
        return
    try:
        _file().write(("INSERT OR REPLACE INTO graphs VALUES (?, ?, ?)", (digest, blob, time.time())),
                      ("DELETE FROM graphs WHERE key IN (SELECT key FROM graphs ORDER BY created DESC "
                       "LIMIT -1 OFFSET ?)", (MAX_ENTRIES,)))
    except GraphCacheError as e:
        _unusable(e)
        return
    counters["graph_cache.stored"] += 1


_warned: set = set()


def _unusable(error: GraphCacheError) -> None:
    """A cache file that cannot be read or written now costs a trace, not the compile: said once per file."""
    counters["graph_cache.errors"] += 1
    if error.path not in _warned:
        _warned.add(error.path)
        warnings.warn(f"graph cache not used: {error}", RuntimeWarning, stacklevel=3)


# A graph is stored as its nodes -- (name, op, target, args, kwargs), another node named by ``_Ref`` -- and its
# tensor attributes: rebuilt node by node it has the names, and so the kernel names and sources, of the graph
# the cold process compiled.  ATen's operators do not pickle; they are stored by name.

@dataclasses.dataclass(frozen=True)
class _Ref:
    name: str


@dataclasses.dataclass(frozen=True)
class _Op:
    namespace: str
    name: str
    overload: str


@dataclasses.dataclass(frozen=True)
class _HigherOrder:
    name: str


def _target(target: Any) -> Any:
    if isinstance(target, torch._ops.OpOverload):
        return _Op(target.namespace, target._opname, target._overloadname)
    if isinstance(target, torch._ops.HigherOrderOperator):
        return _HigherOrder(target.name())
    return target                              # a placeholder's or attribute's name, operator.getitem, ...


def _resolve(target: Any) -> Any:
    if isinstance(target, _Op):
        return getattr(getattr(getattr(torch.ops, target.namespace), target.name), target.overload)
    if isinstance(target, _HigherOrder):
        return getattr(torch.ops.higher_order, target.name)
    return target


def _graph_record(gm: torch.fx.GraphModule) -> dict:
    nodes, attrs = [], {}
    for node in gm.graph.nodes:
        args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: _Ref(n.name))
        nodes.append((node.name, node.op, _target(node.target), args, kwargs))
        if node.op == "get_attr":
            value = _attr(gm, node.target)
            if not isinstance(value, torch.Tensor):
                raise Uncacheable(f"attribute {node.target} is a {type(value).__name__}")
            attrs[node.target] = value.detach()
    placeholders = []
    for node in gm.graph.find_nodes(op="placeholder"):
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            raise Uncacheable(f"placeholder {node.name} holds {type(val).__name__}, not a tensor")
        if any(isinstance(s, torch.SymInt) for s in (*val.shape, *val.stride())):
            raise Uncacheable(f"placeholder {node.name} has symbolic sizes")
        placeholders.append(_meta(val))
    return {"nodes": nodes, "attrs": {k: v.to("cpu") for k, v in attrs.items()},
            "attr_devices": {k: str(v.device) for k, v in attrs.items()}, "placeholders": placeholders}


def _graph_of(record: dict) -> torch.fx.GraphModule:
    graph = torch.fx.Graph()
    env: dict[str, torch.fx.Node] = {}
    for name, op, target, args, kwargs in record["nodes"]:
        args, kwargs = torch.fx.node.map_aggregate((args, kwargs), lambda a: env[a.name] if isinstance(a, _Ref) else a)
        if op == "output":
            graph.output(args[0])
            continue
        node = graph.create_node(op, _resolve(target), tuple(args), dict(kwargs), name=name)
        if node.name != name:
            raise Uncacheable(f"node {name} rebuilt as {node.name}")
        env[name] = node
    root = torch.nn.Module()
    for target, value in record["attrs"].items():
        owner = root
        *path, leaf = target.split(".")
        for part in path:
            if not hasattr(owner, part):
                owner.add_module(part, torch.nn.Module())
            owner = getattr(owner, part)
        owner.register_buffer(leaf, value.to(record["attr_devices"][target]))
    return torch.fx.GraphModule(root, graph)


def _serialise(traced: Traced) -> bytes:
    return pickle.dumps({"graphs": [_graph_record(gm) for gm in traced.graphs], "num_outputs": traced.num_outputs,
                         "non_differentiable": traced.non_differentiable, "backward_inputs": traced.backward_inputs})


def _rebuild_graphs(blob: bytes) -> list[torch.fx.GraphModule]:
    return [_graph_of(record) for record in pickle.loads(blob)["graphs"]]


def _revive(blob: bytes) -> Traced:
    entry = pickle.loads(blob)
    graphs = []
    for record in entry["graphs"]:
        gm = _graph_of(record)
        _propagate(gm, record["placeholders"])
        graphs.append(gm)
    traced = Traced(tuple(graphs), entry["num_outputs"], tuple(entry["non_differentiable"]),
                    tuple(tuple(b) for b in entry["backward_inputs"]))
    if traced.training:
        traced.graphs[0].meta[SAVED_FROM] = traced.num_outputs   # the saved values keep the compiler's layouts
    return traced


def _propagate(gm: torch.fx.GraphModule, metas: Sequence[tuple]) -> None:
    """Each node's ``val`` as tracing left it: fake-tensor propagation from the placeholders' metadata."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp
    mode = FakeTensorMode(allow_non_fake_inputs=True)     # the graph's own constants (a lifted -inf) stay real
    with mode:
        fakes = [torch.empty_strided(shape, stride, dtype=getattr(torch, dtype.split(".", 1)[1]), device=device)
                 for shape, stride, dtype, device in metas]
    FakeTensorProp(gm, mode).propagate_dont_convert_inputs(*fakes)


__all__ = ["CACHE_FILE", "MAX_CONSTANT_NUMEL", "MAX_ENTRIES", "Traced", "Uncacheable", "key", "load", "store"]
