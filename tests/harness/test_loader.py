"""harness.loader: a subject file inside a package imports as that package's module, wherever it is run from."""
import os
import subprocess
import sys

import torch

from tritondiff import harness

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(harness.__file__)))


def test_a_file_of_an_installed_package_imports_by_its_module_name_from_any_directory(tmp_path):
    # The console script's sys.path holds neither the repository root nor the working directory's parent:
    # the package is found through the installed (editable) distribution, and a relative import inside the
    # file (harness/subjects/compiler.py: `from ..graph_fuzz import ...`) must still work.
    code = ("import sys; from tritondiff.harness.loader import _package_module, load_file; "
            "print(_package_module(sys.argv[1])); print(load_file(sys.argv[1]).__name__)")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if subprocess.run([sys.executable, "-c", "import tritondiff"], cwd=tmp_path, env=env).returncode:
        env["PYTHONPATH"] = ROOT             # not installed: the repository on the path instead
    out = subprocess.run([sys.executable, "-c", code, os.path.join(ROOT, "harness", "subjects", "compiler.py")],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["tritondiff.harness.subjects.compiler", "tritondiff.harness.subjects.compiler"]


def test_a_plain_file_outside_any_package_is_not_given_a_package_name(tmp_path):
    from tritondiff.harness.loader import _package_module
    f = tmp_path / "subjects.py"
    f.write_text("")
    assert _package_module(str(f)) is None
    pkg = tmp_path / "notinstalled"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "mod.py").write_text("")
    assert _package_module(str(pkg / "mod.py")) is None       # a package that does not import from here


def test_resolve_returns_the_subject_of_the_file_it_names_not_a_same_named_one(tmp_path):
    from tritondiff.harness.loader import load_file, ref, resolve, subjects_in
    src = ("import torch\nfrom tritondiff.harness import subject, tensor\n\n"
           "@subject(reference=lambda x: x + {k}, inputs={{'x': tensor(('N',))}}, dims={{'N': (1, 4)}})\n"
           "def add(x):\n    return x + {k}\n")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    fa, fb = tmp_path / "a" / "subjects.py", tmp_path / "b" / "subjects.py"
    fa.write_text(src.format(k=1))
    fb.write_text(src.format(k=2))
    (a,), (b,) = subjects_in(load_file(str(fa))), subjects_in(load_file(str(fb)))   # b registered last
    assert a.name == b.name == "add"
    assert resolve(ref(a)) is a and resolve(ref(b)) is b
    assert float(resolve(ref(a)).fn(torch.zeros(1))) == 1.0
