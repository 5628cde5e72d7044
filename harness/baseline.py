"""Accepted findings: a baseline file lets a gate adopt tritondiff on a codebase with known issues.

The file (TOML; ``config.baseline``: ``--baseline FILE``, ``TRITONDIFF_BASELINE`` or ``baseline`` in
``[tool.tritondiff]``, relative to that pyproject.toml) lists findings by signature, each with the reason
it is accepted::

    [[accepted]]
    signature = "my_kernels.softmax|mismatch|out0:tail"
    reason = "tail block off by one ulp at N % 64 == 1; tracked in #123"

A finding whose signature is listed is still found, shrunk, dumped and reported (``accepted`` lines),
but does not fail ``check``, ``fuzz``, the pytest plugin or the gate.  Any other finding -- a new
signature of the same subject too -- fails as before.  A finding's signature is in its dump's
``summary.json`` and on its report line.
"""
from __future__ import annotations

import os

from .config import config
from .exc import UsageError

_cache: dict[tuple[str, float], dict[str, str]] = {}


def load(path: str) -> dict[str, str]:
    """signature -> reason, from the baseline file at ``path``; a bad file raises UsageError naming it."""
    try:
        mtime = os.path.getmtime(path)
    except OSError:
        raise UsageError(f"{path}: no such baseline file (config.baseline / --baseline); create it or drop "
                         "the setting") from None
    key = (os.path.abspath(path), mtime)
    if key not in _cache:
        _cache[key] = _parse(path)
    return _cache[key]


def _parse(path: str) -> dict[str, str]:
    try:
        import tomllib
    except ModuleNotFoundError:                # Python 3.10: with tomli installed
        try:
            import tomli as tomllib
        except ModuleNotFoundError:
            raise UsageError(f"{path}: reading a baseline file needs Python 3.11+ (tomllib) or tomli") from None
    try:
        with open(path, "rb") as f:
            table = tomllib.load(f)
    except (OSError, ValueError) as e:
        raise UsageError(f"{path}: not a readable baseline file: {e}") from None
    entries = table.get("accepted", [])
    unknown = sorted(set(table) - {"accepted"})
    if unknown or not isinstance(entries, list):
        found = ", ".join(unknown) or "accepted"
        raise UsageError(f"{path}: a baseline file holds [[accepted]] tables only (found {found} of another shape)")
    out: dict[str, str] = {}
    for i, entry in enumerate(entries):
        sig, reason = (entry.get("signature"), entry.get("reason")) if isinstance(entry, dict) else (None, None)
        if not (isinstance(sig, str) and sig.count("|") >= 2 and isinstance(reason, str) and reason.strip()):
            raise UsageError(f"{path}: accepted[{i}] needs signature = \"subject|class|location\" (from the "
                             "finding's summary.json) and a non-empty reason = \"why it is accepted\"")
        out[sig] = reason.strip()
    return out


def reason(signature: str | None) -> str | None:
    """Why the finding of ``signature`` is accepted, or None (no baseline, or not in it)."""
    if not signature or not config.baseline:
        return None
    return load(config.baseline).get(signature)
