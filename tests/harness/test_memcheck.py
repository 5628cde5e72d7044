"""harness.memcheck: compute-sanitizer reports parsed, and memcheck errors turned into out_of_bounds findings.

compute-sanitizer needs a GPU: its output here is captured text, and ``subprocess.run`` is mocked.
"""
import json
import os
import subprocess
import types

import pytest

from tritondiff.harness import memcheck
from tritondiff.harness.case import Case, TensorCase
from tritondiff.harness.cli import main
from tritondiff.harness.config import config
from tritondiff.harness.dump import write_dump
from tritondiff.harness.explore import SubjectResult
from tritondiff.harness.loader import ref
from tritondiff.harness.runner import Verdict

from . import planted_hazards as ph

THREE_WRITES = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at _double_kernel+0x1b0 in /tmp/tritondiff/planted_hazards.py:205
=========     by thread (40,0,0) in block (0,0,0)
=========     Address 0x7f3a2e000190 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f3a2e000000 of size 400 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========     Host Frame: [0x2d5a1f]
=========                in /lib/x86_64-linux-gnu/libcuda.so.1
=========
========= Invalid __global__ write of size 4 bytes
=========     at _double_kernel+0x1b0 in /tmp/tritondiff/planted_hazards.py:205
=========     by thread (41,0,0) in block (0,0,0)
=========     Address 0x7f3a2e000194 is out of bounds
=========     and is 5 bytes after the nearest allocation at 0x7f3a2e000000 of size 400 bytes
=========
========= Invalid __global__ write of size 4 bytes
=========     at _double_kernel+0x1b0 in /tmp/tritondiff/planted_hazards.py:205
=========     by thread (42,0,0) in block (0,0,0)
=========     Address 0x7f3a2e000198 is out of bounds
=========
still fails: mismatch (same class): output 0: 3 mismatch(es)
========= ERROR SUMMARY: 3 errors
"""

PAST_PRINT_LIMIT = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 16 bytes
=========     at _sum_kernel+0x2d0
=========     by thread (127,0,0) in block (781,0,0)
=========     Address 0x7f00e4061a80 is out of bounds
=========
========= ERROR SUMMARY: 117 errors
========= ERROR SUMMARY: 67 errors were not printed. Use --print-limit option to adjust the number of printed errors
"""

CLEAN = """\
========= COMPUTE-SANITIZER
no longer reproduces (double_masked: was mismatch; now pass)
========= ERROR SUMMARY: 0 errors
"""

ONE_API_ERROR = """\
========= COMPUTE-SANITIZER
========= Program hit cudaErrorLaunchFailure (error 719) due to "unspecified launch failure" on CUDA API call to cuStreamSynchronize.
=========     Saved host backtrace up to driver entry point at error
=========
========= ERROR SUMMARY: 1 error
"""

CUT_SHORT = """\
memcheck timed out after 900 s
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 2 bytes
=========     at _copy_kernel+0x90
=========     Address 0x7f0000000400 is out of bounds
=========
========= Invalid __global__ write of size 2 bytes
=========     at _copy_kernel+0x90
=========
"""


@pytest.mark.parametrize("text, errors", [(THREE_WRITES, 3), (PAST_PRINT_LIMIT, 117), (CLEAN, 0),
                                          (ONE_API_ERROR, 1), (CUT_SHORT, 2), ("", 0)],
                         ids=["three_writes", "past_print_limit", "clean", "api_error", "cut_short", "empty"])
def test_count_errors(text, errors):
    assert memcheck._count_errors(text) == errors


def test_error_records_name_the_access_the_kernel_and_the_address():
    records = memcheck._error_records(THREE_WRITES)
    assert len(records) == 3
    assert records[0] == ("Invalid __global__ write of size 4 bytes at _double_kernel+0x1b0 in "
                          "/tmp/tritondiff/planted_hazards.py:205 (Address 0x7f3a2e000190 is out of bounds)")
    assert memcheck._error_records(ONE_API_ERROR)[0].startswith("Program hit cudaErrorLaunchFailure (error 719)")
    assert memcheck._error_records(CLEAN) == []


# ---------------------------------------------------------------------------------------------- verdicts

class _FakeSanitizer:
    """Stands for compute-sanitizer: records the command line and answers with a captured report."""

    def __init__(self, text, code):
        self.text, self.code, self.calls = text, code, []

    def __call__(self, cmd, **kwargs):
        self.calls.append((cmd, kwargs))
        return subprocess.CompletedProcess(cmd, self.code, stdout=self.text, stderr="")


@pytest.fixture
def sanitizer(monkeypatch):
    def install(text, code=97):
        fake = _FakeSanitizer(text, code)
        monkeypatch.setattr(memcheck, "available", lambda: None)
        # memcheck's own view of subprocess only: patching subprocess.run itself would also catch the
        # ptxas call of a kernel compiled meanwhile on a GPU (seen: no .ptx.o, FileNotFoundError)
        monkeypatch.setattr(memcheck, "subprocess", types.SimpleNamespace(run=fake,
                                                                          TimeoutExpired=subprocess.TimeoutExpired))
        return fake
    return install


