"""harness.standalone: a dump's standalone.py replays the case with torch and triton alone (tritondiff not
importable) and prints the worst elements: index, candidate, eager, float64 truth, error, inputs there."""
import os
import subprocess
import sys

import pytest
import torch

from tritondiff.harness import explore
from tritondiff.harness.executor import InProcess
from tritondiff.harness.loader import load_file, subjects_in
from tritondiff.harness.standalone import worst_elements

KERNEL = '''
import torch
import triton
import triton.language as tl

from tritondiff import subject, tensor


@triton.jit
def _double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs, x * 2 + tl.where(offs >= 64, 1.0, 0.0), mask=offs < n)     # BUG past element 63


@subject(reference=lambda x: x * 2, inputs={"x": tensor(("N",), dtypes=("float32",), nonfinite=False)},
         dims={"N": (1, 200)})
def doubles(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    _double[(triton.cdiv(x.numel(), 64),)](x, y, x.numel(), BLOCK=64)
    return y
'''

NOT_INSTALLED = 'raise ImportError("tritondiff is not installed here")\n'


def _standalone(dump, tmp_path):
    blocker = tmp_path / "blocker" / "tritondiff"
    blocker.mkdir(parents=True, exist_ok=True)
    (blocker / "__init__.py").write_text(NOT_INSTALLED)
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "TRITONDIFF_DEVICE")}
    env["PYTHONPATH"] = str(tmp_path / "blocker")
    return subprocess.run([sys.executable, os.path.join(dump, "standalone.py"), "--device", "cpu"], cwd=dump,
                          env=env, capture_output=True, text=True, timeout=300)


def test_a_dump_replays_with_torch_and_triton_alone_and_shows_the_worst_elements(tmp_path, capsys):
    from tritondiff.harness.replay import replay_dump

    path = tmp_path / "doubles_kernel.py"
    path.write_text(KERNEL)
    (subj,) = subjects_in(load_file(str(path)))
    res = explore(subj, budget_s=60, seed=1, database=False, out_dir=str(tmp_path / "out"), executor=InProcess())
    assert res.status == "fail" and {"kernel.py", "standalone.json", "standalone.py"} <= set(os.listdir(res.dump))
    assert replay_dump(res.dump, isolate=False) == 1
    replayed = capsys.readouterr().out             # tritondiff replay prints the same table
    assert "still fails: mismatch" in replayed and "index   candidate" in replayed
    run = _standalone(res.dump, tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    n = res.case.dims["N"]
    assert f"output 0 float32[{n}]: {n - 64} of {n} element(s) off" in run.stdout
    header = next(line for line in run.stdout.splitlines() if line.split()[:1] == ["index"])
    assert header.split() == ["index", "candidate", "eager", "float64", "truth", "error", "x"]
    assert "REPRODUCES" in run.stdout
    fixed = (tmp_path / "doubles_kernel.py").read_text().replace("tl.where(offs >= 64, 1.0, 0.0)", "0.0")
    with open(os.path.join(res.dump, "kernel.py"), "w") as f:
        f.write(fixed)                               # the kernel fixed in place: the repro stops reproducing
    run = _standalone(res.dump, tmp_path)
    assert run.returncode == 0 and "no output is off" in run.stdout, run.stdout + run.stderr


def test_worst_elements_flag_a_nan_where_neither_eager_nor_the_truth_has_one():
    truth = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    eager = truth.float()
    lines, off = worst_elements(torch.tensor([1.0, float("nan"), 3.0]), eager, truth, {"x": eager})
    assert off and lines[0].startswith("output 0 float32[3]: 1 of 3 element(s) off")
    assert lines[2].split()[:2] == ["(1,)", "nan"]                    # the worst row first
    _, off = worst_elements(eager.clone(), eager, truth, {})
    assert not off


def test_a_pack_module_loads_with_the_stand_ins_alone(monkeypatch):
    """A wild.liger finding's standalone.py loads the pack's file where neither tritondiff nor Hypothesis is
    installed: the file imports the public API absolutely and draws its scalars through Hypothesis only
    when present."""
    pytest.importorskip("liger_kernel")
    import importlib.util
    import sys

    from tritondiff.harness import standalone
    from tritondiff.harness.packs import liger

    stand_ins = standalone._stand_ins()
    for name in [m for m in sys.modules if m == "tritondiff" or m.startswith("tritondiff.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "tritondiff", stand_ins)
    monkeypatch.setitem(sys.modules, "tritondiff.harness", stand_ins)
    monkeypatch.setitem(sys.modules, "hypothesis", None)               # import hypothesis -> ImportError
    spec = importlib.util.spec_from_file_location("standalone_pack_check", liger.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    x = torch.randn(3, 8)
    assert module.one_of(1e-6, 1e-5) == 1e-6
    torch.testing.assert_close(module.rms_norm_backward.reference(x, torch.ones(8), 1e-6, torch.ones(3, 8))[0],
                               torch.nn.functional.rms_norm(x, (8,), torch.ones(8), 1e-6))


WRITES_INPUT = '''
import torch
import triton
import triton.language as tl

from tritondiff import subject, tensor


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.maximum(tl.load(x_ptr + offs, mask=offs < n), 0.0)
    tl.store(y_ptr + offs, x, mask=offs < n)
    tl.store(x_ptr + offs, x, mask=offs < n)                   # BUG: the input overwritten with the result


@subject(reference=torch.relu, inputs={"x": tensor(("N",), dtypes=("float32",), nonfinite=False)},
         dims={"N": (1, 200)})
def relu(x):
    y = torch.empty_like(x)
    _relu[(triton.cdiv(x.numel(), 64),)](x, y, x.numel(), BLOCK=64)
    return y
'''


def test_a_modified_input_reproduces_standalone_though_every_output_is_right(tmp_path):
    """An input-mutation finding (values right, the caller's tensor overwritten) reproduces in standalone.py:
    it compares each input after the call with its saved value, on the CPU too, where the copy of the
    inputs must not share storage with them."""
    path = tmp_path / "relu_kernel.py"
    path.write_text(WRITES_INPUT)
    (subj,) = subjects_in(load_file(str(path)))
    res = explore(subj, budget_s=60, seed=1, database=False, out_dir=str(tmp_path / "out"), executor=InProcess())
    assert res.status == "fail" and res.failure_class == "input_mutation", res.line()
    run = _standalone(res.dump, tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "element(s) off" in run.stdout and " 0 of " in run.stdout                  # the output is right
    assert "input 'x' was modified by the call" in run.stdout and "an input was modified" in run.stdout


def test_worst_elements_flag_an_output_of_another_dtype():
    """An output in the wrong dtype (int64 counts where torch returns float64 weighted counts) is off even
    when its values are equal."""
    eager = torch.tensor([1.0, 2.0], dtype=torch.float64)
    lines, off = worst_elements(eager.long(), eager, eager, {})
    assert off and lines == ["output 0: shape (2,), dtype torch.int64; reference (2,), torch.float64"]
