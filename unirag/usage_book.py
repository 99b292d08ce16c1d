"""The usage book: what each command's model calls used, per stage, as rows of ``usage``.

Bookkeeping never turns a computed answer into an error. Usage is written through a
connection of its own (model-call threads write it as calls finish, with no read open, so
a write never has to upgrade a stale snapshot), and when the store stays locked past
:attr:`UsageBook.busy_timeout` (a long write of another connection, an upload job's) the
rows are kept and written ahead of the next write, or at :meth:`UsageBook.close`.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from unirag.llm.base import StageUsage, UsageLedger
from unirag.store.backend import Backend
from unirag.store.database import Database
from unirag.workspace_tables import read_meta, write_meta

_Row = tuple[str, str, str, float]


class UsageBook:
    """The usage rows of one workspace. ``db`` gives the workspace's connection (its tables
    exist once it is open); ``backend`` opens the book's own connection for writes."""

    #: Seconds a usage write waits for another connection's write transaction (an upload job's).
    busy_timeout = 2.0

    def __init__(self, db: Callable[[], Database], backend: Backend) -> None:
        self._db = db
        self._backend = backend
        self._write_db: Database | None = None
        self._lock = threading.Lock()
        self._pending: list[_Row] = []  # rows a busy store refused, written next

    def record(self, command: str, ledger: UsageLedger) -> None:
        """Record a finished run's usage; when the store stays busy the rows are kept, written
        ahead of the next usage write (or at :meth:`close`), and one warning line says so."""
        if not self._store(command, ledger.stages):
            logging.getLogger("unirag").warning(
                "the workspace store is busy: the usage of '%s' is kept and recorded with the next write", command)

    def ledger(self, command: str) -> UsageLedger:
        """A ledger whose usage reaches the usage table as calls finish (see :class:`UsageLedger`);
        call its ``flush()`` when the run ends, killed or not."""
        return UsageLedger(sink=lambda delta: self._store(command, delta, keep=False))

    def by_stage(self) -> dict[str, StageUsage]:
        """Cumulative usage of every recorded run, per stage."""
        totals: dict[str, StageUsage] = {}
        for stage, blob in self._db().execute("SELECT stage, usage FROM usage ORDER BY id"):
            totals.setdefault(stage, StageUsage()).add(StageUsage(**json.loads(blob)))
        return totals

    def record_index_cost(self, record: dict[str, Any]) -> None:
        """Keep the last paid indexing run's estimate beside what it used (``unirag stats``)."""
        db = self._db()
        with db:
            write_meta(db, "last_index_cost", json.dumps(record))

    def last_index_cost(self) -> dict[str, Any] | None:
        value = read_meta(self._db(), "last_index_cost")
        return json.loads(value) if value is not None else None

    def close(self) -> None:
        """Write the rows kept from refused writes (one warning when the store is still busy)
        and close the book's connection."""
        with self._lock:
            if self._pending and not self._write(self._pending):
                logging.getLogger("unirag").warning(
                    "the workspace store stayed busy: %d rows of usage were not recorded", len(self._pending))
            self._pending = []
            if self._write_db is not None:
                self._write_db.close()
                self._write_db = None

    def _store(self, command: str, stages: dict[str, StageUsage], keep: bool = True) -> bool:
        """Insert one delta of usage, and the rows kept from refused writes before it. False
        when the store stays busy: ``keep`` keeps the rows here for the next write; without
        it the caller (a ledger) hands the same usage over again later."""
        now = time.time()
        rows = [(command, stage, json.dumps(usage.to_json()), now) for stage, usage in stages.items()]
        with self._lock:
            if self._write(self._pending + rows):
                self._pending = []
                return True
            if keep:
                self._pending += rows
            return False

    def _write(self, rows: list[_Row]) -> bool:
        """Under ``_lock``: one transaction of ``rows``; False when the store is locked."""
        if not rows:
            return True
        if self._write_db is None:
            self._db()  # the tables exist before the first delta
            self._write_db = self._backend.connect(busy_timeout=self.busy_timeout)
        try:
            with self._write_db:
                self._write_db.executemany(
                    "INSERT INTO usage (command, stage, usage, created) VALUES (?, ?, ?, ?)", rows)
        except self._backend.busy_errors:  # "database is locked" past the busy timeout
            return False
        return True
