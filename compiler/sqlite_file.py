"""An SQLite file a cache keeps its entries in: one table, opened per use, rebuilt when unreadable.

Shared by the autotune cache (``compiler.autotune``) and the graph cache (``compiler.graph_cache``).  A file
that is not a database of the expected table is moved aside to ``*.corrupt`` and an empty one started, with a
warning; a file that cannot be rebuilt, or cannot be read or written now (locked past ``TIMEOUT_S`` by another
process, a disk I/O error, a read-only file) raises the cache's own error, naming the file and the fix -- a
busy file is never taken for a corrupt one.
"""
from __future__ import annotations

import contextlib
import os
import sqlite3
import warnings
from typing import Any, Callable, Iterator, Optional, Sequence

from .counters import counters

#: Seconds a statement waits for another process's lock before the file counts as busy.
TIMEOUT_S = 30.0


class SqliteFile:
    """``path``: the file; ``schema``: its table's CREATE statement; ``probe``: a SELECT that reads the table's
    columns (an unreadable file fails it); ``name``: the cache's name in warnings; ``counter``: the counter a
    rebuild adds one to; ``error(message, path)``: the exception a file beyond repair raises."""

    def __init__(self, path: str, schema: str, probe: str, *, name: str, counter: str,
                 error: Callable[[str, str], Exception]):
        self.path = path
        self.schema = schema
        self.probe = probe
        self.name = name
        self.counter = counter
        self.error = error

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=TIMEOUT_S)
        conn.execute(self.schema)
        return conn

    def open(self) -> sqlite3.Connection:
        """A connection to a working file, rebuilding a corrupt one."""
        try:
            os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        except OSError as e:
            raise self.error(f"the {self.name}'s directory cannot be made ({e})", self.path) from e
        try:
            conn = self._connect()
            conn.execute(self.probe).fetchall()
            return conn
        except sqlite3.OperationalError as e:       # locked, disk I/O, cannot open: the file may be fine
            raise self.error(f"the {self.name} cannot be used now ({e})", self.path) from e
        except sqlite3.DatabaseError as e:          # not a database, malformed, another table
            return self._rebuild(e)

    def _rebuild(self, error: Exception) -> sqlite3.Connection:
        aside = f"{self.path}.corrupt"
        try:
            os.replace(self.path, aside)
            conn = self._connect()
        except (OSError, sqlite3.DatabaseError) as e:
            raise self.error(f"the {self.name} is unreadable ({error}) and could not be rebuilt ({e})",
                             self.path) from e
        counters[self.counter] += 1
        warnings.warn(f"{self.name} {self.path} was unreadable ({error}); moved it to {aside} and started an "
                      f"empty cache", RuntimeWarning, stacklevel=4)
        return conn

    def fetchone(self, sql: str, params: Sequence[Any] = ()) -> Optional[tuple]:
        with self._errors(), contextlib.closing(self.open()) as conn:
            return conn.execute(sql, tuple(params)).fetchone()

    def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        with self._errors(), contextlib.closing(self.open()) as conn:
            return [tuple(r) for r in conn.execute(sql, tuple(params))]

    def write(self, *statements: tuple[str, Sequence[Any]]) -> None:
        """``(sql, params)`` statements in one transaction."""
        with self._errors(), contextlib.closing(self.open()) as conn, conn:
            for sql, params in statements:
                conn.execute(sql, tuple(params))

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        """A statement that fails on a working file (locked, full disk, read-only) raises the cache's error."""
        try:
            yield
        except sqlite3.Error as e:
            raise self.error(f"the {self.name} cannot be used now ({e})", self.path) from e
