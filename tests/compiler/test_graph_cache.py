"""compiler.graph_cache: a graph traced before is revived, not traced; the key changes with everything the trace
reads; what it cannot pin down is not cached; a damaged cache is a miss or a rebuilt file, never a wrong graph."""
import re
import sqlite3

import pytest
import torch
import torch.fx

from tritondiff import compiler
from tritondiff.compiler import graph_cache, lean
from tritondiff.compiler.backend import compile_fresh
from tritondiff.compiler.exc import GraphCacheError
from tests.compiler.util import seeded_randn


@pytest.fixture
def cache_dir(tmp_path):
    with compiler.config.patch(graph_cache=True, graph_cache_dir=str(tmp_path)):
        yield tmp_path


def _block(x, w, b):
    h = torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b)
    return torch.nn.functional.gelu(h) * x.sigmoid()


def _leaves(seed=0):
    return [seeded_randn(*s, seed=seed + i).requires_grad_() for i, s in enumerate(((13, 24), (24,), (24,)))]


def _forward_backward(fn):
    x, w, b = _leaves()
    out = fn(x, w, b)
    grads = torch.autograd.grad(out, (x, w, b), seeded_randn(13, 24, seed=9))
    return [out.detach(), *grads]


def test_a_graph_traced_before_is_revived_and_computes_bit_for_bit_the_same(cache_dir):
    cold = _forward_backward(compile_fresh(_block))
    assert compiler.counters["graph_cache.stored"] == 1 and not compiler.counters["graph_cache.hits"]
    torch._dynamo.reset()
    traced_before = lean.TRACE_SECONDS["trace"]
    warm = _forward_backward(compile_fresh(_block))
    assert compiler.counters["graph_cache.hits"] == 1
    assert lean.TRACE_SECONDS["trace"] == traced_before, "a hit must not trace the graph again"
    assert compiler.counters["lean_runtime.training"] == 2
    for c, w in zip(cold, warm):
        assert torch.equal(c, w)
    eager = _forward_backward(_block)
    for c, e in zip(cold, eager):
        torch.testing.assert_close(c, e, rtol=1e-4, atol=1e-5)


def test_the_cold_process_compiles_the_graphs_a_warm_one_revives(cache_dir):
    """Same kernel sources cold and warm: a warm start then finds every kernel in Triton's cache."""
    def sources():
        compiler.dump.clear()
        _forward_backward(compile_fresh(_block))
        return sorted(re.sub(r"\bg\d+_", "g_", a.texts["triton"]) for a in compiler.dump.recent_artifacts())
    cold = sources()
    torch._dynamo.reset()
    warm = sources()
    assert compiler.counters["graph_cache.hits"] == 1 and cold == warm and len(cold) == 2


def _gm():
    return torch.fx.symbolic_trace(lambda x, y: torch.sin(x) * y + 1.0)


def _key(args, training=True, gm=None):
    return graph_cache.key(gm or _gm(), args, training)


def test_the_key_changes_with_what_the_trace_reads(cache_dir):
    x, y = torch.randn(6, 4), torch.randn(6, 4)
    base = _key([x, y])
    assert base == _key([x.clone(), y.clone()]), "same metadata, other values: one key"
    others = {
        "shape": _key([torch.randn(6, 5), torch.randn(6, 5)]),
        "strides": _key([torch.randn(4, 6).t(), y]),
        "dtype": _key([x.double(), y.double()]),
        "requires_grad": _key([x.clone().requires_grad_(), y]),
        "training": _key([x, y], training=False),
        "aliasing inputs": _key([x, x]),
        "graph": _key([x, y], gm=torch.fx.symbolic_trace(lambda x, y: torch.cos(x) * y + 1.0)),
        "a constant in the code": _key([x, y], gm=torch.fx.symbolic_trace(lambda x, y: torch.sin(x) * y + 2.0)),
    }
    with torch.autocast("cpu", dtype=torch.bfloat16):
        others["autocast"] = _key([x, y])
    with torch.no_grad():
        others["grad mode"] = _key([x, y])
    with compiler.config.patch(fp_fusion=not compiler.config.fp_fusion):
        others["a compiler knob"] = _key([x, y])
    with compiler.config.patch(partitioner="default"):
        others["the partitioner"] = _key([x, y])
    others["storage offset"] = _key([torch.randn(30)[6:].view(6, 4), y])
    torch.use_deterministic_algorithms(True)
    try:
        others["deterministic algorithms"] = _key([x, y])
    finally:
        torch.use_deterministic_algorithms(False)
    with torch.nn.attention.sdpa_kernel([torch.nn.attention.SDPBackend.MATH]):
        others["SDPA backends"] = _key([x, y])
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        others["default dtype"] = _key([x, y])
    finally:
        torch.set_default_dtype(default)
    from torch._decomp import core_aten_decompositions
    from tritondiff.compiler.decompositions import decomposition_table
    table = decomposition_table()
    op = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default
    with_table = graph_cache.key(_gm(), [x, y], True, table)
    assert with_table == graph_cache.key(_gm(), [x, y], True, dict(table)) and with_table != base
    # another function for one op (a test that plants an unfaithful decomposition): another key
    assert graph_cache.key(_gm(), [x, y], True, {**table, op: core_aten_decompositions()[op]}) != with_table
    assert base is not None and all(k is not None for k in others.values())
    assert len({base, *others.values()}) == len(others) + 1, {k: v[:8] for k, v in others.items()}


