"""The findings store: one SQLite file holding every finding, where it was seen, and campaign state.

Safe for many writers at once (campaign lanes, pytest-xdist workers): WAL
journal, a generous busy timeout, and every read-modify-write in one
``BEGIN IMMEDIATE`` transaction.  Every write commits before it returns, so a
process killed with SIGKILL loses nothing that a call had already returned.

Tables
------
``findings``     one row per failure signature (``subject|class|location``): the
                 smallest case seen so far, its dump, first/last seen, ``count``;
                 a first sighting whose shrunk case has another signature is kept,
                 marked ``superseded_by`` that signature (nothing committed is deleted)
``sightings``    (signature, source): who saw a finding; ``count`` is the number
                 of distinct sources, so a resumed task that re-finds its own
                 finding does not count twice
``subject_stats`` per subject: examples, skipped, seconds, and coverage tallies
                 (shape buckets, value families, non-finite sprinkles, dtypes, layouts)
``campaigns``    one row per ``tritondiff fuzz`` campaign: options, budget, time spent,
                 status (running / interrupted / done), heartbeat
``tasks``        the campaign's work items: (subject, shard, seed), status, outcome

Only the standard library is imported here.
"""
from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
import time
from typing import Any

from .exc import CorruptStore, UsageError

#: ``PRAGMA application_id`` of a tritondiff store ("TDif").
APPLICATION_ID = 0x54446966
SCHEMA_VERSION = 1
BUSY_TIMEOUT_S = 60.0
#: How far a finding's stored case was shrunk: "first_seen" (the first failing example, not shrunk yet),
#: "partial" (shrinking stopped by the time budget), "minimal" (Hypothesis finished shrinking).
STATES = ("first_seen", "partial", "minimal")

_SCHEMA = """
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE findings(
    signature     TEXT PRIMARY KEY,
    subject       TEXT NOT NULL,
    failure_class TEXT NOT NULL,
    location      TEXT NOT NULL,
    message       TEXT NOT NULL,
    case_json     TEXT NOT NULL,
    case_size     INTEGER NOT NULL,
    details_json  TEXT NOT NULL,
    subject_ref   TEXT NOT NULL,
    dump          TEXT,
    state         TEXT NOT NULL,          -- see STATES
    first_seen    REAL NOT NULL,
    last_seen     REAL NOT NULL,
    count         INTEGER NOT NULL,
    superseded_by TEXT                    -- the signature a first sighting shrank into (then count is 0)
);
CREATE TABLE sightings(
    signature TEXT NOT NULL,
    source    TEXT NOT NULL,
    seen      REAL NOT NULL,
    PRIMARY KEY(signature, source)
);
CREATE TABLE subject_stats(
    subject   TEXT PRIMARY KEY,
    examples  INTEGER NOT NULL,
    skipped   INTEGER NOT NULL,
    seconds   REAL NOT NULL,
    coverage  TEXT NOT NULL,
    updated   REAL NOT NULL
);
CREATE TABLE campaigns(
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    created   REAL NOT NULL,
    updated   REAL NOT NULL,
    status    TEXT NOT NULL,              -- running | interrupted | done
    options   TEXT NOT NULL,
    seed      INTEGER NOT NULL,
    budget_s  REAL NOT NULL,
    spent_s   REAL NOT NULL,
    workers   INTEGER NOT NULL,
    pid       INTEGER NOT NULL
);
CREATE TABLE tasks(
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    campaign  INTEGER NOT NULL REFERENCES campaigns(id),
    subject   TEXT NOT NULL,
    subject_ref TEXT NOT NULL,
    shard     INTEGER NOT NULL,
    seed      INTEGER NOT NULL,
    status    TEXT NOT NULL,              -- pending | running | done | error
    outcome   TEXT,                       -- pass | fail | cut (hard stop) | NULL
    seconds   REAL NOT NULL DEFAULT 0,
    examples  INTEGER NOT NULL DEFAULT 0,
    signature TEXT,
    error     TEXT,
    UNIQUE(campaign, subject, shard)
);
"""


