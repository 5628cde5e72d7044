"""tritondiff.base.device decides CUDA vs the interpreter on first import -- not on `import tritondiff.harness`, so the pytest
plugin, loaded in every pytest run where tritondiff is installed, changes nothing in runs that never use it."""
import os
import subprocess
import sys

from tritondiff import harness

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(harness.__file__)))


def _run(code: str) -> list[str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("TRITONDIFF_") and k not in ("TRITON_INTERPRET", "PYTHONPATH")}
    env["PYTHONPATH"] = ROOT
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.split()


def test_importing_the_package_and_the_pytest_plugin_decides_nothing():
    got = _run("import os, sys, tritondiff, tritondiff.harness, tritondiff.harness.pytest_plugin; "
               "print(os.environ.get('TRITON_INTERPRET', '-'), 'torch' in sys.modules, 'tritondiff.base.device' in sys.modules)")
    assert got == ["-", "False", "False"]


def test_the_api_decides_the_device_before_any_kernel_is_defined():
    got = _run("import os; from tritondiff import subject; import tritondiff.base.device as d; "
               "print(d.is_interpreter() == (os.environ.get('TRITON_INTERPRET') == '1'), 'tritondiff.base.device' in "
               "__import__('sys').modules)")
    assert got == ["True", "True"]
    assert _run("from tritondiff.harness import device; print(device.torch_device().type in ('cpu', 'cuda'))") == ["True"]
