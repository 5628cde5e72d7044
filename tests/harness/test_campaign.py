"""harness.campaign / `tritondiff fuzz`: budget, lanes, crash/hang findings, SIGKILL + resume, Ctrl-C, bad input."""
from __future__ import annotations

import io
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import types

import pytest

from tritondiff.harness import campaign as campaign_mod
from tritondiff.harness.campaign import _Scheduler, resolve_targets, run_campaign, task_seed
from tritondiff.harness.cli import main
from tritondiff.harness.exc import UsageError
from tritondiff.harness.store import Store

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PLANTED = '''
import ctypes
import time

from tritondiff.harness import subject, tensor

IN = {"x": tensor(("N",), dtypes=("float32",), values=("normal",), nonfinite=False, layouts=("contiguous",))}
DIMS = {"N": (1, 64)}


def twice(x):
    return x * 2


@subject(reference=twice, inputs=IN, dims=DIMS)
def segfaults(x):
    ctypes.string_at(0)          # reads address 0: SIGSEGV in the worker
    return x * 2


@subject(reference=twice, inputs=IN, dims=DIMS)
def hangs(x):
    time.sleep(3600)
    return x * 2


@subject(reference=twice, inputs=IN, dims=DIMS)
def wrong_tail(x):
    out = x * 2
    if x.numel() > 3:
        out[-1] += 1             # wrong last element from length 4 on
    return out


@subject(reference=twice, inputs=IN, dims=DIMS)
def doubles(x):
    return x * 2
'''


@pytest.fixture
def planted(tmp_path):
    path = tmp_path / "planted_subjects.py"
    path.write_text(PLANTED)
    return str(path)


def _findings(store_path: str) -> dict[str, dict]:
    with Store(store_path, create=False) as s:
        return {f["signature"]: f for f in s.findings()}


# ---------------------------------------------------------------------------------------------- end to end

def test_crash_hang_and_mismatch_are_findings_and_the_budget_is_spent(planted, tmp_path):
    store = str(tmp_path / "out" / "f.db")
    out = io.StringIO()
    budget = 20.0
    res = run_campaign([planted], budget_s=budget, workers=2, seed=3, store=store, example_timeout_s=2.0, out=out)
    log = out.getvalue()
    assert res.status == "done", log
    found = _findings(store)
    classes = {f["subject"]: f["failure_class"] for f in found.values()}
    assert classes == {"segfaults": "crash", "hangs": "hang", "wrong_tail": "mismatch"}, log
    tail = next(f for f in found.values() if f["subject"] == "wrong_tail")
    assert tail["state"] == "minimal" and tail["case"]["dims"]["N"] == 4       # shrunk to the first bad length
    for f in found.values():
        assert f["count"] == 1
        with open(os.path.join(f["dump"], "summary.json")) as fh:
            summary = json.load(fh)
        assert summary["failure_class"] == f["failure_class"] and summary["signature"] == f["signature"]
        # dumps in one folder beside the store, named after it
        assert os.path.dirname(os.path.dirname(f["dump"])) == str(tmp_path / "out" / "f-dumps")
    # the campaign did not stop at the crash or the hang: the passing subject used the rest of the budget
    with Store(store, create=False) as s:
        stats = {r["subject"]: r for r in s.stats()}
        (camp,) = s.campaigns()
        tasks = s.tasks(camp.id)
    assert stats["doubles"]["examples"] > 20
    assert stats["doubles"]["coverage"]["shape"]["1"] + stats["doubles"]["coverage"]["shape"]["<2^10"] \
        == stats["doubles"]["examples"]
    assert budget - 2 <= camp.spent_s <= budget + 10, log
    assert camp.status == "done" and all(t.status == "done" for t in tasks)
    assert res.examples == sum(r["examples"] for r in stats.values())
    assert "NEW" in log and "campaign 1 done" in log
    assert res.exit_code == 1 and {f["subject"] for f in res.findings} == {"segfaults", "hangs", "wrong_tail"}

    # a second campaign on the same store re-finds the mismatch: its count goes up, no duplicate row
    res2 = run_campaign([f"{planted}::wrong_tail"], budget_s=8.0, workers=1, seed=4, store=store, out=io.StringIO())
    again = _findings(store)
    assert len(again) == 3
    assert again[tail["signature"]]["count"] == 2
    assert again[tail["signature"]]["first_seen"] == tail["first_seen"]
    assert res2.findings and not res2.findings[0]["new"]


