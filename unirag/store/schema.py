"""Schema versions: each component's tables carry a version and ordered migrations.

A component (the workspace's corpus tables, the graph tables, the community tables,
the model cache, the artifact blobs) lists its :class:`Migration` s in order; the
``schema_versions`` table records the last one applied. Opening a store applies the
ones it lacks, in order, and refuses a store written by a newer unirag (its tables
could hold what this version would misread).

Workspaces from before versions have no ``schema_versions`` row: every migration
then runs from the first, so each is written to find its change possibly made
already (``CREATE TABLE IF NOT EXISTS``, a column looked up before it is added).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from unirag.errors import WorkspaceError
from unirag.store.database import Database

VERSIONS_TABLE = """
CREATE TABLE IF NOT EXISTS schema_versions (component TEXT PRIMARY KEY, version INTEGER, name TEXT, applied REAL);
"""


@dataclass(frozen=True)
class Migration:
    """Step ``version`` of a component's schema (``name`` says what it does)."""

    version: int
    name: str
    apply: Callable[[Database], None]


def tables_migration(version: int, name: str, ddl: str) -> Migration:
    """A migration that creates tables and indices (``CREATE ... IF NOT EXISTS``)."""
    return Migration(version, name, lambda db: db.executescript(ddl))


def schema_version(db: Database, component: str) -> int:
    """The version of ``component``'s tables in ``db`` (0: none recorded)."""
    if not db.table_columns("schema_versions"):
        return 0
    row = db.execute("SELECT version FROM schema_versions WHERE component = ?", (component,)).fetchone()
    return int(row[0]) if row else 0


def ensure_schema(db: Database, component: str, migrations: Sequence[Migration]) -> None:
    """Bring ``component``'s tables to the last of ``migrations`` (once per connection).

    Each migration is applied, then recorded in one transaction with what it wrote where
    the database allows DDL in transactions (PostgreSQL); on SQLite a migration is written
    to be safe to run again (see the module doc), so a crash between the two is harmless."""
    latest = migrations[-1].version
    if db.known_versions.get(component) == latest:
        return
    db.executescript(VERSIONS_TABLE)
    current = schema_version(db, component)
    if current > latest:
        raise WorkspaceError(
            f"the {component} tables of {db.where} are at schema version {current}, newer than this unirag "
            f"knows ({latest}): upgrade unirag"
        )
    for migration in migrations:
        if migration.version <= current:
            continue
        with db:
            migration.apply(db)
            db.execute(db.dialect.replace_into("schema_versions", ("component", "version", "name", "applied"),
                                               ("component",)),
                       (component, migration.version, migration.name, time.time()))
    db.known_versions[component] = latest