def _outside_torch(t):
    return t * 3


torch.fx.wrap("_outside_torch")


@torch.library.custom_op("tritondiff_test::scaled", mutates_args=())
def _scaled(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@_scaled.register_fake
def _(x):
    return torch.empty_like(x)


def test_the_key_holds_no_addresses_so_another_process_computes_the_same():
    x = torch.randn(3, requires_grad=True)
    parts = [graph_cache._versions(), graph_cache._global_state(), graph_cache._graph_text(_gm()),
             graph_cache._inputs([x, x.detach()])]
    assert " at 0x" not in repr(parts) and "object at" not in repr(parts)


def test_what_the_key_cannot_pin_down_is_not_cached(cache_dir):
    x = torch.randn(5)
    assert _key([x], gm=torch.fx.symbolic_trace(lambda t: _outside_torch(t) + 1)) is None
    gm = _gm()
    gm.register_buffer("big", torch.zeros(graph_cache.MAX_CONSTANT_NUMEL + 1))
    with gm.graph.inserting_before(list(gm.graph.nodes)[-1]):
        gm.graph.get_attr("big")
    gm.recompile()
    assert _key([x, x.clone()], gm=gm) is None
    # a custom op: its Python kernels and autograd formula are the user's code, not in the key
    custom = torch.fx.symbolic_trace(lambda t: torch.ops.tritondiff_test.scaled(t) + 1)
    assert _key([x], gm=custom) is None
    assert compiler.counters["graph_cache.uncacheable"] == 3


def test_a_tensor_constant_is_keyed_by_its_contents(cache_dir):
    def with_constant(value):
        gm = _gm()
        gm.register_buffer("c", torch.full((3,), value))
        with gm.graph.inserting_before(list(gm.graph.nodes)[-1]):
            gm.graph.get_attr("c")
        gm.recompile()
        return gm
    x, y = torch.randn(3), torch.randn(3)
    assert _key([x, y], gm=with_constant(1.0)) == _key([x, y], gm=with_constant(1.0))
    assert _key([x, y], gm=with_constant(1.0)) != _key([x, y], gm=with_constant(2.0))


def test_an_entry_that_does_not_revive_is_a_miss_and_is_replaced(cache_dir):
    cold = _forward_backward(compile_fresh(_block))
    with sqlite3.connect(cache_dir / graph_cache.CACHE_FILE) as conn:
        conn.execute("UPDATE graphs SET entry = ?", (b"not a pickle",))
    torch._dynamo.reset()
    again = _forward_backward(compile_fresh(_block))
    assert compiler.counters["graph_cache.misses"] == 2 and compiler.counters["graph_cache.stored"] == 2
    assert all(torch.equal(c, a) for c, a in zip(cold, again))
    torch._dynamo.reset()
    _forward_backward(compile_fresh(_block))
    assert compiler.counters["graph_cache.hits"] == 1


def test_a_file_that_is_not_a_cache_is_moved_aside_with_a_warning(cache_dir):
    (cache_dir / graph_cache.CACHE_FILE).write_bytes(b"garbage, not sqlite" * 100)
    with pytest.warns(RuntimeWarning, match="graph cache .* was unreadable"):
        _forward_backward(compile_fresh(_block))
    assert (cache_dir / (graph_cache.CACHE_FILE + ".corrupt")).exists()
    assert compiler.counters["graph_cache.cache_rebuilt"] == 1 and compiler.counters["graph_cache.stored"] == 1


def test_a_cache_directory_that_cannot_be_made_is_said_once_and_costs_the_trace(tmp_path, monkeypatch):
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("a file where the cache directory should be")
    monkeypatch.setattr(graph_cache, "_warned", set())
    with compiler.config.patch(graph_cache=True, graph_cache_dir=str(blocker)):
        with pytest.raises(GraphCacheError, match="graph_cache_dir") as info:
            graph_cache._file().fetchone("SELECT 1")
        assert info.value.path.startswith(str(blocker))
        with pytest.warns(RuntimeWarning, match="(?s)directory cannot be made.*graph_cache_dir"):
            got = _forward_backward(compile_fresh(_block))
        torch._dynamo.reset()
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("error")              # said once per file
            _forward_backward(compile_fresh(_block))
    assert compiler.counters["graph_cache.errors"] >= 2
    for g, e in zip(got, _forward_backward(_block)):
        torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-5)