def _children(pid: int) -> set[int]:
    out = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    if int(fh.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.add(int(entry))
            except (OSError, IndexError, ValueError):
                pass
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _assert_kept(store: str, before: dict[str, dict]) -> None:
    """Every finding committed earlier is still there: live, or superseded by the live signature it shrank into."""
    live = _findings(store)
    with Store(store, create=False) as s:
        superseded = {f["signature"]: f for f in s.findings(superseded=True)}
    for sig, f in before.items():
        row = live.get(sig) or superseded.get(sig)
        assert row is not None, f"committed finding {sig} is gone"
        assert row["first_seen"] == f["first_seen"]
        if sig in superseded:
            assert row["superseded_by"] in live


class _Fuzz:
    """``tritondiff fuzz`` in a subprocess; its output goes to a file (a pipe nobody drains could block it)."""

    def __init__(self, log_dir, *args: str):
        self.log = os.path.join(str(log_dir), f"fuzz-{time.monotonic_ns()}.log")
        with open(self.log, "w") as fh:
            self.proc = subprocess.Popen([sys.executable, "-m", "tritondiff.harness", "fuzz", *args], cwd=ROOT, stdout=fh,
                                         stderr=subprocess.STDOUT, text=True,
                                         env={**os.environ, "TRITONDIFF_EXAMPLE_TIMEOUT": "5"})
        self.pid = self.proc.pid

    def output(self) -> str:
        with open(self.log) as fh:
            return fh.read()

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            pytest.fail(f"the campaign did not exit within {timeout:.0f} s:\n{self.output()}")

    def wait_for(self, predicate, what: str, timeout: float = 300):
        """Poll the store until ``predicate()`` holds: progress is read from what the campaign committed,
        never assumed from elapsed time (a loaded machine may take minutes to start a worker)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = predicate()
            if value:
                return value
            if self.proc.poll() is not None:
                pytest.fail(f"the campaign exited (rc {self.proc.returncode}) before {what}:\n{self.output()}")
            time.sleep(0.1)
        self.proc.kill()
        pytest.fail(f"timed out waiting for {what}:\n{self.output()}")


def _campaign_row(store: str):
    """The store's latest campaign, or None while the store cannot be read yet (being created)."""
    if not os.path.exists(store):
        return None
    try:
        with Store(store, create=False) as s:
            camps = s.campaigns()
    except (sqlite3.Error, UsageError):
        return None
    return camps[-1] if camps else None


def _committed(store: str) -> dict[str, dict]:
    try:
        return _findings(store) if os.path.exists(store) else {}
    except (sqlite3.Error, UsageError):
        return {}


def _running_in(proc: _Fuzz, store: str, spent_at_least: float):
    """The campaign row once ``proc`` has claimed it and banked ``spent_at_least`` seconds in all."""
    camp = _campaign_row(store)
    ok = camp is not None and camp.pid == proc.pid and camp.status == "running" and camp.spent_s >= spent_at_least
    return camp if ok else None


@pytest.mark.slow  # over 30 s on 2 cores: nightly tier
def test_sigkill_repeatedly_then_ctrl_c_loses_nothing_and_resumes(planted, tmp_path):
    store = str(tmp_path / "f.db")
    budget = 20
    fuzz = _Fuzz(tmp_path, f"{planted}::wrong_tail", f"{planted}::doubles", "--budget", str(budget), "--workers",
                 "1", "--seed", "9", "--store", store)
    # 1. SIGKILL as soon as the first finding is committed
    fuzz.wait_for(lambda: _committed(store), "a committed finding")
    kids = _children(fuzz.pid)
    fuzz.proc.send_signal(signal.SIGKILL)
    fuzz.wait(60)
    committed = _findings(store)
    assert committed
    deadline = time.monotonic() + 45                     # the lane's worker exits once its parent is gone
    while any(_alive(k) for k in kids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(_alive(k) for k in kids), "worker processes outlived the killed campaign"
    camp = _campaign_row(store)
    assert camp.status == "running" and camp.pid != os.getpid()       # what a killed campaign leaves behind

    # 2. resume; SIGKILL again once the resumed run has banked time of its own
    fuzz = _Fuzz(tmp_path, "--resume", "--store", store)
    fuzz.wait_for(lambda: _running_in(fuzz, store, camp.spent_s + 1.5), "the resumed campaign's heartbeat")
    fuzz.proc.send_signal(signal.SIGKILL)
    fuzz.wait(60)
    _assert_kept(store, committed)
    committed.update(_findings(store))
    camp = _campaign_row(store)

    # 3. resume, then Ctrl-C while budget is left: a clean stop, exit 130, resumable
    fuzz = _Fuzz(tmp_path, "--resume", "--store", store)
    running = fuzz.wait_for(lambda: _running_in(fuzz, store, camp.spent_s + 1.5), "the second resume's heartbeat")
    assert running.budget_s - running.spent_s > 5, "too little budget left to interrupt the campaign"
    fuzz.proc.send_signal(signal.SIGINT)
    assert fuzz.wait(120) == 130, fuzz.output()
    assert "resume with: tritondiff fuzz --resume" in fuzz.output()
    camp = _campaign_row(store)
    assert camp.status == "interrupted" and running.spent_s <= camp.spent_s < budget
    _assert_kept(store, committed)
    committed.update(_findings(store))

    # 4. resume to the end of the budget
    fuzz = _Fuzz(tmp_path, "--resume", "--store", store)
    assert fuzz.wait(300) == 1, fuzz.output()          # the campaign found wrong_tail: whichever run did
    camp = _campaign_row(store)
    assert camp.status == "done"
    # idle lanes start no extra shard with less than MIN_EXTRA_S left; a cut lane may overrun by the grace
    assert budget - campaign_mod.MIN_EXTRA_S - 1 <= camp.spent_s <= budget + 30, fuzz.output()
    final = _findings(store)
    tail = [f for f in final.values() if f["subject"] == "wrong_tail"]
    assert len(tail) == 1 and tail[0]["count"] == 1     # re-found by the same task on resume: counted once
    _assert_kept(store, committed)
    with Store(store, create=False) as s:
        assert all(t.status == "done" for t in s.tasks(camp.id))


# ---------------------------------------------------------------------------------------------- CLI errors

@pytest.mark.parametrize("args, fragment", [
    (["fuzz", "no_such_subject_xyz", "--budget", "5"], "unknown target 'no_such_subject_xyz'"),
    (["fuzz", "missing/file.py", "--budget", "5"], "no such file"),
    (["fuzz", "--budget", "-5"], "must be positive"),
    (["fuzz", "--budget", "soon"], "not a duration"),
    (["fuzz", "--workers", "0"], "must be positive"),
    (["report", "/nonexistent/dir/f.db"], "no such findings store"),
])
def test_bad_cli_input_exits_2_with_one_line(args, fragment, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert fragment in err and len(err.strip().splitlines()) == 1, err


def test_unreadable_and_corrupt_stores_exit_2(planted, tmp_path, capsys):
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(b"\x00garbage" * 500)
    folder = tmp_path / "folder.db"
    folder.mkdir()
    for store, fragment in ((corrupt, "not a usable tritondiff findings store"), (folder, "is a directory")):
        for args in (["fuzz", planted, "--budget", "5", "--store", str(store)], ["report", str(store)]):
            assert main(args) == 2
            err = capsys.readouterr().err
            assert fragment in err and len(err.strip().splitlines()) == 1, err


def test_resume_errors_exit_2(planted, tmp_path, capsys):
    store = str(tmp_path / "f.db")
    assert main(["fuzz", "--resume", "--store", store]) == 2
    assert "no unfinished campaign to resume" in capsys.readouterr().err
    with Store(store) as s:
        s.create_campaign(options={"dump_root": str(tmp_path)}, seed=1, budget_s=10, workers=1)
    assert main(["fuzz", planted, "--resume", "--store", store]) == 2
    assert "with its own targets; these differ (not in it: doubles, hangs, segfaults, wrong_tail" in \
        capsys.readouterr().err
    assert main(["fuzz", "--resume", "--seed", "2", "--store", store]) == 2
    assert "with its seed 1; leave --seed out" in capsys.readouterr().err


def test_a_resumed_campaign_fails_on_what_its_earlier_runs_found(planted, tmp_path, capsys):
    store = str(tmp_path / "f.db")
    first = run_campaign([f"{planted}::wrong_tail"], budget_s=6, workers=1, seed=3, store=store, out=io.StringIO())
    assert first.exit_code == 1 and first.findings
    with Store(store) as s:
        s.heartbeat(first.campaign_id, first.budget_s, status="interrupted")    # as a killed run leaves it
    # the same targets repeated continue the campaign; its budget is spent, so this run finds nothing itself
    assert main(["fuzz", f"{planted}::wrong_tail", "--resume", "--seed", "3", "--store", store]) == 1
    out = capsys.readouterr().out
    assert "total budget 0:06, 0:06 spent by earlier runs, 0:00 left for this one" in out
    assert "mismatch     wrong_tail  (found by an earlier run of this campaign)" in out


def test_no_bundled_subjects_is_one_line(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(campaign_mod, "bundled", lambda: {})
    assert main(["fuzz", "--budget", "5", "--store", str(tmp_path / "f.db")]) == 2
    err = capsys.readouterr().err
    assert "no bundled subjects yet" in err and len(err.strip().splitlines()) == 1


# ---------------------------------------------------------------------------------------------- pieces

def test_targets_files_names_and_globs(planted, monkeypatch):
    assert [s.name for s in resolve_targets([planted])] == ["segfaults", "hangs", "wrong_tail", "doubles"]
    assert [s.name for s in resolve_targets([f"{planted}::*s"])] == ["segfaults", "hangs", "doubles"]
    subjects = {s.name: s for s in resolve_targets([planted])}
    monkeypatch.setattr(campaign_mod, "bundled", lambda: {"k.nrm2": subjects["doubles"], "k.norm": subjects["hangs"]})
    assert [s.name for s in resolve_targets(["k.nrm*"])] == ["doubles"]
    assert [s.name for s in resolve_targets([])] == ["doubles", "hangs"]
    assert len(resolve_targets([planted, f"{planted}::doubles"])) == 4          # de-duplicated
    with pytest.raises(UsageError, match="no subject matches 'nope'"):
        resolve_targets([f"{planted}::nope"])
    with pytest.raises(UsageError, match=r"bundled: k\.\* \(2\); tritondiff fuzz --list names them all"):
        resolve_targets(["zzz*"])
    with pytest.raises(UsageError, match=r"did you mean k\.nrm2 or k\.norm\?"):
        resolve_targets(["nrm2"])
    with pytest.raises(UsageError, match="list of strings"):
        resolve_targets(planted)


def test_a_dump_folder_named_after_a_subject_does_not_hide_the_subject(planted, monkeypatch, tmp_path):
    """A campaign dumps each finding into a folder named after its subject; the next campaign run from there
    named the subject and got "<folder>: not a Python file"."""
    subjects = {s.name: s for s in resolve_targets([planted])}
    monkeypatch.setattr(campaign_mod, "bundled", lambda: {"k.nrm2": subjects["doubles"]})
    monkeypatch.chdir(tmp_path)
    (tmp_path / "k.nrm2").mkdir()
    assert [s.name for s in resolve_targets(["k.nrm2"])] == ["doubles"]
    assert [s.name for s in resolve_targets(["k.nrm2/", "./k.nrm2"])] == ["doubles"]     # as tab completion types it
    (tmp_path / "other").mkdir()
    with pytest.raises(UsageError, match="unknown target 'other'"):
        resolve_targets(["other/"])
    (tmp_path / "notes").write_text("x")          # a file of that name, no such subject: it was meant as a file
    with pytest.raises(UsageError, match="not a Python file"):
        resolve_targets(["notes"])
    (tmp_path / "k.nrm2").rmdir()
    (tmp_path / "k.nrm2").write_text("x")         # a file named like a bundled subject: the subject
    assert [s.name for s in resolve_targets(["k.nrm2"])] == ["doubles"]


@pytest.mark.parametrize("kwargs, fragment", [
    (dict(budget_s=0), "budget_s=0"), (dict(budget_s=float("nan")), "budget_s=nan"),
    (dict(workers=0), "workers=0"), (dict(workers=1.5), "workers=1.5"), (dict(seed="x"), "seed='x'"),
    (dict(example_timeout_s=-1), "example_timeout_s=-1"), (dict(disabled={"gremlins"}), "unknown hazard"),
    (dict(resume=True, disabled={"poison"}), "leave disabled"),
])
def test_run_campaign_validates_arguments(kwargs, fragment, tmp_path):
    with pytest.raises(UsageError, match=fragment.replace("(", r"\(")):
        run_campaign(["x.py"], store=str(tmp_path / "f.db"), **kwargs)


def _scheduler(tmp_path, names, lanes, budget, closed=()):
    store = Store(str(tmp_path / "f.db"))
    cid = store.create_campaign(options={}, seed=1, budget_s=budget, workers=lanes)
    for n in names:
        store.add_task(cid, subject=n, subject_ref={"name": n}, shard=0, seed=task_seed(1, n, 0))
    c = types.SimpleNamespace(store=store, id=cid, seed=1, subjects={n: object() for n in names},
                              stopping=threading.Event())
    sched = _Scheduler(c, store.tasks(cid), budget, lanes)
    sched.closed.update(closed)
    return sched, store


def test_scheduler_splits_the_budget_fairly_and_fills_idle_time(tmp_path, monkeypatch):
    monkeypatch.setattr(campaign_mod, "ref", lambda s: {"name": "x"})
    sched, store = _scheduler(tmp_path, ["a", "b", "c", "d"], lanes=2, budget=60)
    (t0, b0), (t1, b1) = sched.next(0, store), sched.next(1, store)
    assert (t0.subject, t1.subject) == ("a", "b")
    assert b0 == pytest.approx(30, abs=0.5) and b1 == pytest.approx(30, abs=0.5)     # 4 tasks, 2 lanes, 60 s
    sched.deadline = time.monotonic() + 30                  # both lanes come back after 30 s
    sched.busy_until = {}
    (t2, b2), (t3, b3) = sched.next(0, store), sched.next(1, store)
    assert (t2.subject, t3.subject) == ("c", "d")
    assert b2 == pytest.approx(30, abs=0.5) and b3 == pytest.approx(30, abs=0.5)      # 2 tasks, 2 lanes, 30 s
    sched.busy_until = {1: time.monotonic() + 30}          # lane 1 busy to the end; one task left for lane 0
    sched.pending.append(t3)
    (t5, b5) = sched.next(0, store)
    assert t5.subject == "d" and b5 == pytest.approx(30, abs=0.5)
    # queue empty: idle lanes explore new shards of subjects that have not failed, least explored first
    sched.finished("c", 15.0, close=True)
    sched.finished("a", 30.0, close=True)
    t4, _ = sched.next(0, store)
    assert (t4.subject, t4.shard, t4.seed) == ("b", 1, task_seed(1, "b", 1))
    assert [t.subject for t in store.tasks(sched.c.id)][-1] == "b"     # the extra shard is in the store


def test_scheduler_skips_closed_subjects_and_stops_when_nothing_is_left(tmp_path):
    sched, store = _scheduler(tmp_path, ["a"], lanes=1, budget=60, closed={"a"})
    assert sched.next(0, store) is None
    (task,) = store.tasks(sched.c.id)
    assert (task.status, task.outcome) == ("done", "skipped")
    sched2, store2 = _scheduler(tmp_path / "x", ["b"], lanes=1, budget=0.5)
    assert sched2.next(0, store2) is None                                 # less than a minimal task left


def test_status_line_shows_rate_findings_and_current_subjects():
    lanes = [types.SimpleNamespace(index=0, examples=30, current=(types.SimpleNamespace(subject="kernels.nrm2",
                                                                                        shard=2), 10.0, 0.0)),
             types.SimpleNamespace(index=1, examples=12, current=None)]
    camp = types.SimpleNamespace(spent_before=60.0, budget_s=600.0,
                                 findings={"a": {"new": True}, "b": {"new": False}, "c": {"new": True}})
    text = campaign_mod._Campaign._status_text(camp, lanes, 21.0)
    assert text == "[1:21/10:00] 42 examples (2.00/s) | findings: 2 new, 1 seen | L0 kernels.nrm2#2"


def test_unknown_target_names_every_bundled_group_in_one_line(capsys):
    # the line used to list the first 12 sorted names: all compiler.*, never a kernel
    assert main(["fuzz", "nrm2", "--budget", "5"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    groups = dict(re.findall(r"(\w+)\.\* \((\d+)\)", line))
    assert set(groups) == {"compiler", "kernels"} and all(int(n) >= 5 for n in groups.values()), line
    assert "did you mean compiler.nrm2 or kernels.nrm2?" in line and "tritondiff fuzz --list" in line


def test_fuzz_list_prints_the_targets_grouped_by_prefix_and_runs_nothing(planted, tmp_path, capsys):
    store = tmp_path / "f.db"
    assert main(["fuzz", "--list", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    heads = [line.split(" (")[0] for line in out.splitlines() if not line.startswith(" ")]
    assert heads == ["compiler.*", "kernels.*"]
    assert re.search(r"^kernels\.\* \(\d+\): .*\bnrm2\b", out, re.M | re.S) and "kernels.nrm2" not in out
    assert all(len(line) <= 100 for line in out.splitlines())
    assert main(["fuzz", "--list", "kernels.nrm2*", planted]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "(no prefix) (4): doubles, hangs, segfaults, wrong_tail", "kernels.* (3): nrm2, nrm2_2d, nrm2_backward"]
    assert not store.exists()                        # listing opens no store and fuzzes nothing
    assert main(["fuzz", "--list", "zzz*"]) == 2


def test_budget_help_says_a_long_example_may_overrun_by_20_percent(capsys):
    from tritondiff.harness.cli import build_parser

    for command in ("check", "fuzz"):
        sub = build_parser()._subparsers._group_actions[0].choices[command]
        budget = next(a for a in sub._actions if "--budget" in a.option_strings)
        assert "overrun" in budget.help and "20%" in budget.help % {}


def test_no_targets_means_every_subject_of_the_bundled_modules(tmp_path, monkeypatch):
    from tritondiff.harness import loader

    (tmp_path / "tdiff_extra_subjects.py").write_text(
        "from tritondiff.harness import subject, tensor\n\n"
        "@subject(name='extra.double', reference=lambda x: x * 2, inputs={'x': tensor(('N',))}, dims={'N': (1, 9)})\n"
        "def double(x):\n    return x * 2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    real = set(loader.bundled())
    assert {n.split(".")[0] for n in real} == {"kernels", "compiler"} and len(real) >= 20
    # BUNDLED_MODULES is the one list: a module added there is fuzzed by `tritondiff fuzz` with no targets
    # (a listed module that does not exist yet is passed over)
    monkeypatch.setattr(loader, "BUNDLED_MODULES", (*loader.BUNDLED_MODULES, "tdiff_extra_subjects",
                                                    "tritondiff.harness.subjects.no_such_module"))
    names = {s.name for s in resolve_targets([])}
    assert names == real | {"extra.double"}
    assert {s.name for s in resolve_targets(["extra.*"])} == {"extra.double"}
