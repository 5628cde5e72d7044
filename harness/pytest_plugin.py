"""pytest plugin: run tritondiff subjects as tests.

Import-light: nothing heavy (torch, triton, hypothesis) is imported until a
test actually asks for the harness.  Use either

* the ``tritondiff`` fixture: ``tritondiff.check(my_subject)`` fuzzes the
  subject under the selected profile and fails the test with the finding's
  class, message and dump path; or
* the marker: ``@pytest.mark.tritondiff("subject.name")`` on a test function
  with no body of its own (the named bundled or registered subject is fuzzed).

Profiles (``--tritondiff-profile`` or ``TRITONDIFF_PROFILE``): ``ci`` (fast,
the pre-merge gate) and ``nightly`` (many examples, the largest shapes).
Under pytest-xdist each worker writes dumps to its own directory and seeds
are stable per test node.
"""
from __future__ import annotations

import dataclasses
import os
import zlib

import pytest


@dataclasses.dataclass(frozen=True)
class Profile:
    name: str
    budget_s: float
    max_examples: int
    max_example_bytes: int


PROFILES = {
    "ci": Profile("ci", budget_s=25.0, max_examples=25, max_example_bytes=24 * 2 ** 20),
    "nightly": Profile("nightly", budget_s=600.0, max_examples=2000, max_example_bytes=512 * 2 ** 20),
}


def pytest_addoption(parser):
    group = parser.getgroup("tritondiff")
    group.addoption("--tritondiff-profile", choices=sorted(PROFILES), default=None,
                    help="fuzzing depth for tritondiff subjects (default: $TRITONDIFF_PROFILE or ci)")
    group.addoption("--tritondiff-out", default=None, help="dump directory for findings (default: tritondiff-out)")


def pytest_configure(config):
    config.addinivalue_line("markers", "tritondiff(name): fuzz the named tritondiff subject as this test")


def _profile(config) -> Profile:
    name = config.getoption("--tritondiff-profile") or os.environ.get("TRITONDIFF_PROFILE", "ci")
    if name not in PROFILES:
        raise pytest.UsageError(f"TRITONDIFF_PROFILE={name!r}: choose one of {', '.join(sorted(PROFILES))}")
    return PROFILES[name]


def _out_dir(config) -> str:
    base = config.getoption("--tritondiff-out") or os.environ.get("TRITONDIFF_OUT", "tritondiff-out")
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    return os.path.join(base, worker) if worker else base


class TritondiffFixture:
    """What the ``tritondiff`` fixture returns."""

    def __init__(self, request):
        self.request = request
        self.profile = _profile(request.config)
        self.out_dir = _out_dir(request.config)

    def check(self, subject, **overrides):
        """Fuzz ``subject`` (a Subject or a registered name); fail the test on a finding."""
        from harness.api import registry
        from harness.config import config
        from harness.explore import explore
        from harness.loader import bundled

        if isinstance(subject, str):
            known = {**bundled(), **registry()}
            if subject not in known:
                raise pytest.UsageError(f"no tritondiff subject named {subject!r}")
            subject = known[subject]
        seed = zlib.crc32(self.request.node.nodeid.encode())        # stable per test node
        kwargs = dict(budget_s=self.profile.budget_s, max_examples=self.profile.max_examples, seed=seed,
                      out_dir=self.out_dir)
        kwargs.update(overrides)
        with config.patch(max_example_bytes=self.profile.max_example_bytes):
            result = explore(subject, **kwargs)
        if result.status != "pass":
            pytest.fail(f"{result.subject}: {result.failure_class}: {result.message}\n"
                        f"case: {result.case.describe() if result.case else '?'}\ndump: {result.dump}",
                        pytrace=False)
        return result


@pytest.fixture
def tritondiff(request):
    return TritondiffFixture(request)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    marker = pyfuncitem.get_closest_marker("tritondiff")
    if marker is None:
        return None
    if not marker.args:
        raise pytest.UsageError("@pytest.mark.tritondiff needs a subject name")
    fixture = TritondiffFixture(pyfuncitem._request)
    fixture.check(marker.args[0], **marker.kwargs)
    return True
