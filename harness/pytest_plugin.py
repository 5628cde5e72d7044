"""pytest plugin: run tritondiff subjects as tests.

Import-light: nothing heavy (torch, triton, hypothesis) is imported until a
test actually asks for the harness.  Use either

* the ``tritondiff`` fixture: ``tritondiff.check(my_subject)`` fuzzes the
  subject under the selected profile and fails the test with the finding's
  class, message and dump path; or
* the marker: ``@pytest.mark.tritondiff("subject.name")`` on a test function
  with no body of its own (the named bundled or registered subject is fuzzed).

Profiles (``--tritondiff-profile``, else ``TRITONDIFF_PROFILE`` through the
harness config): ``ci`` (fast, the pre-merge gate), ``nightly`` (many
examples, the largest shapes) and ``gpu_huge`` (CUDA only: each subject's largest
input drawn just past 2^31 elements within free GPU memory, see :mod:`harness.huge`;
subjects that do not fit are skipped with the reason)::

    pytest -n auto --tritondiff-profile nightly --tritondiff-store nightly.db tests/test_bundled_subjects.py
    tritondiff report nightly.db

xdist-safe: each worker writes dumps under its own directory (Hypothesis's
example database, ``<out>/.hypothesis``, is one for all workers and runs, so a
saved failure replays first), seeds are stable per test node (a crc32 of its
node id), and ``--tritondiff-store`` records every finding and per-subject
statistics in a SQLite findings store that all workers share (WAL, one
transaction per write; a finding counts once per test run and node).

Registered through the ``pytest11`` entry point, this module loads in every
pytest run where tritondiff is installed, so it only declares its options,
marker and fixture there.  Its hooks (:class:`_Active`) are registered only
when the run asks for tritondiff: a ``--tritondiff-*`` option or a
``TRITONDIFF_*`` environment variable (at configure time), or a collected
test that carries the marker or requests the fixture.
"""
from __future__ import annotations

import dataclasses
import os
import uuid
import warnings
import zlib

import pytest


@dataclasses.dataclass(frozen=True)
class Profile:
    name: str
    budget_s: float
    max_examples: int
    max_example_bytes: int
    huge: bool = False          # GPU only: inputs past 2^31 elements (harness.huge); others skip


PROFILES = {
    "ci": Profile("ci", budget_s=8.0, max_examples=25, max_example_bytes=8 * 2 ** 20),
    "nightly": Profile("nightly", budget_s=600.0, max_examples=2000, max_example_bytes=512 * 2 ** 20),
    "gpu_huge": Profile("gpu_huge", budget_s=240.0, max_examples=4, max_example_bytes=512 * 2 ** 20, huge=True),
}


class EdgeFinding(UserWarning):
    """A finding only at the dtype's edge (overflow threshold, subnormal, non-finite inputs): reported, and
    a failure only under strict (harness.tiers)."""


def pytest_addoption(parser):
    group = parser.getgroup("tritondiff")
    group.addoption("--tritondiff-profile", choices=sorted(PROFILES), default=None,
                    help="fuzzing depth for tritondiff subjects (default: $TRITONDIFF_PROFILE or ci)")
    group.addoption("--tritondiff-out", default=None,
                    help="dump directory for findings (default: $TRITONDIFF_OUT or tritondiff-out)")
    group.addoption("--tritondiff-store", default=None,
                    help="record findings and per-subject statistics in this SQLite findings store")


#: the user property each test that ran a subject carries its statistics line in (it crosses xdist)
STATISTICS = "tritondiff_statistics"


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """With ``--hypothesis-show-statistics``: a line per subject a test ran (examples, skipped, time,
    findings, what was covered) -- the Hypothesis runs inside ``explore`` are not pytest's own tests, so
    Hypothesis's section would be empty for them."""
    try:
        wanted = config.getoption("--hypothesis-show-statistics")
    except ValueError:                   # Hypothesis's pytest plugin is not loaded
        wanted = False
    if not wanted:
        return
    lines = [value for reports in terminalreporter.stats.values() for report in reports
             if getattr(report, "when", None) == "call"
             for key, value in getattr(report, "user_properties", ()) if key == STATISTICS]
    if lines:
        terminalreporter.section("tritondiff statistics")
        for line in lines:
            terminalreporter.write_line(line)


#: the name the active part of the plugin is registered under (see _activate)
ACTIVE = "tritondiff-active"
_OPTIONS = ("--tritondiff-profile", "--tritondiff-out", "--tritondiff-store")


