"""Where a workspace's tables live: the ``store`` setting, read once.

``sqlite`` (the default): ``WS/store.sqlite`` beside the settings. ``postgresql://user@host:port/db``:
a PostgreSQL server, in a schema of its own so that many workspaces share one database;
the schema is ``?schema=NAME`` of the URL, else ``unirag_`` + the workspace directory's
name. The workspace directory still holds the settings, the logs and a local copy of
the artifact files (:mod:`unirag.store.artifact_files`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from unirag.errors import ConfigError

STORE_FILE = "store.sqlite"
POSTGRES_SCHEMES = ("postgresql", "postgres")
_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


@dataclass(frozen=True)
class StoreLocation:
    """``kind`` is ``sqlite`` or ``postgresql``; ``url`` (PostgreSQL: without the schema
    parameter) and ``schema`` are empty for SQLite."""

    kind: str
    url: str = ""
    schema: str = ""

    @property
    def is_postgres(self) -> bool:
        return self.kind == "postgresql"

    def describe(self, root: Path) -> str:
        """The store in words for messages: the file, or the URL without its password and the schema."""
        if not self.is_postgres:
            return str(root / STORE_FILE)
        parts = urlsplit(self.url)
        user = f"{parts.username}@" if parts.username else ""
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
        return f"{parts.scheme}://{user}{host}{port}{parts.path} schema {self.schema}"


SQLITE_STORE = StoreLocation("sqlite")
#: libpq reads a password from here (or ``~/.pgpass``) when the URL has none.
PASSWORD_ENV = "PGPASSWORD"


def without_password(value: str) -> tuple[str, bool]:
    """The ``store`` setting ``value`` fit to be written into a settings file: a PostgreSQL
    URL without its password, and whether it had one (a file is read by whoever can list the
    directory; the password comes from :data:`PASSWORD_ENV` or ``~/.pgpass`` instead)."""
    parts = urlsplit(value.strip())
    if parts.scheme not in POSTGRES_SCHEMES or not parts.password:
        return value.strip(), False
    host = parts.netloc.rsplit("@", 1)[1]
    user = f"{parts.username}@" if parts.username else ""
    return urlunsplit(parts._replace(netloc=user + host)), True


def parse_store(value: str, root: Path) -> StoreLocation:
    """The location the ``store`` setting names for the workspace at ``root``; a one-line
    :class:`ConfigError` for anything else."""
    value = value.strip()
    if value in ("", "sqlite"):
        return SQLITE_STORE
    parts = urlsplit(value)
    if parts.scheme not in POSTGRES_SCHEMES:
        raise ConfigError(f"store must be 'sqlite' or a postgresql://user@host:port/db URL, got '{parts.scheme}:...'")
    query = parse_qsl(parts.query, keep_blank_values=True)
    schema = next((v for k, v in query if k == "schema"), "") or default_schema(root)
    if not _SCHEMA_NAME.match(schema):
        raise ConfigError(f"store schema '{schema}' must be lower-case letters, digits and _ (at most 63)")
    rest = urlencode([(k, v) for k, v in query if k != "schema"])
    return StoreLocation("postgresql", urlunsplit(parts._replace(query=rest)), schema)


def default_schema(root: Path) -> str:
    """``unirag_`` + the workspace directory's name in lower-case letters, digits and _."""
    name = re.sub(r"[^a-z0-9_]+", "_", Path(root).resolve().name.lower()).strip("_") or "workspace"
    return ("unirag_" + name)[:63]