def _case(n=100):
    return Case({"N": n}, {"x": TensorCase((n,), "float32", "contiguous", 0, "normal", 1, "")}, {})


def _failed(tmp_path, subj=ph.double_masked):
    verdict = Verdict("fail", "mismatch", "output 0: 3 mismatch(es), only the tail block", "out0:tail", "first call")
    dump = write_dump(str(tmp_path), subj, ref(subj), _case(), verdict)
    return SubjectResult(subj.name, "fail", 5, 0, 1.0, failure_class="mismatch", message=verdict.message,
                         signature=verdict.signature(subj.name), dump=dump, case=_case(), verdict=verdict)


def _summary(dump):
    with open(os.path.join(dump, "summary.json")) as f:
        return json.load(f)


def test_memcheck_errors_make_a_failed_subject_an_out_of_bounds_finding(tmp_path, sanitizer):
    fake = sanitizer(THREE_WRITES)
    before = _failed(tmp_path)
    lines = []
    res = memcheck.sanitize(ph.double_masked, before, None, out_dir=str(tmp_path), say=lines.append)
    assert res.status == "fail" and res.failure_class == "out_of_bounds"
    assert res.message.startswith("compute-sanitizer memcheck: 3 error(s); first: Invalid __global__ write of "
                                  "size 4 bytes at _double_kernel+0x1b0")
    assert res.signature == "double_masked|out_of_bounds|memcheck" and res.verdict.failure_class == "out_of_bounds"
    assert os.path.basename(res.dump).startswith("out_of_bounds-") and not os.path.exists(before.dump)
    summary = _summary(res.dump)
    assert summary["failure_class"] == "out_of_bounds" and summary["detected_by"] == "memcheck"
    assert summary["was"]["failure_class"] == "mismatch" and summary["memcheck"]["errors"] == 3
    with open(os.path.join(res.dump, "memcheck.txt")) as f:
        assert "Invalid __global__ write of size 4 bytes" in f.read()
    (cmd, kwargs), = fake.calls
    assert cmd[:3] == ["compute-sanitizer", "--tool", "memcheck"]
    assert cmd[cmd.index("--padding") + 1] == str(memcheck.PADDING_BYTES)    # over-reads land in no neighbour
    assert cmd[-4:] == [os.path.join(before.dump, "repro.py"), "--in-process", "--device", "cuda"]
    assert kwargs["env"]["TRITONDIFF_UNDER_MEMCHECK"] == "1"
    assert lines == [f"      memcheck: 3 error(s): {os.path.join(res.dump, 'memcheck.txt')}"]


def test_no_memcheck_errors_leave_a_finding_as_it_was(tmp_path, sanitizer):
    sanitizer(CLEAN, 0)
    before = _failed(tmp_path)
    res = memcheck.sanitize(ph.double_masked, before, None, out_dir=str(tmp_path), say=lambda line: None)
    assert res is before and os.path.basename(res.dump).startswith("mismatch-")
    assert _summary(res.dump)["failure_class"] == "mismatch" and _summary(res.dump)["memcheck"]["errors"] == 0


def test_the_last_passing_case_of_a_passing_subject_is_memchecked(tmp_path, sanitizer):
    fake = sanitizer(THREE_WRITES)
    last = memcheck.LastPassing()
    last(_case(7), Verdict("fail", "mismatch"))
    last(_case(100), Verdict("pass"))
    last(_case(3), Verdict("skip"))
    last(_case(96), Verdict("pass"))          # a multiple of 16: no tail block a missing mask would show in
    assert last.case == _case(100)
    passed = SubjectResult(ph.double_masked.name, "pass", 5, 0, 1.0)
    res = memcheck.sanitize(ph.double_masked, passed, last, out_dir=str(tmp_path), say=lambda line: None)
    assert res.status == "fail" and res.failure_class == "out_of_bounds" and res.case == _case(100)
    assert res.tier == "wrong" and [f.failure_class for f in res.findings] == ["out_of_bounds"]
    assert fake.calls and os.path.isfile(os.path.join(res.dump, "repro.py"))
    summary = _summary(res.dump)
    assert summary["detected_by"] == "memcheck" and "was" not in summary
    with open(os.path.join(res.dump, "case.json")) as f:
        assert Case.from_json(json.load(f)) == _case(100)
    assert not [d for d in os.listdir(tmp_path) if d.startswith(".memcheck-")]   # no probe left behind