def pytest_configure(config):
    # declared in every run, so --strict-markers accepts the marker wherever it appears
    config.addinivalue_line("markers", "tritondiff(name): fuzz the named tritondiff subject as this test")
    if any(config.getoption(o) is not None for o in _OPTIONS) or any(k.startswith("TRITONDIFF_") for k in os.environ):
        _activate(config)


def pytest_collection_modifyitems(config, items):
    if config.pluginmanager.get_plugin(ACTIVE) is None and any(_uses_tritondiff(item) for item in items):
        _activate(config)


def _uses_tritondiff(item) -> bool:
    return item.get_closest_marker("tritondiff") is not None or "tritondiff" in getattr(item, "fixturenames", ())


def _activate(config) -> None:
    """Register the plugin's hooks for this run (idempotent); checks the profile first."""
    if config.pluginmanager.get_plugin(ACTIVE) is not None:
        return
    # One id per test run, shared by every xdist worker (a finding counts once per run and node).
    workerinput = getattr(config, "workerinput", None)
    config._tritondiff_run = (workerinput or {}).get("testrunuid") or uuid.uuid4().hex
    from tritondiff.base.exc import ConfigError
    from tritondiff.harness.config import apply_project_settings

    try:
        apply_project_settings(str(config.rootpath))      # [tool.tritondiff]: strict, max_findings
    except ConfigError as e:
        raise pytest.UsageError(str(e)) from None
    if _profile(config).huge:
        from tritondiff.harness.exc import HugeShapesUnavailable
        from tritondiff.harness.huge import require_cuda

        try:
            require_cuda("the gpu_huge profile's huge shapes")
        except HugeShapesUnavailable as e:
            raise pytest.UsageError(str(e)) from None
    config.pluginmanager.register(_Active(), ACTIVE)


def _profile(config) -> Profile:
    name = config.getoption("--tritondiff-profile")
    if name is None:
        from tritondiff.harness.config import config as harness_config

        name = harness_config.profile
    if name not in PROFILES:
        raise pytest.UsageError(f"TRITONDIFF_PROFILE={name!r}: choose one of {', '.join(sorted(PROFILES))}")
    return PROFILES[name]


def _out_dir(config, *, shared: bool = False) -> str:
    """Where dumps go: one folder per xdist worker; ``shared``: the folder above them (the example
    database, which Hypothesis keeps safe for several processes, is one for all workers and runs)."""
    base = config.getoption("--tritondiff-out")
    if base is None:
        from tritondiff.harness.config import config as harness_config

        base = harness_config.out_dir
    worker = getattr(config, "workerinput", {}).get("workerid")
    return os.path.join(base, worker) if worker and not shared else base


