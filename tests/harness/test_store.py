"""harness.store: the SQLite findings store (dedup by signature, counts, campaign state, crash safety)."""
from __future__ import annotations

import multiprocessing
import os
import sqlite3

import pytest

from tritondiff.harness.exc import CorruptStore, UsageError
from tritondiff.harness.store import APPLICATION_ID, FindingRecord, Store


def _record(sig="k|mismatch|out0:tail", size=100, dump=None, message="off by 1") -> FindingRecord:
    subject, klass, location = sig.split("|")
    case = {"dims": {"N": size}, "tensors": {}, "scalars": {}}
    return FindingRecord(sig, subject, klass, location, message, case, size,
                         {"comparison": {"outputs": [{"first_indices": [[size - 1]], "max_abs": float("nan")}]}},
                         {"name": subject, "module": "m", "file": "/x.py"}, dump)


@pytest.fixture
def store(tmp_path):
    with Store(str(tmp_path / "f.db")) as s:
        yield s


def test_new_store_is_wal_and_tagged(tmp_path):
    path = tmp_path / "deep" / "dir" / "f.db"
    with Store(str(path)) as s:
        assert s.journal_mode() == "wal"
        assert float(s.meta()["created"]) > 0
    raw = sqlite3.connect(str(path))
    assert raw.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    raw.close()
    with Store(str(path), create=False) as s:       # reopens
        assert s.findings() == []


def test_same_signature_counts_per_source_without_duplicates(store):
    assert store.record_finding(_record(), source="a", now=10.0) == (True, 1)
    assert store.record_finding(_record(size=7), source="a", now=11.0) == (False, 1)   # same source: no recount
    assert store.record_finding(_record(size=5), source="b", now=12.0) == (False, 2)
    rows = store.findings()
    assert len(rows) == 1
    row = rows[0]
    assert (row["count"], row["first_seen"], row["last_seen"]) == (2, 10.0, 12.0)
    assert row["case"]["dims"]["N"] == 100           # record_finding never replaces the stored case
    assert row["state"] == "first_seen"
    assert row["details"]["comparison"]["outputs"][0]["max_abs"] == "nan"     # strict JSON
    assert [s for s, _ in store.sightings(row["signature"])] == ["a", "b"]


def test_improve_keeps_the_smallest_shrunk_case(store):
    sig = "k|mismatch|out0:tail"
    store.record_finding(_record(size=100), source="a")
    assert store.wants(sig, 500, "partial")                     # not shrunk yet: anything shrunk is better
    assert store.improve(_record(size=500, dump="/d/500"), state="partial")
    assert store.finding(sig)["state"] == "partial"
    assert not store.wants(sig, 501, "partial")
    assert not store.improve(_record(size=501, dump="/d/501"), state="partial")
    assert store.improve(_record(size=600, dump="/d/600"), state="minimal")   # finished shrinking beats cut short
    assert not store.improve(_record(size=700, dump="/d/700"), state="minimal")
    assert not store.improve(_record(size=650, dump="/d/650"), state="partial")
    assert store.improve(_record(size=9, dump="/d/9", message="smaller"), state="partial")   # smaller wins anyway
    row = store.finding(sig)
    assert (row["case_size"], row["dump"], row["message"], row["state"]) == (9, "/d/9", "smaller", "partial")
    assert store.wants("other|crash|crash", 10**9, "partial")   # unknown signature: wanted
    with pytest.raises(UsageError, match="finding state 'done'"):
        store.wants(sig, 1, "done")


def test_withdraw_moves_a_sighting_and_keeps_the_superseded_finding(store):
    first, shrunk = "k|mismatch|out0:tail", "k|mismatch|out0:scalar"
    store.record_finding(_record(first), source="a")
    store.record_finding(_record(first), source="b")
    assert not store.withdraw(first, source="a", into=shrunk)             # b still sees it
    assert store.finding(first)["count"] == 1
    assert not store.withdraw(first, source="a", into=shrunk)             # already withdrawn: no change
    assert store.withdraw(first, source="b", into=shrunk)
    assert store.findings() == []                                         # not live any more ...
    (kept,) = store.findings(superseded=True)                            # ... but nothing committed is deleted
    assert (kept["signature"], kept["superseded_by"], kept["count"]) == (first, shrunk, 0)
    assert store.record_finding(_record(first), source="c") == (False, 1)  # seen again: live again
    assert store.finding(first)["superseded_by"] is None and store.findings(superseded=True) == []


def test_a_shrunk_sighting_replaces_the_first_in_one_transaction(store, monkeypatch):
    first, shrunk = "k|mismatch|out0:tail", "k|mismatch|out0:scalar"
    store.record_finding(_record(first), source="a")
    # a process dying inside the replacement (here: the withdrawal raising) must leave the first sighting live;
    # as two transactions, the first finding was already superseded and the shrunk one not yet recorded
    monkeypatch.setattr(Store, "_withdraw", staticmethod(lambda *a: (_ for _ in ()).throw(RuntimeError("killed"))))
    with pytest.raises(RuntimeError):
        store.record_finding(_record(shrunk), source="a", replaces=first)
    assert [f["signature"] for f in store.findings()] == [first] and store.finding(shrunk) is None
    monkeypatch.undo()
    assert store.record_finding(_record(shrunk), source="a", replaces=first) == (True, 1)
    assert [f["signature"] for f in store.findings()] == [shrunk]
    assert store.finding(first)["superseded_by"] == shrunk