LIBRARY_READ = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 16 bytes
=========     at fmha_cutlassF_f32_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<float, \
cutlass::arch::Sm80, (bool)1, (int)64, (int)64, (int)64, (bool)1, (bool)1>::Params)+0x25d0
=========     by thread (3,0,0) in block (0,1,0)
=========     Address 0x7f3a2e000190 is out of bounds
=========
========= ERROR SUMMARY: 20 errors
"""


def test_errors_only_in_library_kernels_are_not_the_subjects(tmp_path, sanitizer):
    """PyTorch's memory-efficient attention (the eager reference) read past a strided input on an H200:
    memcheck's errors in kernels Triton did not compile do not make the subject's finding."""
    assert not memcheck._in_triton_kernel(memcheck._error_records(LIBRARY_READ)[0])
    assert memcheck._in_triton_kernel(memcheck._error_records(THREE_WRITES)[0])
    sanitizer(LIBRARY_READ)
    passed = SubjectResult(ph.double_masked.name, "pass", 5, 0, 1.0)
    said = []
    res = memcheck.sanitize(ph.double_masked, passed, _case(), out_dir=str(tmp_path), say=said.append)
    assert res is passed and said == ["      memcheck: 0 errors in the last passing case"]
    sanitizer(LIBRARY_READ + THREE_WRITES)          # the subject's own errors beside them still count
    res = memcheck.sanitize(ph.double_masked, passed, _case(), out_dir=str(tmp_path), say=said.append)
    assert res.failure_class == "out_of_bounds" and "_double_kernel" in res.message


def test_a_clean_passing_subject_stays_a_pass_and_leaves_no_dump(tmp_path, sanitizer):
    sanitizer(CLEAN, 0)
    passed = SubjectResult(ph.double_masked.name, "pass", 5, 0, 1.0)
    res = memcheck.sanitize(ph.double_masked, passed, _case(), out_dir=str(tmp_path), say=lambda line: None)
    assert res is passed
    assert os.listdir(tmp_path) == []


def test_without_a_gpu_sanitize_says_why_and_changes_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(memcheck.subprocess, "run", lambda *a, **k: pytest.fail("memcheck must not run"))
    lines = []
    passed = SubjectResult(ph.double_masked.name, "pass", 5, 0, 1.0)
    if memcheck.available() is None:
        pytest.skip("compute-sanitizer can run here")
    assert memcheck.sanitize(ph.double_masked, passed, _case(), out_dir=str(tmp_path), say=lines.append) is passed
    assert lines[0].startswith("      memcheck: skipped: ")


def test_a_memcheck_finding_replays_under_memcheck(tmp_path, sanitizer):
    sanitizer(THREE_WRITES)
    res = memcheck.sanitize(ph.double_masked, _failed(tmp_path), None, out_dir=str(tmp_path), say=lambda line: None)
    assert memcheck.replay_under_memcheck(res.dump) == 1
    sanitizer(CLEAN, 0)
    assert memcheck.replay_under_memcheck(res.dump) == 0
    with config.patch(under_memcheck=True):              # the repro memcheck itself runs: no recursion
        assert memcheck.replay_under_memcheck(res.dump) is None


def test_check_sanitize_reports_a_passing_subject_with_memcheck_errors(tmp_path, sanitizer, capsys):
    sanitizer(THREE_WRITES)
    code = main(["check", ph.__file__, "--subject", "double_masked", "--max-examples", "2", "--seed", "1",
                 "--disable", "isolation", "--out", str(tmp_path), "--sanitize"])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "FAIL  double_masked  out_of_bounds: compute-sanitizer memcheck: 3 error(s)" in out


def test_replay_of_a_memcheck_finding_fails_while_memcheck_reports_errors(tmp_path, sanitizer, capsys):
    from tritondiff.harness.replay import replay_dump

    sanitizer(THREE_WRITES)
    passed = SubjectResult(ph.double_masked.name, "pass", 5, 0, 1.0)
    res = memcheck.sanitize(ph.double_masked, passed, _case(), out_dir=str(tmp_path), say=lambda line: None)
    assert replay_dump(res.dump, isolate=False) == 1       # the plain replay passes; memcheck still sees it
    assert "compute-sanitizer memcheck reports 3 error(s)" in capsys.readouterr().out
    sanitizer(CLEAN, 0)
    assert replay_dump(res.dump, isolate=False) == 0


# ---------------------------------------------------------------------------------------------- policy

@pytest.mark.parametrize("setting,where,expected", [
    ("auto", None, True),                      # a GPU with compute-sanitizer: on by default
    ("auto", "compute-sanitizer is not on PATH", False),
    ("on", "compute-sanitizer is not on PATH", True),     # asked for: sanitize() then says why it cannot
    ("off", None, False),
])
def test_check_runs_memcheck_by_default_where_it_can(monkeypatch, setting, where, expected):
    monkeypatch.setattr(memcheck, "available", lambda: where)
    with config.patch(sanitize=setting):
        assert memcheck.wanted() is expected
    with config.patch(sanitize=setting, under_memcheck=True):
        assert memcheck.wanted() is False      # the repro memcheck runs never starts memcheck again


def test_the_command_line_sets_the_memcheck_policy(tmp_path):
    from tritondiff.harness.cli import _apply_verdict_options, build_parser

    parser = build_parser()
    for flags, expected in (([], "auto"), (["--sanitize"], "on"), (["--no-sanitize"], "off")):
        args = parser.parse_args(["check", "k.py", *flags])
        with config.patch(sanitize="auto"):
            _apply_verdict_options(args, str(tmp_path))
            assert config.sanitize == expected