class TritondiffFixture:
    """What the ``tritondiff`` fixture returns."""

    def __init__(self, request):
        _activate(request.config)            # also when requested dynamically (request.getfixturevalue)
        self.request = request
        self.profile = _profile(request.config)
        self.out_dir = _out_dir(request.config)
        self.store_path = request.config.getoption("--tritondiff-store")
        self._active = request.config.pluginmanager.get_plugin(ACTIVE)

    @property
    def seed(self) -> int:
        """Stable per test node, whichever xdist worker runs it."""
        return zlib.crc32(self.request.node.nodeid.encode())

    def check(self, subject, **overrides):
        """Fuzz ``subject`` (a Subject or a registered name); fail the test on a finding."""
        from tritondiff.harness.config import config
        from tritondiff.harness.explore import explore
        from tritondiff.harness.coverage import CoverageTally
        from tritondiff.harness.packs import named

        if isinstance(subject, str):
            found = named(subject)
            if found is None:
                raise pytest.UsageError(f"no tritondiff subject named {subject!r}")
            subject = found
        from tritondiff.harness.api import runnable_here
        why = runnable_here(subject)
        if why is not None:
            pytest.skip(f"{subject.name}: {why}")
        tally = CoverageTally()
        kwargs = dict(budget_s=self.profile.budget_s, max_examples=self.profile.max_examples, seed=self.seed,
                      out_dir=self.out_dir, on_example=tally.observe,
                      database=os.path.join(_out_dir(self.request.config, shared=True), ".hypothesis"))
        if self.profile.huge and "huge" not in overrides:
            kwargs["huge"] = self._huge_plan(subject)
        kwargs.update(overrides)
        if "executor" not in kwargs and not kwargs.get("huge") and not config.huge_shapes:   # huge: longer timeout
            kwargs["executor"] = self._active.shared_worker(subject, kwargs.get("disabled", frozenset()))
        with config.patch(max_example_bytes=self.profile.max_example_bytes):
            result = explore(subject, **kwargs)
        if self.store_path:
            self._record(subject, result, tally, overrides)
        self.request.node.user_properties.append((STATISTICS, (
            f"{self.request.node.nodeid}: {result.subject}: {result.examples} examples ({result.skipped} skipped), "
            f"{result.seconds:.1f} s, {len(result.findings)} finding(s), seed {result.seed}; "
            f"covered: {result.covered or '-'}")))
        for found in result.findings:
            if found.status == "pass":                     # an edge finding, not strict: said, not failed
                warnings.warn(EdgeFinding(found.finding_line()), stacklevel=2)
        if result.status != "pass":
            pytest.fail(f"{result.subject}: {result.failure_class}: {result.message}\n"
                        f"case: {result.case.describe() if result.case else '?'}\ndump: {result.dump}",
                        pytrace=False)
        return result

    def _huge_plan(self, subject):
        """The subject's huge-shape plan; skips the test (with the reason) when it has none here."""
        from tritondiff.harness.exc import HugeShapesUnavailable
        from tritondiff.harness.huge import plan_on_device

        try:
            return plan_on_device(subject)
        except HugeShapesUnavailable as e:
            pytest.skip(f"gpu_huge: {e}")

    def _budget(self, overrides: dict) -> float:
        return overrides.get("budget_s") or self.profile.budget_s

    def _record(self, subject, result, tally, overrides: dict) -> None:
        from tritondiff.harness.loader import ref
        from tritondiff.harness.store import FindingRecord, Store
        from tritondiff.harness.strategies import example_cost

        examples, skipped, coverage = tally.take()
        with Store(self.store_path) as store:
            store.add_stats(subject.name, examples=examples, skipped=skipped, seconds=result.seconds,
                            coverage=coverage)
            # every distinct finding, the edge ones (warned, not failed) too: the nightly's record is complete
            found = [f for f in result.findings if f.case is not None and f.verdict is not None]
            if not found and result.status == "fail" and result.case is not None:
                found = [result]
            source = f"pytest:{self.request.config._tritondiff_run}:{self.request.node.nodeid}"
            # explore stops shrinking when the budget runs out: then the case may not be minimal
            state = "partial" if result.seconds >= 0.95 * self._budget(overrides) else "minimal"
            for f in found:
                v = f.verdict
                record = FindingRecord(f.signature, subject.name, v.failure_class, v.location, v.message,
                                       f.case.to_json(), example_cost(f.case), v.details, ref(subject), f.dump)
                new, _ = store.record_finding(record, source=source, state=state)
                if not new:
                    store.improve(record, state=state)


@pytest.fixture
def tritondiff(request):
    return TritondiffFixture(request)


class _Active:
    """The hooks of an enabled run (registered by :func:`_activate`), and the run's one worker process.

    Subjects that run isolated share one long-lived worker per pytest process (per xdist worker): it
    loads each subject when its turn comes and is replaced after a crash, so a session of many
    subjects pays the worker's start-up and imports (torch, triton, the kernels: seconds) once, not
    once per subject.  Huge mode keeps its own (its hang timeout is longer).
    """

    def __init__(self):
        self._worker = None

    def shared_worker(self, subject, disabled):
        """The shared isolated executor, or None where the subject runs in-process (isolation off)."""
        from tritondiff.harness import hunters
        from tritondiff.harness.executor import Isolated
        from tritondiff.harness.runner import enabled_hazards

        if not hunters.isolated(enabled_hazards(subject, disabled)):
            return None
        if self._worker is None:
            self._worker = Isolated()
        return self._worker

    def pytest_sessionfinish(self, session, exitstatus):
        if self._worker is not None:
            self._worker.close()
            self._worker = None

    @pytest.hookimpl(tryfirst=True)
    def pytest_pyfunc_call(self, pyfuncitem):
        marker = pyfuncitem.get_closest_marker("tritondiff")
        if marker is None:
            return None
        if not marker.args:
            raise pytest.UsageError("@pytest.mark.tritondiff needs a subject name")
        fixture = TritondiffFixture(pyfuncitem._request)
        fixture.check(marker.args[0], **marker.kwargs)
        return True
