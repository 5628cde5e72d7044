"""bench.compiler on CPU: the dry run lists every workload with its bytes; a real run refuses clearly."""
import dataclasses
import json
import math

import pytest
import torch

from bench import compiler as benchmark
from tests.compiler.conftest import fresh_compiler  # noqa: F401  (autouse: fresh dynamo caches, counters)


def test_dry_run_lists_every_workload_with_its_minimal_traffic(capsys, tmp_path):
    out = tmp_path / "w.json"
    assert benchmark.main(["--dry-run", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    names = [w.name for w in benchmark.all_workloads()]
    assert len(names) == 10 and all(n in text for n in names)
    rows = {r["workload"]: r for r in json.loads(out.read_text())}
    assert rows["nrm2 2^28"]["bytes"] == 2**28 * 4 + 4
    assert rows["softmax 8192x8192"]["bytes"] == 2 * 8192 * 8192 * 4
    t, n, c = 65536, 4, 2560
    assert rows["mHC pre_map"]["bytes"] == t * n * c * 2 + t * n * 4 + t * c * 2
    assert rows["layer_norm fwd+bwd 4096x10240 float16"]["bytes"] == 5 * 4096 * 10240 * 2 + 4 * 4096 * 4 + 6 * 10240 * 2
    assert "1,152,000" not in text and f"{2**28 * 4 + 4:,}" in text


def test_the_wide_suite_lists_rows_past_the_seeds_shapes(capsys, tmp_path):
    out = tmp_path / "w.json"
    assert benchmark.main(["--dry-run", "--suite", "wide", "--json", str(out)]) == 0
    rows = {r["workload"]: r["bytes"] for r in json.loads(out.read_text())}
    assert set(rows) == {w.name for w in benchmark.wide_workloads()} and len(rows) == 8
    assert rows["softmax 4096x32768"] == 2 * 4096 * 32768 * 4
    assert rows["softmax 1024x131072 bf16"] == 2 * 1024 * 131072 * 2
    assert not set(rows) & {w.name for w in benchmark.all_workloads()}       # no seed row is repeated
    assert benchmark.main(["--dry-run", "--suite", "all"]) == 0
    assert len([ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("| ") and "workload" not in ln]) \
        == 8 + 18
    with pytest.raises(SystemExit):
        benchmark.main(["--dry-run", "--suite", "wide", "--only", "nrm2"])     # a seed name, not in the wide suite


def test_only_filters_and_rejects_unknown_names(capsys):
    assert benchmark.main(["--dry-run", "--only", "mHC"]) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("| mHC")]
    assert len(lines) == 3
    with pytest.raises(SystemExit):
        benchmark.main(["--dry-run", "--only", "no-such-workload"])


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present")
def test_without_a_gpu_it_exits_2_with_one_line(capsys):
    assert benchmark.main([]) == 2
    out = capsys.readouterr().out.strip().splitlines()
    assert out == [benchmark.GPU_LINE] and "needs a CUDA GPU" in out[0]


def test_report_computes_bandwidth_speedups_and_geomean():
    rows = [{"workload": "a", "shape": "[1]", "bytes": 2_000_000_000, "results": {
        "inductor": {"ms": 2.0, "compile_s": 3.0, "error": None, "matches_eager": True, "gpu_ms": 0.9,
                     "host_ms": 0.1},
        "tritondiff": {"ms": 1.0, "compile_s": 1.5, "error": None, "matches_eager": True, "gpu_ms": 0.3,
                       "host_ms": 0.2}}},
        {"workload": "b", "shape": "[2]", "bytes": 10, "results": {
            "inductor": {"ms": 1.0, "compile_s": 1.0, "error": None, "matches_eager": True},
            "tritondiff": {"ms": 2.0, "compile_s": 1.0, "error": None, "matches_eager": False}}},
        {"workload": "c", "shape": "[3]", "bytes": 10, "results": {
            "tritondiff": {"ms": None, "compile_s": None, "error": "KernelCompileError: x", "matches_eager": None}}},
        {"workload": "d", "shape": "[4]", "bytes": 10, "skipped": "time budget of 1 s spent", "results": {}}]
    text = benchmark.report(rows, 4000.0, {"device": "X"})
    assert "| a | [1] | 2000.0 | tritondiff | 1.000 | 2000 | 50% | 1.5 | pass | 2.00x | 0.300 | 0.200 | 3.00x |" in text
    assert "GPU-time speedup of tritondiff over Inductor (1 workloads): 3.000x" in text   # b has no GPU time
    assert "| FAIL | 0.50x |" in text and "failed: KernelCompileError: x" in text and "skipped" in text
    assert f"(2 workloads): {math.exp((math.log(2) + math.log(0.5)) / 2):.3f}x" in text


def test_the_verdict_is_the_harness_oracle_against_a_float64_run_of_the_same_inputs():
    x = torch.randn(64, 33, generator=torch.Generator().manual_seed(0), device="cpu").requires_grad_()
    (x64,) = benchmark._upcast((x,))
    assert x64.dtype == torch.float64 and x64.requires_grad and torch.equal(x64.detach().float(), x.detach())
    assert benchmark._upcast((3, None)) == (3, None)
    truth = torch.softmax(x64, -1).detach()
    eager = torch.softmax(x, -1).detach()
    assert benchmark._judge(eager + 1e-7 * torch.randn_like(eager), eager, truth)   # rounding-level noise
    wrong = eager.clone()
    wrong[-1, -1] += 1e-3                                                           # one element off
    assert not benchmark._judge(wrong, eager, truth)


def test_variants_patch_knobs_and_get_their_own_geomean(capsys):
    name, changes = benchmark.parse_variant("big:persistent_max_rnumel=8192,reduction_strategy=looped")
    assert (name, changes) == ("big", {"persistent_max_rnumel": 8192, "reduction_strategy": "looped"})
    for bad in ("nobody", "x:persistent_max_rnumel", "x:no_such_knob=1", "x:persistent_max_rnumel=1000"):
        with pytest.raises(SystemExit) as exit_:
            benchmark.main(["--dry-run", "--variant", bad])
        assert exit_.value.code == 2 and "error:" in capsys.readouterr().err
    backends = benchmark._backends(["tritondiff"], [("big", changes)])
    assert list(backends) == ["eager", "tritondiff", "tritondiff[big]"]
    rows = [{"workload": "a", "shape": "[1]", "bytes": 10, "results": {
        "inductor": {"ms": 2.0, "compile_s": 1.0, "error": None, "matches_eager": True},
        "tritondiff": {"ms": 4.0, "compile_s": 1.0, "error": None, "matches_eager": True},
        "tritondiff[big]": {"ms": 1.0, "compile_s": 1.0, "error": None, "matches_eager": True}}}]
    text = benchmark.report(rows, 100.0, {})
    assert "speedup of tritondiff over Inductor (1 workloads): 0.500x" in text
    assert "speedup of tritondiff[big] over Inductor (1 workloads): 2.000x" in text


def test_a_variant_compiles_and_runs_under_its_knobs():
    from tritondiff.compiler import dump
    wrap = benchmark._with_config({"reduction_strategy": "looped", "rblock": 16})
    w = benchmark.Workload("sum", "[8, 100]", torch.float32, 0, lambda: (), benchmark._forward, lambda x: x.sum(-1))
    x = torch.randn(8, 100)
    torch.testing.assert_close(benchmark.build(w, wrap)(x), x.sum(-1))
    assert "looped" in dump.last_artifacts().texts["triton"]


def test_a_variant_s_knobs_reach_the_backward_of_a_fwd_bwd_workload():
    """The backward runs after the compiled forward returns: the knobs must still be in force there (they
    were not, and a sweep's layer-norm variants timed the default backward kernels)."""
    from tritondiff.compiler import dump, workloads
    wrap = benchmark._with_config({"reduction_strategy": "looped", "rblock": 16})
    w = benchmark.Workload("ln", "[4, 40]", torch.float32, 0, lambda: (), benchmark._fwd_bwd, workloads.layer_norm)
    leaves = [torch.randn(*s, requires_grad=True) for s in ((4, 40), (40,), (40,))]
    dy = torch.randn(4, 40)
    dump.forget_ran()
    got = benchmark.build(w, wrap)(*leaves, dy)
    want = torch.autograd.grad(workloads.layer_norm(*leaves), leaves, dy)
    for g, e in zip(got, want):
        torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-4)
    backward = [a for a in dump.ran_artifacts() if "backward" in a.graph]
    assert backward and all("for roffset" in a.texts["triton"] for a in backward)


