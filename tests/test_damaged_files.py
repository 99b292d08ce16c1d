"""A damaged model cache is set aside with one warning; a damaged store is one error line naming it.

Issue 17: a truncated or corrupt ``cache/llm.sqlite`` or ``store.sqlite`` gave ``internal
error: DatabaseError: database disk image is malformed`` without naming the file, and
``stats`` on a damaged page printed stored text in its error.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fakes import HashEmbedder, ScriptedChat, small_corpus
from test_cli import assert_one_line_error, ok, run

import unirag.llm.cache as cache_module
import unirag.llm.factory as factory
from unirag.llm.cache import ResponseCache

PAGE = 4096
QUESTION = ("query", "Where does the quokka live?", "-m", "vanilla", "--json")


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Indexed through the CLI's own ``_stack`` (so its warning line is the CLI's), with fake models."""
    real = factory.build_stack
    monkeypatch.setattr(factory, "build_stack", lambda settings, cache, **options: real(
        settings, cache, chat=ScriptedChat(), embedder=HashEmbedder(), **options))
    ws = tmp_path / "ws"
    ok("index", small_corpus(tmp_path), "-w", ws, "-q")
    ok(QUESTION[0], QUESTION[1], "-w", ws, *QUESTION[2:])  # the cache now holds an answer
    return ws


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def garbage_pages(path: Path) -> None:
    """Overwrite every page but the header page with text: a bad disk, a bad copy."""
    data = bytearray(path.read_bytes())
    for start in range(PAGE, len(data), PAGE):
        data[start:start + PAGE] = (b"garbage " * (PAGE // 8))[: len(data) - start]
    path.write_bytes(bytes(data))


DAMAGE = pytest.mark.parametrize("damage", [truncate, garbage_pages], ids=["truncated", "garbage-pages"])


@DAMAGE
def test_damaged_cache_is_set_aside_and_the_query_answers(workspace: Path, damage: Callable[[Path], None]) -> None:
    cache = workspace / "cache" / "llm.sqlite"
    assert not cache.with_name("llm.sqlite-wal").exists()
    damage(cache)
    result = ok(QUESTION[0], QUESTION[1], "-w", workspace, *QUESTION[2:])
    assert json.loads(result.stdout)["answer"]
    warnings = [line for line in result.stderr.splitlines() if "cache" in line]
    assert len(warnings) == 1 and warnings[0].startswith("unirag: warning: the model cache"), result.stderr
    assert str(cache) in warnings[0] and "llm.sqlite.corrupt-" in warnings[0]
    assert len(list(cache.parent.glob("llm.sqlite.corrupt-*"))) == 1
    again = ok(QUESTION[0], QUESTION[1], "-w", workspace, *QUESTION[2:])  # the new cache serves it now
    assert "warning" not in again.stderr and json.loads(again.stdout)["usage"]["cache_hits"] == 1
    assert json.loads(ok("stats", "-w", workspace, "--json").stdout)["cache"]["chat_responses"] >= 1


@DAMAGE
@pytest.mark.parametrize("command", [("stats",), QUESTION, ("index",)], ids=["stats", "query", "index"])
def test_damaged_store_is_one_line_naming_it(workspace: Path, damage: Callable[[Path], None],
                                            command: tuple[str, ...]) -> None:
    store = workspace / "store.sqlite"
    damage(store)
    result = run(*command[:2], "-w", workspace, *command[2:])
    line = assert_one_line_error(result, str(store), "is damaged", "restore it from a backup", "new workspace")
    assert "internal error" not in line
    assert store.is_file()  # the store is the user's: never moved or deleted


def test_damaged_store_text_never_reaches_the_error(workspace: Path) -> None:
    """A stored value that is not UTF-8 any more: sqlite's message would quote it."""
    store = workspace / "store.sqlite"
    data = store.read_bytes()
    assert b'"inputs"' in data
    store.write_bytes(data.replace(b'"inputs"', b'"\xff\xfeputs"'))
    line = assert_one_line_error(run("stats", "-w", workspace), str(store), "not valid UTF-8")
    assert "puts" not in line and "{" not in line


def test_cache_damaged_while_in_use_is_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Damage met by a read (the open-time check skipped, as for a large cache) is a miss and one
    warning; writes go on in the new file."""
    path = tmp_path / "cache" / "llm.sqlite"
    cache = ResponseCache(path)
    for n in range(200):
        cache.put_chat(f"k{n}", "m", "s", {"text": "x" * 200})
    cache.close()
    garbage_pages(path)
    monkeypatch.setattr(cache_module, "QUICK_CHECK_MAX_BYTES", 0)
    said: list[str] = []
    cache = ResponseCache(path, warn=said.append)
    assert cache.get_chat("k150") is None
    assert len(said) == 1 and "damaged" in said[0] and "corrupt-" in said[0]
    cache.put_chat("k1", "m", "s", {"text": "new"})
    assert cache.get_chat("k1") == {"text": "new"} and cache.counts()["chat_responses"] == 1
    cache.close()


def test_open_time_check_finds_a_damaged_cache(tmp_path: Path) -> None:
    path = tmp_path / "llm.sqlite"
    cache = ResponseCache(path)
    for n in range(200):
        cache.put_chat(f"k{n}", "m", "s", {"text": "x" * 200})
    cache.close()
    garbage_pages(path)
    said: list[str] = []
    ResponseCache(path, warn=said.append).close()
    assert len(said) == 1 and [p.name.split("-")[0] for p in tmp_path.glob("*.corrupt-*")] == ["llm.sqlite.corrupt"]


def test_cache_warning_outside_the_cli_is_a_python_warning(tmp_path: Path) -> None:
    path = tmp_path / "llm.sqlite"
    path.write_bytes(b"not a database at all " * 500)
    with pytest.warns(RuntimeWarning, match="not a database file"):
        cache: Any = ResponseCache(path)
    assert cache.counts() == {"chat_responses": 0, "embeddings": 0}
    cache.close()