@dataclasses.dataclass
class FindingRecord:
    """What a finder knows about one failing example."""

    signature: str
    subject: str
    failure_class: str
    location: str
    message: str
    case: dict
    case_size: int
    details: dict = dataclasses.field(default_factory=dict)
    subject_ref: dict = dataclasses.field(default_factory=dict)
    dump: str | None = None


@dataclasses.dataclass
class Campaign:
    id: int
    created: float
    updated: float
    status: str
    options: dict
    seed: int
    budget_s: float
    spent_s: float
    workers: int
    pid: int


@dataclasses.dataclass
class Task:
    id: int
    campaign: int
    subject: str
    subject_ref: dict
    shard: int
    seed: int
    status: str
    outcome: str | None
    seconds: float
    examples: int
    signature: str | None
    error: str | None


class Store:
    """A connection to one findings store (one per thread; open as many as you like)."""

    def __init__(self, path: str, *, create: bool = True):
        if not isinstance(path, (str, os.PathLike)) or not str(path):
            raise UsageError(f"store path must be a file path, got {path!r}")
        self.path = os.path.abspath(os.fspath(path))
        if os.path.isdir(self.path):
            raise CorruptStore(f"{self.path}: is a directory, not a findings store; pass a file path "
                               "(e.g. tritondiff-out/findings.db)")
        exists = os.path.exists(self.path)
        if not exists and not create:
            raise CorruptStore(f"{self.path}: no such findings store; run `tritondiff fuzz --store {path}` first")
        if exists and not os.access(self.path, os.R_OK):
            raise CorruptStore(f"{self.path}: findings store is not readable (permissions); fix them or use "
                               "another store (a path of its own)")
        if not exists:
            os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        try:
            self._db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        except sqlite3.Error as e:
            raise CorruptStore(f"{self.path}: cannot open the findings store ({e})") from e
        self._db.row_factory = sqlite3.Row
        try:
            self._init()
        except CorruptStore:
            self._db.close()
            raise
        except sqlite3.DatabaseError as e:
            self._db.close()
            raise CorruptStore(f"{self.path}: not a usable tritondiff findings store ({e}); delete it or use "
                               "another store (a path of its own)") from e

    # -- setup -----------------------------------------------------------------------------------

    def _init(self) -> None:
        db = self._db
        app_id = db.execute("PRAGMA application_id").fetchone()[0]
        if app_id == APPLICATION_ID:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version != SCHEMA_VERSION:
                raise CorruptStore(f"{self.path}: store schema version {version}, this tritondiff reads "
                                   f"{SCHEMA_VERSION}; report it with a matching version or start a new store")
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            return
        with self._write():
            # re-check inside the write lock: another process may have created it meanwhile
            if db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID:
                return
            tables = db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
            if tables:
                raise CorruptStore(f"{self.path}: an SQLite file, but not a tritondiff findings store; "
                                   "use another store (a path of its own)")
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    db.execute(statement)
            db.execute(f"PRAGMA application_id={APPLICATION_ID}")
            db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            db.execute("INSERT INTO meta VALUES ('created', ?)", (str(time.time()),))
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")

    class _Txn:
        def __init__(self, db):
            self.db = db

        def __enter__(self):
            self.db.execute("BEGIN IMMEDIATE")
            return self.db

        def __exit__(self, exc_type, exc, tb):
            if exc_type is None:
                self.db.execute("COMMIT")
            else:
                self.db.execute("ROLLBACK")
            return False

    def _write(self) -> "_Txn":
        """A write transaction, committed on exit (rolled back on error)."""
        return Store._Txn(self._db)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- findings --------------------------------------------------------------------------------

    def record_finding(self, record: FindingRecord, *, source: str, state: str = "first_seen",
                       now: float | None = None, replaces: str | None = None,
                       improve: bool = False) -> tuple[bool, int]:
        """Note that ``source`` saw ``record``; returns (new finding?, count).

        A new signature is inserted with the record's case and dump; a known one
        gets ``last_seen`` and, when ``source`` had not seen it before, ``count + 1``.
        The stored case/dump of a known finding only change through :meth:`improve`.
        ``replaces``: ``source``'s earlier sighting of that signature shrank into this
        one; it is withdrawn (see :meth:`withdraw`) in the same transaction, so a
        process killed in between never leaves the sighting on neither finding.
        ``improve``: a known finding also takes the record's case as :meth:`improve`
        would, in the same transaction (its dump is already installed).
        """
        now = time.time() if now is None else now
        _check_state(state)
        with self._write() as db:
            result = self._record(db, record, source, state, now)
            if improve and not result[0]:
                self._improve(db, record, state)
            if replaces is not None and replaces != record.signature:
                self._withdraw(db, replaces, source, record.signature)
            return result

    @staticmethod
    def _record(db, record: FindingRecord, source: str, state: str, now: float) -> tuple[bool, int]:
        fresh_source = db.execute("INSERT OR IGNORE INTO sightings VALUES (?, ?, ?)",
                                  (record.signature, source, now)).rowcount == 1
        row = db.execute("SELECT count FROM findings WHERE signature=?", (record.signature,)).fetchone()
        if row is None:
            db.execute("INSERT INTO findings VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,NULL)",
                       (record.signature, record.subject, record.failure_class, record.location,
                        record.message, json.dumps(record.case, sort_keys=True), int(record.case_size),
                        _dumps(record.details), json.dumps(record.subject_ref, sort_keys=True), record.dump,
                        state, now, now, 1))
            return True, 1
        count = row["count"] + (1 if fresh_source else 0)
        db.execute("UPDATE findings SET last_seen=?, count=?, superseded_by=NULL WHERE signature=?",
                   (now, count, record.signature))
        return False, count

    def withdraw(self, signature: str, *, source: str, into: str) -> bool:
        """Move ``source``'s sighting of ``signature`` to ``into`` (its first example shrank to another signature).

        The sighting of ``signature`` is removed and its count goes down; a finding
        left with no sighting stays in the store, marked ``superseded_by=into``.
        Returns True when that happened.
        """
        with self._write() as db:
            return self._withdraw(db, signature, source, into)

    @staticmethod
    def _withdraw(db, signature: str, source: str, into: str) -> bool:
        if db.execute("DELETE FROM sightings WHERE signature=? AND source=?", (signature, source)).rowcount == 0:
            return False
        db.execute("UPDATE findings SET count=max(0, count-1) WHERE signature=?", (signature,))
        return db.execute("UPDATE findings SET superseded_by=? WHERE signature=? AND count=0",
                          (into, signature)).rowcount == 1

    def wants(self, signature: str, case_size: int, state: str) -> bool:
        """Would a case of ``case_size``, shrunk as far as ``state`` says, improve the stored finding?

        Yes when there is none, when the stored one is unshrunk or has no dump, when
        the new one is no larger, or when it finished shrinking and the stored one did not.
        """
        _check_state(state)
        row = self._db.execute("SELECT state, case_size, dump FROM findings WHERE signature=?",
                               (signature,)).fetchone()
        return row is None or _better(row, case_size, state)

    def improve(self, record: FindingRecord, *, state: str) -> bool:
        """Install ``record`` (a shrunk case) as the finding's case when :meth:`wants` says it is better."""
        _check_state(state)
        with self._write() as db:
            return self._improve(db, record, state)

    @staticmethod
    def _improve(db, record: FindingRecord, state: str) -> bool:
        row = db.execute("SELECT state, case_size, dump FROM findings WHERE signature=?",
                         (record.signature,)).fetchone()
        if row is None or not _better(row, record.case_size, state):
            return False
        db.execute("UPDATE findings SET case_json=?, case_size=?, message=?, location=?, details_json=?, "
                   "dump=?, state=? WHERE signature=?",
                   (json.dumps(record.case, sort_keys=True), int(record.case_size), record.message,
                    record.location, _dumps(record.details), record.dump, state, record.signature))
        return True

    def finding(self, signature: str) -> dict | None:
        row = self._db.execute("SELECT * FROM findings WHERE signature=?", (signature,)).fetchone()
        return _finding_dict(row) if row is not None else None

    def findings(self, *, superseded: bool = False) -> list[dict]:
        """Every live finding, most recently seen first (``superseded=True``: only the superseded ones)."""
        where = "superseded_by IS NOT NULL" if superseded else "superseded_by IS NULL"
        return [_finding_dict(r) for r in
                self._db.execute(f"SELECT * FROM findings WHERE {where} ORDER BY last_seen DESC, signature")]

    def sightings(self, signature: str) -> list[tuple[str, float]]:
        return [(r["source"], r["seen"]) for r in self._db.execute(
            "SELECT source, seen FROM sightings WHERE signature=? ORDER BY seen", (signature,))]

    # -- per-subject statistics ------------------------------------------------------------------

    def add_stats(self, subject: str, *, examples: int = 0, skipped: int = 0, seconds: float = 0.0,
                  coverage: dict[str, dict[str, int]] | None = None) -> None:
        """Add a delta to ``subject``'s example count, time and coverage tallies."""
        with self._write() as db:
            row = db.execute("SELECT * FROM subject_stats WHERE subject=?", (subject,)).fetchone()
            merged = json.loads(row["coverage"]) if row is not None else {}
            for axis, tally in (coverage or {}).items():
                into = merged.setdefault(axis, {})
                for key, n in tally.items():
                    into[key] = into.get(key, 0) + int(n)
            if row is None:
                db.execute("INSERT INTO subject_stats VALUES (?,?,?,?,?,?)",
                           (subject, int(examples), int(skipped), float(seconds), json.dumps(merged, sort_keys=True),
                            time.time()))
            else:
                db.execute("UPDATE subject_stats SET examples=examples+?, skipped=skipped+?, seconds=seconds+?, "
                           "coverage=?, updated=? WHERE subject=?",
                           (int(examples), int(skipped), float(seconds), json.dumps(merged, sort_keys=True),
                            time.time(), subject))

    def stats(self) -> list[dict]:
        out = []
        for r in self._db.execute("SELECT * FROM subject_stats ORDER BY subject"):
            d = dict(r)
            d["coverage"] = json.loads(d["coverage"])
            out.append(d)
        return out

    # -- campaigns and tasks ---------------------------------------------------------------------

    def create_campaign(self, *, options: dict, seed: int, budget_s: float, workers: int) -> int:
        now = time.time()
        with self._write() as db:
            cur = db.execute("INSERT INTO campaigns(created, updated, status, options, seed, budget_s, spent_s, "
                             "workers, pid) VALUES (?,?,?,?,?,?,?,?,?)",
                             (now, now, "running", json.dumps(options, sort_keys=True), int(seed), float(budget_s),
                              0.0, int(workers), os.getpid()))
            return int(cur.lastrowid)

    def campaign(self, campaign_id: int) -> Campaign | None:
        row = self._db.execute("SELECT * FROM campaigns WHERE id=?", (campaign_id,)).fetchone()
        return _campaign(row) if row is not None else None

    def campaigns(self) -> list[Campaign]:
        return [_campaign(r) for r in self._db.execute("SELECT * FROM campaigns ORDER BY id")]

    def latest_unfinished(self) -> Campaign | None:
        row = self._db.execute("SELECT * FROM campaigns WHERE status != 'done' ORDER BY id DESC LIMIT 1").fetchone()
        return _campaign(row) if row is not None else None

    def claim_campaign(self, campaign_id: int, *, budget_s: float | None, workers: int) -> Campaign:
        """Take over an unfinished campaign in this process (optionally with a new total budget)."""
        with self._write() as db:
            db.execute("UPDATE campaigns SET status='running', pid=?, workers=?, updated=?, "
                       "budget_s=COALESCE(?, budget_s) WHERE id=?",
                       (os.getpid(), int(workers), time.time(), budget_s, campaign_id))
            db.execute("UPDATE tasks SET status='pending' WHERE campaign=? AND status='running'", (campaign_id,))
        return self.campaign(campaign_id)

    def heartbeat(self, campaign_id: int, spent_s: float, status: str | None = None) -> None:
        with self._write() as db:
            db.execute("UPDATE campaigns SET spent_s=?, updated=?, status=COALESCE(?, status) WHERE id=?",
                       (float(spent_s), time.time(), status, campaign_id))

    def add_task(self, campaign_id: int, *, subject: str, subject_ref: dict, shard: int, seed: int,
                 status: str = "pending") -> int:
        with self._write() as db:
            cur = db.execute("INSERT INTO tasks(campaign, subject, subject_ref, shard, seed, status) "
                             "VALUES (?,?,?,?,?,?)",
                             (campaign_id, subject, json.dumps(subject_ref, sort_keys=True), shard, seed, status))
            return int(cur.lastrowid)

    def tasks(self, campaign_id: int) -> list[Task]:
        return [_task(r) for r in self._db.execute("SELECT * FROM tasks WHERE campaign=? ORDER BY id",
                                                   (campaign_id,))]

    def start_task(self, task_id: int) -> None:
        with self._write() as db:
            db.execute("UPDATE tasks SET status='running' WHERE id=?", (task_id,))

    def finish_task(self, task_id: int, *, status: str, outcome: str | None, seconds: float, examples: int,
                    signature: str | None = None, error: str | None = None) -> None:
        with self._write() as db:
            db.execute("UPDATE tasks SET status=?, outcome=?, seconds=seconds+?, examples=examples+?, "
                       "signature=?, error=? WHERE id=?",
                       (status, outcome, float(seconds), int(examples), signature, error, task_id))

    def add_task_progress(self, task_id: int, *, seconds: float, examples: int) -> None:
        """Bank the time and examples of a task that did not finish (interrupted or cut)."""
        with self._write() as db:
            db.execute("UPDATE tasks SET seconds=seconds+?, examples=examples+? WHERE id=?",
                       (float(seconds), int(examples), task_id))

    # -- whole-store views -----------------------------------------------------------------------

    def meta(self) -> dict[str, str]:
        return {r["key"]: r["value"] for r in self._db.execute("SELECT key, value FROM meta")}

    def journal_mode(self) -> str:
        return self._db.execute("PRAGMA journal_mode").fetchone()[0]


