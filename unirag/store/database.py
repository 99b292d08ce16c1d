"""What a store's database offers the classes that keep their tables in it.

The SQL of those classes is written once, in the subset SQLite (3.24+) and PostgreSQL
share: ``?`` placeholders (a PostgreSQL connection translates them), ``INSERT ... ON
CONFLICT DO NOTHING``, standard functions. Three things cannot be written once, and a
:class:`Dialect` says them: the column types of a ``CREATE TABLE``, "replace this row"
(SQLite's ``INSERT OR REPLACE`` moves the row to the end of the table; the PostgreSQL
twin does the same, so a scan returns rows in the same order on both stores) and the
column that orders a scan by insertion (SQLite's ``rowid``; a hidden ``_row`` identity
column that every PostgreSQL table gets).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol


class Cursor(Protocol):
    """The part of a DB-API cursor the store classes use."""

    rowcount: int

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Database(Protocol):
    """One connection to a workspace's database.

    ``with db:`` is one transaction (committed on success, rolled back on an error);
    statements outside one commit on their own. ``where`` names the database in messages
    (a file, or ``postgresql://user@host:port/db schema S``; never a password)."""

    dialect: Dialect
    where: str
    #: component -> schema version already checked on this connection (see :mod:`unirag.store.schema`)
    known_versions: dict[str, int]

    def execute(self, sql: str, parameters: Sequence[Any] = ()) -> Cursor: ...

    def executemany(self, sql: str, seq_of_parameters: Iterable[Sequence[Any]]) -> Cursor: ...

    def executescript(self, sql_script: str) -> Any:
        """Run DDL statements written with SQLite's types (the dialect translates them)."""
        ...

    def commit(self) -> None: ...

    def table_columns(self, table: str) -> list[str]:
        """The columns of ``table`` in order (empty when there is no such table)."""
        ...

    def tables(self) -> list[str]:
        """Every table of this workspace's database, sorted."""
        ...

    def continue_identities(self, table: str) -> None:
        """After rows were copied into ``table`` with their generated ids, new rows follow them."""
        ...

    def close(self) -> None: ...

    def __enter__(self) -> Any: ...

    def __exit__(self, *exc_info: Any) -> Any: ...


class WriterLock(Protocol):
    """One writer per workspace, many readers: a file lock (SQLite) or an advisory lock (PostgreSQL)."""

    def hold(self, wait: float, on_wait: Any) -> AbstractContextManager[None]:
        """Hold the lock for the ``with`` block, waiting up to ``wait`` seconds for another writer
        (said once through ``on_wait``); a one-line :class:`~unirag.errors.WorkspaceError` else."""
        ...

    def held_elsewhere(self) -> bool:
        """Whether another writer holds it now (a probe that takes and gives it back at once)."""
        ...


@dataclass(frozen=True)
class Dialect:
    """The facts of one SQL dialect the shared SQL cannot spell once (see the module doc)."""

    name: str
    #: the expression that orders a full scan of a table by insertion
    insertion_order: str

    def replace_into(self, table: str, columns: Sequence[str], key: Sequence[str]) -> str:
        """``INSERT`` of one row that replaces the row with the same ``key`` (moved to the end)."""
        names = ", ".join(columns)
        marks = ", ".join("?" * len(columns))
        if self.name == "sqlite":
            return f"INSERT OR REPLACE INTO {table} ({names}) VALUES ({marks})"
        updates = ", ".join(f"{column} = excluded.{column}" for column in columns if column not in key)
        return (f"INSERT INTO {table} ({names}) VALUES ({marks}) ON CONFLICT ({', '.join(key)}) "
                f"DO UPDATE SET {updates}, {self.insertion_order} = DEFAULT")

    def json_array_length(self, column: str) -> str:
        """The length of the JSON array stored as text in ``column``."""
        return f"json_array_length({column})" if self.name == "sqlite" else f"json_array_length({column}::json)"


SQLITE = Dialect("sqlite", "rowid")
POSTGRESQL = Dialect("postgresql", "_row")