def test_a_better_case_of_a_known_finding_is_installed_with_the_sighting(store, monkeypatch):
    store.record_finding(_record(size=500, dump="/d/500"), source="a")
    monkeypatch.setattr(Store, "_improve", staticmethod(lambda *a: (_ for _ in ()).throw(RuntimeError("killed"))))
    with pytest.raises(RuntimeError):                                   # dies inside: the sighting is not kept
        store.record_finding(_record(size=9, dump="/d/9"), source="b", state="minimal", improve=True)
    assert store.finding("k|mismatch|out0:tail")["count"] == 1
    monkeypatch.undo()
    assert store.record_finding(_record(size=9, dump="/d/9"), source="b", state="minimal", improve=True) == (False, 2)
    kept = store.finding("k|mismatch|out0:tail")
    assert (kept["case_size"], kept["dump"], kept["state"]) == (9, "/d/9", "minimal")


def test_stats_accumulate_and_merge_coverage(store):
    store.add_stats("k", examples=3, skipped=1, seconds=1.5, coverage={"shape": {"1": 2, "<2^10": 1}})
    store.add_stats("k", examples=2, seconds=0.5, coverage={"shape": {"1": 1}, "dtype": {"float16": 2}})
    (row,) = store.stats()
    assert (row["examples"], row["skipped"], row["seconds"]) == (5, 1, 2.0)
    assert row["coverage"] == {"shape": {"1": 3, "<2^10": 1}, "dtype": {"float16": 2}}


def test_campaign_and_task_state_round_trip(store):
    cid = store.create_campaign(options={"targets": ["a.py"]}, seed=7, budget_s=60, workers=2)
    t1 = store.add_task(cid, subject="a", subject_ref={"name": "a"}, shard=0, seed=11)
    t2 = store.add_task(cid, subject="b", subject_ref={"name": "b"}, shard=0, seed=12)
    store.start_task(t1)
    store.start_task(t2)
    store.finish_task(t2, status="done", outcome="fail", seconds=3.0, examples=9, signature="b|x|y")
    store.add_task_progress(t1, seconds=2.0, examples=4)
    store.heartbeat(cid, 25.0)
    camp = store.latest_unfinished()
    assert (camp.id, camp.status, camp.spent_s, camp.seed) == (cid, "running", 25.0, 7)
    assert camp.options == {"targets": ["a.py"]}
    claimed = store.claim_campaign(cid, budget_s=90.0, workers=1)
    assert (claimed.budget_s, claimed.workers) == (90.0, 1)
    tasks = {t.subject: t for t in store.tasks(cid)}
    assert (tasks["a"].status, tasks["a"].seconds, tasks["a"].examples) == ("pending", 2.0, 4)   # killed: re-run
    assert (tasks["b"].status, tasks["b"].outcome, tasks["b"].signature) == ("done", "fail", "b|x|y")
    store.heartbeat(cid, 90.0, "done")
    assert store.latest_unfinished() is None
    with pytest.raises(sqlite3.IntegrityError):
        store.add_task(cid, subject="a", subject_ref={}, shard=0, seed=1)          # (campaign, subject, shard) unique


@pytest.mark.parametrize("setup, fragment", [
    (lambda p: p.write_bytes(b"this is not sqlite at all" * 40), "not a usable tritondiff findings store"),
    (lambda p: p.mkdir(), "is a directory"),
    (lambda p: sqlite3.connect(str(p)).execute("CREATE TABLE other(x)").connection.commit(),
     "not a tritondiff findings store"),
])
def test_unusable_files_raise_corrupt_store(tmp_path, setup, fragment):
    path = tmp_path / "f.db"
    setup(path)
    with pytest.raises(CorruptStore, match=fragment):
        Store(str(path))


def test_missing_store_is_not_created_when_reading(tmp_path):
    with pytest.raises(CorruptStore, match="no such findings store"):
        Store(str(tmp_path / "nope.db"), create=False)
    assert not (tmp_path / "nope.db").exists()


def test_newer_schema_is_refused(tmp_path):
    path = str(tmp_path / "f.db")
    Store(path).close()
    raw = sqlite3.connect(path)
    raw.execute("PRAGMA user_version=99")
    raw.close()
    with pytest.raises(CorruptStore, match="schema version 99"):
        Store(path)


def _hammer(path: str, worker: int, n: int) -> None:
    with Store(path) as s:
        for i in range(n):
            s.record_finding(_record(f"s{i % 3}|mismatch|out0:tail"), source=f"w{worker}:{i}")
            s.add_stats(f"s{i % 3}", examples=1, seconds=0.01, coverage={"shape": {"1": 1}})


def test_concurrent_writers_lose_nothing(tmp_path):
    path = str(tmp_path / "f.db")
    Store(path).close()
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_hammer, args=(path, w, 30)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    with Store(path) as s:
        counts = {f["signature"]: f["count"] for f in s.findings()}
        assert counts == {"s0|mismatch|out0:tail": 40, "s1|mismatch|out0:tail": 40, "s2|mismatch|out0:tail": 40}
        assert sum(r["examples"] for r in s.stats()) == 120
        assert sum(r["coverage"]["shape"]["1"] for r in s.stats()) == 120


def _die_mid_transaction(path: str) -> None:
    with Store(path) as s:
        s.record_finding(_record("committed|crash|crash"), source="x")
        s._db.execute("BEGIN IMMEDIATE")
        s._db.execute("UPDATE findings SET count=1000")
        os.kill(os.getpid(), 9)


def test_sigkill_mid_transaction_keeps_committed_rows_only(tmp_path):
    path = str(tmp_path / "f.db")
    with Store(path) as s:
        s.record_finding(_record(), source="a")
    p = multiprocessing.get_context("fork").Process(target=_die_mid_transaction, args=(path,))
    p.start()
    p.join(30)
    assert p.exitcode == -9
    with Store(path) as s:
        counts = {f["signature"]: f["count"] for f in s.findings()}
    assert counts == {"k|mismatch|out0:tail": 1, "committed|crash|crash": 1}