def _check_state(state: str) -> None:
    if state not in STATES:
        raise UsageError(f"finding state {state!r}: choose one of {', '.join(STATES)}")


def _better(row: sqlite3.Row, case_size: int, state: str) -> bool:
    return (row["state"] == "first_seen" or row["dump"] is None or case_size <= row["case_size"]
            or (state == "minimal" and row["state"] != "minimal"))


def _dumps(data: Any) -> str:
    return json.dumps(plain_json(data), sort_keys=True, allow_nan=False)


def plain_json(v: Any) -> Any:
    """Strict-JSON data: non-finite floats become strings, unknown objects their repr."""
    if isinstance(v, dict):
        return {str(k): plain_json(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain_json(x) for x in v]
    if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
        return repr(v)
    if isinstance(v, (int, float, str, bool)) or v is None:
        return v
    return repr(v)


def _finding_dict(row: sqlite3.Row) -> dict:
    d = dict(row)
    d["case"] = json.loads(d.pop("case_json"))
    d["details"] = json.loads(d.pop("details_json"))
    d["subject_ref"] = json.loads(d["subject_ref"])
    return d


def _campaign(row: sqlite3.Row) -> Campaign:
    d = dict(row)
    d["options"] = json.loads(d["options"])
    return Campaign(**d)


def _task(row: sqlite3.Row) -> Task:
    d = dict(row)
    d["subject_ref"] = json.loads(d["subject_ref"])
    return Task(**d)
