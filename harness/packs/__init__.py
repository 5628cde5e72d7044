"""Subject packs for kernel libraries this project did not write (``pip install 'tritondiff[wild]'``).

A pack is a module of subjects named ``<prefix>.<op>`` that imports its library; nothing of the library is
copied here.  Packs are not bundled subjects -- ``tritondiff fuzz`` with no target never runs them -- and a
target reaches a pack only by naming its prefix (``wild.*``, ``wild.liger.*``, ``wild.gems.rms_norm``).  A
pack whose library is not installed is a usage error naming the extra to install.
"""
from __future__ import annotations

import dataclasses
import importlib
import logging
import re

from ..api import Subject
from ..exc import UsageError


@dataclasses.dataclass(frozen=True)
class Pack:
    prefix: str             # subject names start with it and a dot
    module: str             # the pack's subjects
    library: str            # the distribution it imports (what pip installs)


PACKS = (
    Pack("wild.liger", "tritondiff.harness.packs.liger", "liger-kernel"),    # fused LLM-training kernels
    Pack("wild.gems", "tritondiff.harness.packs.gems", "flag-gems"),         # ATen ops re-implemented in Triton
)

_GLOB = re.compile(r"[*?\[]")


def reached_by(target: str) -> list[Pack]:
    """The packs ``target`` (a subject name or glob) can name: its text before the first glob character must
    be a prefix of the pack's ``prefix.``, or start with it -- ``wild.*`` reaches every pack, ``*`` none."""
    literal = _GLOB.split(target, 1)[0]
    if not literal:
        return []
    return [p for p in PACKS if (p.prefix + ".").startswith(literal) or literal.startswith(p.prefix + ".")]


def load(pack: Pack) -> dict[str, Subject]:
    """The subjects of ``pack``, by name; UsageError (naming the extra) when its library cannot be imported."""
    from ..loader import subjects_in
    try:
        module = importlib.import_module(pack.module)
    except UsageError:
        raise
    except Exception as e:  # noqa: BLE001  (flag-gems raises RuntimeError without a GPU): one usage line
        why = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
        raise UsageError(f"{pack.prefix}.* needs {pack.library}, which does not import here ({why}); install "
                         f"the optional extra (pip install 'tritondiff[wild]') on a machine it supports") from e
    return {s.name: s for s in subjects_in(module)}


def named(name: str) -> Subject | None:
    """The subject called ``name``: one registered in this process, else a bundled one or a pack's (the packs
    its name reaches), imported only when needed (they are heavy); None when there is none."""
    from ..api import registry
    from ..loader import bundled
    known = registry()
    if name not in known:
        known = {**bundled(), **subjects_for(name), **known}
    return known.get(name)


def subjects_for(target: str) -> dict[str, Subject]:
    """Every subject of the packs ``target`` reaches.  A target that reaches several packs (``wild.*``) takes
    those that import and logs why the others do not; one that reaches a single pack, or none that imports,
    raises the usage error."""
    out: dict[str, Subject] = {}
    reached, failures = reached_by(target), []
    for pack in reached:
        try:
            out.update(load(pack))
        except UsageError as e:
            if len(reached) == 1:
                raise
            failures.append(e)
    if failures and not out:
        raise failures[0]
    for e in failures:
        logging.getLogger("tritondiff.harness").warning("%s: left out: %s", target, e)
    return out


__all__ = ["Pack", "PACKS", "reached_by", "load", "named", "subjects_for"]
