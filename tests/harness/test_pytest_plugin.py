"""harness.pytest_plugin: fixture and marker, profiles, the findings store, xdist safety, import cost."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tritondiff.base import device as harness_device
from tritondiff.harness.store import Store

pytest_plugins = ["pytester"]

INNER = '''
import zlib

import pytest
import torch

from tritondiff.harness import subject, tensor
from tritondiff.harness.executor import InProcess

IN = {"x": tensor(("N",), dtypes=("float32",), values=("normal",), nonfinite=False, layouts=("contiguous",))}


def twice(x):
    return x * 2


@subject(reference=twice, inputs=IN, dims={"N": (1, 64)})
def plugin_wrong_tail(x):
    out = x * 2
    if x.numel() > 3:
        out[-1] += 1
    return out


@subject(reference=twice, inputs=IN, dims={"N": (1, 64)})
def plugin_doubles(x):
    return x * 2


FAST = dict(budget_s=30, max_examples=15, executor=InProcess())


def test_wrong_a(tritondiff):
    tritondiff.check(plugin_wrong_tail, **FAST)


def test_wrong_b(tritondiff):
    tritondiff.check(plugin_wrong_tail, **FAST)


def test_doubles(tritondiff, request):
    result = tritondiff.check("plugin_doubles", **FAST)
    assert result.examples > 0
    assert tritondiff.seed == zlib.crc32(request.node.nodeid.encode())


@pytest.mark.tritondiff("plugin_doubles", max_examples=5, budget_s=30, executor=InProcess())
def test_marker_runs_a_subject():
    pass


def test_profile(tritondiff, pytestconfig):
    assert tritondiff.profile.name == pytestconfig.getoption("--tritondiff-profile")


@subject(reference=lambda x: x.sum(), inputs={"x": tensor(("N",), dtypes=("float32",), values=("normal",))},
         dims={"N": (1, 64)})
def plugin_drops_nan(x):
    return torch.nan_to_num(x, nan=0.0).sum()


def test_edge_only(tritondiff):
    tritondiff.check(plugin_drops_nan, budget_s=30, max_examples=40, executor=InProcess())
'''


def _count(store: str, subject: str) -> int:
    with Store(store, create=False) as s:
        (row,) = [f for f in s.findings() if f["subject"] == subject]
        return row["count"]


def test_fixture_fails_on_findings_and_records_them(pytester, tmp_path):
    # In a subprocess: pytester's in-process runs drop the modules first imported inside them, and a
    # torch module that registers a TORCH_LIBRARY namespace, imported again later in this process, fails
    # every later test that reaches it ("Only a single TORCH_LIBRARY can be used ...").
    pytester.makepyfile(test_inner=INNER)
    store, out = str(tmp_path / "f.db"), str(tmp_path / "out")
    args = ("-p", "no:cacheprovider", "--tritondiff-profile", "nightly", "--tritondiff-store", store,
            "--tritondiff-out", out)
    res = pytester.runpytest_subprocess(*args, timeout=300)
    res.assert_outcomes(passed=4, failed=2)
    res.stdout.fnmatch_lines(["*plugin_wrong_tail: mismatch: output 0*", "*dump: *"])
    assert _count(store, "plugin_wrong_tail") == 2               # two test nodes saw it in this run
    with Store(store, create=False) as s:
        stats = {r["subject"]: r for r in s.stats()}
        (finding,) = [f for f in s.findings() if f["subject"] == "plugin_wrong_tail"]
        (edge,) = [f for f in s.findings() if f["subject"] == "plugin_drops_nan"]   # warned, passed, recorded
    assert edge["failure_class"] == "nonfinite" and edge["details"].get("tier") == "edge"
    assert stats["plugin_doubles"]["examples"] >= 15 + 1         # the fixture test and the marker test
    assert sum(stats["plugin_doubles"]["coverage"]["shape"].values()) == stats["plugin_doubles"]["examples"]
    assert finding["state"] == "minimal" and finding["case"]["dims"]["N"] == 4
    assert finding["dump"].startswith(out) and os.path.isfile(os.path.join(finding["dump"], "summary.json"))
    res = pytester.runpytest_subprocess(*args, timeout=300)        # a second run: found again, counted again
    res.assert_outcomes(passed=4, failed=2)
    assert _count(store, "plugin_wrong_tail") == 4


def test_xdist_workers_share_the_store_and_keep_their_own_dumps(pytester, tmp_path):
    pytester.makepyfile(test_inner=INNER)
    store, out = str(tmp_path / "f.db"), str(tmp_path / "out")
    res = pytester.runpytest_subprocess("-n", "2", "-k", "wrong", "--tritondiff-profile", "ci",
                                        "--tritondiff-store", store, "--tritondiff-out", out,
                                        "--hypothesis-show-statistics", timeout=300)
    res.assert_outcomes(failed=2)
    # the statistics cross from the workers: a line per subject a test ran
    res.stdout.fnmatch_lines(["*tritondiff statistics*", "*test_wrong_?: plugin_wrong_tail: * examples (* skipped)*"])
    assert _count(store, "plugin_wrong_tail") == 2
    assert set(os.listdir(out)) <= {"gw0", "gw1", ".hypothesis"} and os.listdir(out)  # per-worker dumps, one database
    with Store(store, create=False) as s:
        (finding,) = s.findings()
    assert os.path.basename(os.path.dirname(os.path.dirname(finding["dump"]))) in ("gw0", "gw1")


# ---------------------------------------------------------------------------------------------- only when enabled

_PROBE_RUN = '''
import pytest


def _hook_plugins(config):
    return [impl.plugin_name for impl in config.hook.pytest_pyfunc_call.get_hookimpls()]


def test_state(pytestconfig):
    active = pytestconfig.pluginmanager.get_plugin("tritondiff-active") is not None
    assert active == hasattr(pytestconfig, "_tritondiff_run") == ("tritondiff-active" in _hook_plugins(pytestconfig))
    print("TRITONDIFF_ACTIVE", active)
'''


@pytest.mark.parametrize("extra, args, env, active", [
    ("", (), {}, False),                                                        # a plain run elsewhere: inert
    ("", ("--tritondiff-out", "somewhere"), {}, True),
    ("", (), {"TRITONDIFF_PROFILE": "ci"}, True),
    ("\n\ndef test_fixture(tritondiff):\n    assert tritondiff.profile.name == 'ci'\n", (), {}, True),
    ("\n\n@pytest.mark.tritondiff('no_such_subject')\ndef test_marked():\n    pass\n", (), {}, True),
], ids=["plain", "option", "env", "fixture", "marker"])
def test_hooks_are_registered_only_when_the_run_asks_for_tritondiff(pytester, monkeypatch, extra, args, env, active):
    for key in [k for k in os.environ if k.startswith("TRITONDIFF_")]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    pytester.makepyfile(test_probe=_PROBE_RUN + extra)
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s", *args, timeout=120)
    res.stdout.fnmatch_lines([f"*TRITONDIFF_ACTIVE {active}*"])
    if "mark.tritondiff" in extra:          # the marker's hook ran: it looked the subject up
        res.stdout.fnmatch_lines(["*no tritondiff subject named 'no_such_subject'*"])
    else:
        assert res.ret == 0, res.stdout.str() + res.stderr.str()


# ---------------------------------------------------------------------------------------------- import cost

_PROBE = ("import sys, tritondiff, tritondiff.harness.pytest_plugin, tritondiff.harness; "
          "print(sorted(m for m in ('torch', 'triton', 'hypothesis', 'numpy') if m in sys.modules)); "
          "print(tritondiff.harness.device.MODE)")


@pytest.mark.parametrize("env", [{"TRITONDIFF_DEVICE": "cpu"}, {}])
def test_loading_the_plugin_imports_no_torch(env):
    # registered through the pytest11 entry point, the plugin loads in every pytest run where tritondiff is
    # installed: it and the package root must stay standard-library only (here: no GPU device node)
    if not env and not harness_device._no_gpu_device_nodes():
        pytest.skip("a GPU device node exists: deciding 'auto' needs torch.cuda here")
    clean = {k: v for k, v in os.environ.items() if k not in ("TRITONDIFF_DEVICE", "TRITON_INTERPRET")}
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120,
                         env={**clean, **env}, check=True).stdout.split("\n")
    assert out[0] == "[]" and out[1] == "interpreter"


def test_the_package_root_resolves_public_names_lazily():
    out = subprocess.run([sys.executable, "-c", (
        "import sys, tritondiff.harness as harness; "
        "assert 'torch' not in sys.modules; "
        "import tritondiff.harness.explore, tritondiff.harness.config, tritondiff.harness.counters; "  # submodules first ...
        "from tritondiff.harness import explore, config, counters, subject; "
        "print(callable(explore), type(config).__name__, type(counters).__name__, harness.explore is explore)")],
        capture_output=True, text=True, timeout=120, check=True,
        env={**os.environ, "TRITONDIFF_DEVICE": "cpu"}).stdout.split()
    assert out == ["True", "HarnessConfig", "Counters", "True"]      # ... the public objects still win


def test_gpu_huge_profile_is_refused_without_cuda(pytester):
    if harness_device.MODE == "cuda":
        pytest.skip("the refusal is the CPU interpreter's")
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--tritondiff-profile", "gpu_huge", timeout=120)
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    res.stderr.fnmatch_lines(["*the gpu_huge profile's huge shapes run on a CUDA GPU only*"])


_TWO_SUBJECTS = '''
import os
import torch
from tritondiff.harness import subject, tensor

LOG = os.environ["PID_LOG"]


def _logged(x):
    with open(LOG, "a") as f:
        f.write(f"{os.getpid()}\\n")
    return x * 2


@subject(reference=lambda x: x * 2, inputs={"x": tensor(("N",))}, dims={"N": (1, 64)})
def pid_a(x):
    return _logged(x)


@subject(reference=lambda x: x * 2, inputs={"x": tensor(("N",))}, dims={"N": (1, 64)})
def pid_b(x):
    return _logged(x)


def test_a(tritondiff):
    tritondiff.check(pid_a, budget_s=30, max_examples=3)


def test_b(tritondiff):
    tritondiff.check(pid_b, budget_s=30, max_examples=3)
    with open(LOG, "a") as f:
        f.write(f"test:{os.getpid()}\\n")
'''


def test_subjects_of_one_session_share_one_worker_process(pytester, tmp_path, monkeypatch):
    log = tmp_path / "pids.txt"
    monkeypatch.setenv("PID_LOG", str(log))
    pytester.makepyfile(test_two=_TWO_SUBJECTS)
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--tritondiff-profile", "ci",
                                        "--tritondiff-out", str(tmp_path / "out"), timeout=300)
    res.assert_outcomes(passed=2)
    lines = log.read_text().split()
    test_pid = [ln.split(":")[1] for ln in lines if ln.startswith("test:")]
    workers = {ln for ln in lines if not ln.startswith("test:")}
    assert len(workers) == 1, workers                # both subjects ran in the same worker ...
    assert test_pid and workers.isdisjoint(test_pid)  # ... which is not the test process