def test_a_file_that_cannot_be_written_costs_the_trace_not_the_compile(cache_dir, monkeypatch):
    from tritondiff.compiler import sqlite_file

    def full_disk(self, *statements):
        with self._errors():
            raise sqlite3.OperationalError("database or disk is full")
    monkeypatch.setattr(sqlite_file.SqliteFile, "write", full_disk)
    monkeypatch.setattr(graph_cache, "_warned", set())
    with pytest.warns(RuntimeWarning, match="(?s)graph cache not used: .*disk is full.*graph_cache_dir"):
        got = _forward_backward(compile_fresh(_block))
    assert compiler.counters["graph_cache.errors"] == 1 and not compiler.counters["graph_cache.stored"]
    for g, e in zip(got, _forward_backward(_block)):
        torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-5)


def _stored_graph():
    """A small traced graph with its values, as the lean runtime stores one."""
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp
    gm = _gm()
    FakeTensorProp(gm).propagate(torch.randn(3), torch.randn(3))
    return graph_cache.Traced((gm,))


def test_a_file_locked_by_another_process_is_busy_not_corrupt(cache_dir, monkeypatch):
    """A lock held past the timeout is not a damaged file: nothing is moved aside, the compile goes on."""
    from tritondiff.compiler import sqlite_file
    monkeypatch.setattr(sqlite_file, "TIMEOUT_S", 0.2)
    monkeypatch.setattr(graph_cache, "_warned", set())
    path = cache_dir / graph_cache.CACHE_FILE
    graph_cache.store("0" * 64, _stored_graph())      # a real file with a row in it
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.warns(RuntimeWarning, match="graph cache not used: .*locked"):
            _forward_backward(compile_fresh(_block))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert not (cache_dir / (graph_cache.CACHE_FILE + ".corrupt")).exists()
    assert not compiler.counters["graph_cache.cache_rebuilt"]
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM graphs").fetchone()[0] >= 1


def test_the_oldest_entries_go_past_the_limit(cache_dir, monkeypatch):
    monkeypatch.setattr(graph_cache, "MAX_ENTRIES", 3)
    for i in range(5):
        graph_cache.store(f"{i:064d}", _stored_graph())
    with sqlite3.connect(cache_dir / graph_cache.CACHE_FILE) as conn:
        keys = sorted(k for (k,) in conn.execute("SELECT key FROM graphs"))
    assert keys == [f"{i:064d}" for i in (2, 3, 4)]


def test_off_means_no_file_and_no_lookup(cache_dir):
    with compiler.config.patch(graph_cache=False):
        _forward_backward(compile_fresh(_block))
    assert not (cache_dir / graph_cache.CACHE_FILE).exists()
    assert not any(k.startswith("graph_cache.") for k in compiler.counters)


_PROCESS = """
import torch
from tritondiff.compiler import counters
from tritondiff.compiler.backend import compile_fresh
from tests.compiler.test_graph_cache import _block, _forward_backward
out = _forward_backward(compile_fresh(_block))
print("HITS", counters["graph_cache.hits"], "STORED", counters["graph_cache.stored"])
print("BITS", [t.double().sum().item() for t in out], [t.abs().double().sum().item() for t in out])
"""


@pytest.mark.slow
def test_a_second_process_revives_the_graph_and_computes_the_same_bits(tmp_path):
    """The key is stable across processes (no addresses, no per-process state) and the revived graph is the
    traced one: the second process hits and returns the first's results."""
    import os
    import subprocess
    import sys
    env = {**os.environ, "TRITONDIFF_GRAPH_CACHE_DIR": str(tmp_path), "TRITON_INTERPRET": "1"}
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    runs = [subprocess.run([sys.executable, "-c", _PROCESS], env=env, cwd=root, capture_output=True, text=True,
                           timeout=300) for _ in range(2)]
    lines = [dict((ln.split(" ", 1)[0], ln) for ln in r.stdout.splitlines()) for r in runs]
    assert all(r.returncode == 0 for r in runs), [r.stderr[-2000:] for r in runs]
    assert lines[0]["HITS"] == "HITS 0 STORED 1" and lines[1]["HITS"] == "HITS 1 STORED 0"
    assert lines[0]["BITS"] == lines[1]["BITS"]
