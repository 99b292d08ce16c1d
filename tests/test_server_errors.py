"""A PostgreSQL store that stops answering is one store line over HTTP too, never ``internal error``."""

from __future__ import annotations

import pytest

from unirag.server.errors import internal_message

psycopg = pytest.importorskip("psycopg")


def test_a_dead_store_is_named_not_an_internal_error() -> None:
    message = internal_message(psycopg.OperationalError("server closed the connection unexpectedly"))
    assert not message.startswith("internal error")
    assert "PostgreSQL store" in message and "\n" not in message


def test_other_failures_stay_internal_errors() -> None:
    assert internal_message(ValueError("boom")) == "internal error: ValueError: boom"
