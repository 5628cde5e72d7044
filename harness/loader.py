"""Find subjects: import a subject file or module, and name a subject so another process can load it."""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from types import ModuleType

from .api import Subject, registry
from .exc import UsageError

#: Modules holding the bundled subjects; each is imported when listed.
BUNDLED_MODULES = ("tritondiff.harness.subjects.kernels", "tritondiff.harness.subjects.compiler",
                   "tritondiff.harness.subjects.compiler_gemm", "tritondiff.harness.subjects.models")


def load_file(path: str) -> ModuleType:
    """Import a Python file of subjects; raises UsageError with one clear line on any failure."""
    path = os.path.abspath(path)
    if not os.path.exists(path):
        raise UsageError(f"{path}: no such file")
    if not path.endswith(".py"):
        raise UsageError(f"{path}: not a Python file (.py)")
    dotted = _package_module(path)
    if dotted is not None:                    # a file inside a package (compiler/subjects.py): import it as such
        try:
            return importlib.import_module(dotted)
        except UsageError as e:
            raise _located(e, path)
        except BaseException as e:  # noqa: BLE001 - reported in one line, as below
            raise UsageError(f"{path}: import failed: {type(e).__name__}: {e}") from e
    name = "tritondiff_subjects_" + hashlib.sha1(path.encode()).hexdigest()[:12]
    if name in sys.modules:
        return sys.modules[name]
    folder = os.path.dirname(path)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except UsageError as e:
        del sys.modules[name]
        raise _located(e, path)
    except BaseException as e:  # noqa: BLE001 - any import failure is a usage error, reported in one line
        del sys.modules[name]
        raise UsageError(f"{path}: import failed: {type(e).__name__}: {e}") from e
    return module


def _located(error: UsageError, path: str) -> UsageError:
    """``error`` (a bad declaration, raised while ``path`` was imported) with the file and line it came
    from at the front of its message, its type and attributes kept."""
    text = str(error)
    if not text.startswith(path):
        line = None
        tb = error.__traceback__
        while tb is not None:
            if os.path.abspath(tb.tb_frame.f_code.co_filename) == path:
                line = tb.tb_lineno
            tb = tb.tb_next
        error.args = (f"{path}{f':{line}' if line else ''}: {text}",)
    return error


def _package_module(path: str) -> str | None:
    """``pkg.sub.mod`` when ``path`` sits in a package that imports from this very folder -- its top
    folder is on ``sys.path``, or an installed (e.g. editable) package resolves to it, also under
    another name (``harness/`` installs as ``tritondiff.harness``) -- else None."""
    folder, parts = os.path.dirname(path), [os.path.splitext(os.path.basename(path))[0]]
    while os.path.exists(os.path.join(folder, "__init__.py")):
        parts.insert(0, os.path.basename(folder))
        folder = os.path.dirname(folder)
    if len(parts) == 1:
        return None
    here = os.path.realpath(os.path.join(folder, parts[0]))
    for name in (f"tritondiff.{parts[0]}", parts[0]):      # this project's folders install under tritondiff.
        if _package_at(name) == here:
            return ".".join([name, *parts[1:]])
    return None


def _package_at(name: str) -> str | None:
    """The folder package ``name`` imports from here, without importing it (its parent is imported)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    locations = spec.submodule_search_locations if spec is not None else None
    return os.path.realpath(locations[0]) if locations else None


def subjects_in(module: ModuleType) -> list[Subject]:
    """The subjects defined at the top level of ``module``, in definition order."""
    seen, out = set(), []
    for value in vars(module).values():
        if isinstance(value, Subject) and id(value) not in seen:
            seen.add(id(value))
            out.append(value)
    return out


def bundled() -> dict[str, Subject]:
    """Every bundled subject (kernels and compiler paths), by name: the subjects of the modules listed in
    :data:`BUNDLED_MODULES` (top-level ones, and any registered with one of them as its module).  A listed
    module that does not exist (yet) is passed over; one that fails to import raises."""
    out: dict[str, Subject] = {}
    for mod in BUNDLED_MODULES:
        try:
            module = importlib.import_module(mod)
        except ModuleNotFoundError as e:
            if e.name != mod:
                raise
            continue
        for subj in subjects_in(module):
            out.setdefault(subj.name, subj)
    for name, subj in registry().items():
        if subj.module in BUNDLED_MODULES:
            out.setdefault(name, subj)
    return out


def ref(subject: Subject) -> dict:
    """A picklable name for ``subject`` that :func:`resolve` turns back into it in any process."""
    return {"name": subject.name, "module": subject.module, "file": subject.file}


def resolve(reference: dict) -> Subject:
    """The subject ``reference`` names, from the module (or file) it names -- never a same-named subject of
    another file (one worker process serves many subjects: two files may each define ``add``)."""
    name, module = reference["name"], reference["module"]
    subjects = registry()
    if name in subjects and subjects[name].module == module:
        return subjects[name]
    if module.startswith("tritondiff_subjects_") or module == "__main__":
        mod = load_file(reference["file"])
    else:
        mod = importlib.import_module(module)
    for subj in subjects_in(mod):
        if subj.name == name:
            return subj
    subjects = registry()
    if name in subjects and subjects[name].module == module:   # registered by module, not defined at its top
        return subjects[name]
    raise UsageError(f"subject {name!r} not found in {reference['file'] or module}")