def test_the_budget_is_checked_per_backend_and_each_finished_workload_is_written(monkeypatch):
    """A workload under many variants takes minutes: the run stops between backends, and the report is
    rewritten after every workload, so a nightly command cut at its limit keeps what it measured."""
    from tritondiff.base import timing as _timing
    clock = [0.0]
    monkeypatch.setattr(benchmark.time, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(_timing, "copy_bandwidth_gbps", lambda: 1000.0)

    def fake_prepare(w, backend, wrap, reference):
        clock[0] += 6.0
        return benchmark.Result(backend), ("out", "truth"), lambda: None

    def fake_measure(timed, rounds):
        for res, _ in timed.values():
            res.ms, res.gpu_ms, res.host_ms = 1.0, 0.5, 0.1
    monkeypatch.setattr(benchmark, "prepare", fake_prepare)
    monkeypatch.setattr(benchmark, "measure", fake_measure)
    written = []
    selected = [w for w in benchmark.all_workloads() if w.name.startswith("nrm2")][:2]
    rows, _ = benchmark.run(selected, 10.0, on_row=lambda rows, gbps: written.append([r["workload"] for r in rows]))
    first = rows[0]["results"]
    assert [first[b]["ms"] for b in ("eager", "inductor")] == [1.0, 1.0]
    assert first["tritondiff"]["skipped"] == "time budget of 10 s spent" and first["tritondiff"]["error"] is None
    assert "| tritondiff | skipped: time budget of 10 s spent |" in benchmark.report(rows, 1000.0, {})
    assert rows[1]["skipped"] == "time budget of 10 s spent"
    assert written == [[selected[0].name]]


def test_a_profiler_failure_costs_the_gpu_column_not_the_latency_or_the_reference(monkeypatch):
    from tritondiff.base import timing as _timing
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(_timing, "bench", lambda fn, **kw: _timing.Timing(1.5, 1.0, 2.0))
    monkeypatch.setattr(_timing, "host_ms", lambda fn, iters: 0.2)

    def broken_profiler(fn, iters):
        raise RuntimeError("CUPTI unavailable")
    monkeypatch.setattr(_timing, "kernel_times", broken_profiler)
    w = benchmark.Workload("double", "[3]", torch.float32, 24, lambda: (torch.ones(3),), lambda f: f, lambda x: x * 2)
    res, out, call = benchmark.prepare(w, "eager", lambda f: f, None)
    benchmark.measure({"eager": (res, call)})
    assert (res.ms, res.host_ms, res.gpu_ms, res.error) == (1.5, 0.2, None, None)
    assert torch.equal(out[0], torch.full((3,), 2.0))               # eager's output stays the reference
    monkeypatch.setattr(_timing, "kernel_times", lambda fn, iters: [])
    res, _, call = benchmark.prepare(w, "eager", lambda f: f, None)
    benchmark.measure({"eager": (res, call)})
    assert res.gpu_ms is None                                       # no kernel seen: unknown, not 0.000


def test_rounds_interleave_the_backends_in_a_rotating_order_and_keep_the_median(monkeypatch):
    """On a VM the host drifts: each round times every backend once, the order rotated, and the median of
    the rounds is reported, so no backend is timed only in a slow spell."""
    from tritondiff.base import timing as _timing
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    order, clock = [], [0]

    def fake_bench(fn, **kw):
        clock[0] += 1
        order.append(fn())
        return _timing.Timing(10.0 if clock[0] in (1, 2, 3) else 1.0, 0, 0)   # the first round is a slow spell
    monkeypatch.setattr(_timing, "bench", fake_bench)
    monkeypatch.setattr(_timing, "host_ms", lambda fn, iters: 0.1)
    profiled = []

    def fake_kernel_times(fn, iters):
        profiled.append(fn())
        return [("k", 1.0, 0.9 if len(profiled) <= 3 else 0.5)]          # the GPU is slow in the first round too
    monkeypatch.setattr(_timing, "kernel_times", fake_kernel_times)
    timed = {n: (benchmark.Result(n), lambda n=n: n) for n in ("eager", "inductor", "tritondiff")}
    benchmark.measure(timed, rounds=3)
    assert order == ["eager", "inductor", "tritondiff", "inductor", "tritondiff", "eager",
                     "tritondiff", "eager", "inductor"]
    assert profiled == order                                    # GPU time is taken in the same rounds
    for name, (res, _) in timed.items():
        assert res.ms == 1.0 and res.ms_rounds[0] == 10.0 and len(res.ms_rounds) == 3
        assert (res.host_ms, res.gpu_ms) == (0.1, 0.5) and res.gpu_ms_rounds == [0.9, 0.5, 0.5]


def test_the_rounds_gpu_time_ratios_give_a_range_that_tells_a_tie_from_a_difference():
    ind = {"gpu_ms": 1.0, "gpu_ms_rounds": [1.0, 1.02, 0.98], "ms_rounds": [2.0, 2.0, 2.0]}
    tie = {"gpu_ms": 1.0, "gpu_ms_rounds": [1.01, 1.0, 0.99]}
    faster = {"gpu_ms": 0.8, "gpu_ms_rounds": [0.8, 0.81, 0.79], "ms_rounds": [2.5, 2.0, 1.6]}
    low, high = benchmark.ratio_range(tie, ind)
    assert low < 1.0 < high and (round(low, 4), round(high, 4)) == (0.9899, 1.02)
    assert min(benchmark.ratio_range(faster, ind)) > 1.2
    assert benchmark.ratio_range({"gpu_ms": 1.0}, ind) is None            # a file from before the rounds
    assert benchmark.ratio_range(tie, {"gpu_ms_rounds": [1.0]}) is None    # rounds that do not pair up
    gaps = benchmark.ratio_range({"gpu_ms_rounds": [None, 1.0, 2.0]}, {"gpu_ms_rounds": [1.0, 1.0, None]})
    assert gaps == (1.0, 1.0)                      # a round either missed is left out, not paired with another
    row = {"workload": "w", "shape": "[1]", "bytes": 10**6, "results": {
        "inductor": dict(ind, ms=2.0, compile_s=1.0, error=None, matches_eager=True),
        "tritondiff": dict(faster, ms=2.0, compile_s=1.0, error=None, matches_eager=True)}}
    text = benchmark.report([row], 1000.0, {})
    assert "| 1.25x (1.241-1.259) |" in text                                 # GPU time
    assert "| 1.00x (0.800-1.250) |" in text                                 # latency: its own rounds
    line = benchmark.summary({"copy_gbps": 1000.0, "rows": [row]})
    assert "1.2500x (rounds 1.241-1.259)" in line


def test_measure_with_nothing_to_time_returns_and_a_backend_failing_mid_run_reports_no_times(monkeypatch):
    from tritondiff.base import timing as _timing
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    benchmark.measure({}, rounds=3)                           # every prepare failed: nothing to do, no crash
    calls = {"n": 0}

    def flaky(fn, **kw):
        calls["n"] += 1
        if fn() == "bad" and calls["n"] > 2:
            raise RuntimeError("illegal memory access")
        return _timing.Timing(1.0, 1.0, 1.0)
    monkeypatch.setattr(_timing, "bench", flaky)
    monkeypatch.setattr(_timing, "host_ms", lambda fn, iters: 0.1)
    monkeypatch.setattr(_timing, "kernel_times", lambda fn, iters: [("k", 1.0, 0.5)])
    timed = {n: (benchmark.Result(n), lambda n=n: n) for n in ("good", "bad")}
    benchmark.measure(timed, rounds=3)
    good, bad = timed["good"][0], timed["bad"][0]
    assert (good.ms, good.host_ms, good.gpu_ms) == (1.0, 0.1, 0.5)
    assert bad.error.startswith("RuntimeError") and (bad.ms, bad.host_ms, bad.gpu_ms) == (None, None, None)


def test_dynamo_is_reset_once_per_workload_not_per_backend(monkeypatch):
    """A reset drops every compiled frame: one per backend would make the backends prepared before it compile
    again inside the timing."""
    from tritondiff.base import timing as _timing
    monkeypatch.setattr(_timing, "copy_bandwidth_gbps", lambda: 1000.0)
    resets = []
    monkeypatch.setattr(torch._dynamo, "reset", lambda: resets.append(1))
    monkeypatch.setattr(benchmark, "prepare", lambda w, b, wrap, ref: (benchmark.Result(b), None, None))
    monkeypatch.setattr(benchmark, "measure", lambda timed, rounds: None)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    selected = [w for w in benchmark.all_workloads() if w.name.startswith("nrm2")]
    benchmark.run(selected, 1e9)
    assert len(resets) == len(selected)


def test_summary_prints_each_tritondiff_backend_against_inductor_from_a_json_file(capsys, tmp_path):
    """--summary reads an earlier run's --json file: GPU time, Inductor's, the ratio, % of copy bandwidth from
    GPU time (bytes / time / copy bandwidth) and the oracle; eager and Inductor rows are context, not lines."""
    results = {"copy_gbps": 1000.0, "rows": [
        {"workload": "w1", "bytes": 2_000_000, "results": {
            "eager": {"gpu_ms": 0.01}, "inductor": {"gpu_ms": 0.004},
            "tritondiff": {"gpu_ms": 0.002, "matches_eager": True},
            "tritondiff[v]": {"gpu_ms": 0.008, "matches_eager": False}}},
        {"workload": "w2", "bytes": 1000, "results": {"tritondiff": {"gpu_ms": 0.001, "matches_eager": None},
                                                      "tritondiff[x]": {}}}]}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(results))
    assert benchmark.main(["--summary", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3
    assert lines[0].split()[:2] == ["w1", "tritondiff"] and "GPU      2.00 us vs      4.00  2.0000x  100.0% CBW" in lines[0]
    assert lines[0].endswith("oracle True") and "0.5000x  25.0% CBW  oracle False" in lines[1]
    assert lines[2].split()[:2] == ["w2", "tritondiff"] and "vs         -  -  0.1% CBW  oracle None" in lines[2]


def test_rounds_must_be_at_least_one_and_reach_the_measurement(monkeypatch, capsys):
    with pytest.raises(SystemExit) as e:
        benchmark.main(["--dry-run", "--rounds", "0"])
    assert e.value.code == 2 and "--rounds 0: needs at least one round" in capsys.readouterr().err
    seen = []
    monkeypatch.setattr(benchmark, "prepare", lambda w, b, wrap, ref: (benchmark.Result(b), None, lambda: None))
    monkeypatch.setattr(benchmark, "measure", lambda timed, rounds: seen.append(rounds))
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    from tritondiff.base import timing as _timing
    monkeypatch.setattr(_timing, "copy_bandwidth_gbps", lambda: 1000.0)
    benchmark.run([benchmark.all_workloads()[0]], 1e9, rounds=9)
    assert seen == [9]
    assert "the median of 9 rounds" in benchmark.report([], 1000.0, {}, rounds=9)


def test_a_round_the_profiler_missed_stays_a_gap(monkeypatch):
    """Rounds pair up by index: Inductor's first GPU time and ours of the third must not be compared."""
    from tritondiff.base import timing as _timing
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(_timing, "bench", lambda fn, **kw: _timing.Timing(1.0, 1.0, 1.0))
    monkeypatch.setattr(_timing, "host_ms", lambda fn, iters: 0.1)
    seen = {"inductor": 0, "tritondiff": 0}

    def kernel_times(fn, iters):
        name = fn()
        seen[name] += 1
        r = seen[name]
        if (name, r) in (("inductor", 1), ("tritondiff", 3)):
            return []                                         # nothing seen this round
        return [("k", 1.0, {1: 1.0, 2: 1.0, 3: 2.0}[r])]
    monkeypatch.setattr(_timing, "kernel_times", kernel_times)
    timed = {n: (benchmark.Result(n), lambda n=n: n) for n in ("inductor", "tritondiff")}
    benchmark.measure(timed, rounds=3)
    ind, ours = (dataclasses.asdict(timed[n][0]) for n in ("inductor", "tritondiff"))
    assert ind["gpu_ms_rounds"] == [None, 1.0, 2.0] and ours["gpu_ms_rounds"] == [1.0, 1.0, None]
    assert (ind["gpu_ms"], ours["gpu_ms"]) == (1.5, 1.0)
    assert benchmark.ratio_range(ours, ind) == (1.0, 1.0)


def test_the_models_suite_lists_every_block_in_each_mode(capsys, tmp_path):
    from tritondiff.compiler import models
    out = tmp_path / "m.json"
    assert benchmark.main(["--dry-run", "--suite", "models", "--json", str(out)]) == 0
    names = [r["workload"] for r in json.loads(out.read_text())]
    for m in models.SUITE:
        assert f"{m.name} fwd+bwd float32" in names and f"{m.name} fwd+bwd bfloat16" in names
    assert {n.split()[0] for n in names if n.endswith("autocast")} == set(benchmark.AUTOCAST_MODELS)
    assert len(names) == 2 * len(models.SUITE) + len(benchmark.AUTOCAST_MODELS)


def test_a_model_workload_builds_its_module_once_per_dtype_and_its_truth_in_float64(monkeypatch):
    # the timed call on CPU tensors: forward and backward through the wrapped module call, float64 for the truth
    from tritondiff.compiler import models
    w = benchmark._model_workload(models.BY_NAME["cross_entropy_smoothed"], "bfloat16")
    logits, target, dy = torch.randn(4, 7), torch.randint(0, 7, (4,)), torch.randn(())
    calls = []
    run = w.build(lambda *a: calls.append(a[0]) or w.fn(*a))
    monkeypatch.setattr(models, "module", lambda *a, **k: models.LabelSmoothedCrossEntropy(0.1))
    loss, dlogits = run(logits, target, dy)
    loss2, _ = run(logits, target, dy)
    assert loss.dtype == torch.bfloat16 and dlogits.dtype == torch.bfloat16 and calls[0] is calls[1]
    (truth, dtruth) = run(*benchmark._upcast((logits, target, dy)))
    assert truth.dtype == torch.float64 and calls[2] is not calls[0]
    assert benchmark._judge((loss, dlogits), (loss2, dlogits), (truth, dtruth))


def test_generated_kernels_are_told_from_library_ones():
    assert benchmark.generated_kernel("triton_per_fused_native_layer_norm_0")
    assert benchmark.generated_kernel("g12_forward_0_k3")
    assert not benchmark.generated_kernel("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32")
    assert not benchmark.generated_kernel("void at::native::vectorized_elementwise_kernel<4, ...>")
    assert not benchmark.generated_kernel("pytorch_flash::flash_fwd_kernel<...>")
