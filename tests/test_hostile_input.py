"""Issue 29 §3 items 1, 7, 8 and 10: input a user or another website can send is one clear
line (or a replaced character), never ``internal error``, and loses nothing else.

1. a lone surrogate (``"\\ud800"`` in JSON) in a document or a question;
7. a zip bomb in a DOCX file;
8. JSON nested deeper than the reader allows;
10. the same text under two file names, and a question of only NUL / control characters.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from fakes import HashEmbedder, ScriptedChat
from test_cli import assert_one_line_error, fakes, ok, run  # noqa: F401 (fixtures)

from unirag import QuestionError, UniRAG
from unirag.config import LoaderSettings
from unirag.text.clean import replace_unencodable
from unirag.text.loaders import load_documents

SURROGATE = "\ud800"


def _write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    """JSON escapes every non-ASCII character (``ensure_ascii``): a lone surrogate is written
    as the six characters ``\\ud800``, as a scraper's JSON export would hold it."""
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="ascii")
    return path


# -- item 1: lone surrogates ----------------------------------------------------------------------


def test_replace_unencodable_counts_and_joins_pairs() -> None:
    assert replace_unencodable("plain") == ("plain", 0)
    assert replace_unencodable(f"a{SURROGATE}b{SURROGATE}") == ("a\ufffdb\ufffd", 2)
    assert replace_unencodable("\ud83d\ude00 and \ufffd") == ("\U0001f600 and \ufffd", 0)  # a pair is a character


def test_cli_indexes_every_record_when_one_holds_a_lone_surrogate(tmp_path: Path, fakes: dict[str, Any]) -> None:
    records = [{"id": f"r{i}", "title": f"Record {i}", "text": f"Animal number {i} lives somewhere else."}
               for i in range(51)]
    records[17]["text"] = f"The quokka {SURROGATE} lives on Rottnest Island."
    records[30]["title"] = f"Title {SURROGATE}"
    source = _write_jsonl(tmp_path / "scraped.jsonl", records)
    result = ok("index", source, "-w", tmp_path / "ws", "--json")
    assert json.loads(result.stdout)["documents_added"] == 51
    warnings = [line for line in result.stderr.splitlines() if "U+FFFD" in line]
    assert len(warnings) == 1, result.stderr
    assert str(source) in warnings[0] and "replaced 2 invalid characters" in warnings[0]
    answer = json.loads(ok("query", f"Where does the quokka {SURROGATE} live?", "-w", tmp_path / "ws",
                           "-m", "vanilla", "--json").stdout)
    assert answer["answer"]


def test_api_takes_records_and_questions_with_lone_surrogates(tmp_path: Path) -> None:
    with UniRAG(tmp_path / "ws", chat_backend=ScriptedChat(), embedding_backend=HashEmbedder()) as rag:
        report = rag.index(documents=[{"title": f"Quokka {SURROGATE}", "text": f"The quokka {SURROGATE} is small.",
                                       "id": f"q{SURROGATE}"}])
        assert report.ingest.documents_added == 1
        assert any("U+FFFD" in warning for warning in report.ingest.warnings)
        assert rag.query(f"What is the quokka{SURROGATE}?", "vanilla").answer


def _json_body(body: Any) -> dict[str, Any]:
    """A request body as a JSON client sends it: ASCII, the surrogate as a ``\\ud800`` escape."""
    return {"content": json.dumps(body).encode("ascii"), "headers": {"content-type": "application/json"}}


def test_http_upload_and_questions_with_lone_surrogates(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    from server_harness import running_server, scripted_rag, wait_for_job

    scraped = json.dumps({"title": "Quokka", "text": f"The quokka {SURROGATE} lives on Rottnest Island."})
    with scripted_rag(tmp_path / "ws") as rag, running_server(rag) as url, \
            httpx.Client(base_url=url, timeout=60) as client:
        upload = client.post("/documents", files={"files": ("scraped.jsonl", scraped.encode("ascii"), "text/plain")})
        assert upload.status_code == 202, upload.text
        job = wait_for_job(client, upload.json()["job"]["id"])
        assert job["state"] == "done" and job["report"]["documents_added"] == 1, job
        kiwi = [{"title": f"Kiwi {SURROGATE}", "text": f"The kiwi {SURROGATE} lives in New Zealand."}]
        records = client.post("/documents", **_json_body(kiwi))
        assert wait_for_job(client, records.json()["job"]["id"])["state"] == "done"
        question = f"Where does the quokka {SURROGATE} live?"
        chat = client.post("/v1/chat/completions", **_json_body(
            {"model": "vanilla", "messages": [{"role": "user", "content": question}]}))
        assert chat.status_code == 200, chat.text
        assert chat.json()["choices"][0]["message"]["content"]
        # /query's typed body is read by pydantic, which refuses the escape itself: a clear 422, not a 500
        query = client.post("/query", **_json_body({"question": question, "method": "vanilla"}))
        assert query.status_code == 422 and "body.question" in query.json()["error"]["message"], query.text
        refused = client.post("/query", **_json_body({"question": "\u0000\u0000", "method": "vanilla"}))
        assert refused.status_code == 400 and "no text" in refused.json()["error"]["message"], refused.text
        refused = client.post("/v1/chat/completions", **_json_body(
            {"model": "vanilla", "messages": [{"role": "user", "content": "\u0000 \u0001"}]}))
        assert refused.status_code == 400 and "no text" in refused.json()["error"]["message"], refused.text


# -- item 10: questions of nothing ----------------------------------------------------------------


@pytest.mark.parametrize("question", ["\x00", "\x00\x00\x00", " \x00\t\x1b\u200b ", "\ufeff"])
def test_cli_refuses_a_question_of_only_control_characters(tmp_path: Path, fakes: dict[str, Any],
                                                           question: str) -> None:
    ws = tmp_path / "ws"
    ok("index", _write_jsonl(tmp_path / "a.jsonl", [{"text": "The quokka lives on Rottnest Island."}]), "-w", ws, "-q")
    result = run("query", question, "-w", ws, "-m", "vanilla")
    assert result.exit_code == 2
    assert_one_line_error(result, "the question has no text")
    assert fakes["chats"][-1].calls == 0 and fakes["embedders"][-1].calls == 0


def test_api_refuses_a_question_of_only_control_characters(tmp_path: Path) -> None:
    chat = ScriptedChat()
    with UniRAG(tmp_path / "ws", chat_backend=chat, embedding_backend=HashEmbedder()) as rag:
        rag.index(documents=[{"text": "The quokka lives on Rottnest Island."}])
        for question in ("\x00", "\x00 \x7f", SURROGATE):
            with pytest.raises(QuestionError, match="no text"):
                rag.query(question, "vanilla")
        assert chat.calls == 0


# -- item 8: JSON nested too deeply ---------------------------------------------------------------

DEPTHS = pytest.mark.parametrize("depth", [1_000, 100_000, 5_000_000])


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


@DEPTHS
def test_cli_skips_deep_json_with_one_line_and_indexes_the_rest(tmp_path: Path, fakes: dict[str, Any],
                                                                depth: int) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "deep.json").write_text(_deep(depth))
    (corpus / "lines.jsonl").write_text(f'{{"text": "The okapi lives in the Congo."}}\n{_deep(depth)}\n')
    (corpus / "good.txt").write_text("The quokka lives on Rottnest Island.")
    result = ok("index", corpus, "-w", tmp_path / "ws", "--json")
    assert json.loads(result.stdout)["documents_added"] == 2
    deep = [line for line in result.stderr.splitlines() if "nested too deeply" in line]
    assert len(deep) == 2 and "deep.json" in deep[0] and "lines.jsonl:2" in deep[1], result.stderr
    assert "internal error" not in result.stderr


def test_cli_index_of_only_deep_json_is_one_error_line(tmp_path: Path, fakes: dict[str, Any]) -> None:
    (tmp_path / "deep.json").write_text(_deep(5_000_000))
    result = run("index", tmp_path / "deep.json", "-w", tmp_path / "ws")
    line = assert_one_line_error(result, "no readable documents", "1 JSON nested too deeply")
    assert "internal error" not in line and "RecursionError" not in result.stderr


def test_http_deep_json_is_400(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    from server_harness import running_server, scripted_rag, wait_for_job

    deep = _deep(100_000).encode()
    with scripted_rag(tmp_path / "ws") as rag, running_server(rag) as url, \
            httpx.Client(base_url=url, timeout=60) as client:
        upload = client.post("/documents", files={"files": ("deep.json", deep, "application/json")})
        assert upload.status_code == 400 and "nested too deeply" in upload.json()["error"]["message"], upload.text
        records = client.post("/documents", content=deep, headers={"content-type": "application/json"})
        assert records.status_code == 400 and "nested too deeply" in records.json()["error"]["message"], records.text
        chat = client.post("/v1/chat/completions", content=deep, headers={"content-type": "application/json"})
        assert chat.status_code in (400, 422) and "internal error" not in chat.text, chat.text


# -- item 7: zip bombs ----------------------------------------------------------------------------


def _bomb_docx(path: Path, padding_mb: int) -> Path:
    """A valid DOCX whose document.xml carries ``padding_mb`` MB of spaces between elements: it
    stores in a few KB and inflates to the padding (a real bomb is the same, only larger)."""
    import zipfile

    docx = pytest.importorskip("docx")
    document = docx.Document()
    document.add_paragraph("The bomb says nothing.")
    document.save(str(path))
    with zipfile.ZipFile(path) as archive:
        parts = {info.filename: archive.read(info) for info in archive.infolist()}
    body = parts["word/document.xml"]
    at = body.rindex(b"</w:body>")
    parts["word/document.xml"] = body[:at] + b" " * (padding_mb * 1_000_000) + body[at:]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in parts.items():
            archive.writestr(name, data)
    return path


def _bomb_corpus(tmp_path: Path, padding_mb: int) -> Path:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    _bomb_docx(corpus / "bomb.docx", padding_mb)
    (corpus / "quokka.txt").write_text("The quokka lives on Rottnest Island.")
    (corpus / "okapi.jsonl").write_text('{"text": "The okapi lives in the Congo."}\n')
    return corpus


def test_cli_skips_a_docx_zip_bomb_by_ratio_and_indexes_the_rest(tmp_path: Path, fakes: dict[str, Any]) -> None:
    corpus = _bomb_corpus(tmp_path, padding_mb=5)  # ~5 KB stored, 5 MB inflated: ratio ~1000:1
    result = ok("index", corpus, "-w", tmp_path / "ws", "--json")
    assert json.loads(result.stdout)["documents_added"] == 2
    bombs = [line for line in result.stderr.splitlines() if "bomb.docx" in line]
    assert len(bombs) == 1 and "loader.max_compression_ratio (100)" in bombs[0] and "skipped" in bombs[0], result.stderr


def test_cli_skips_a_docx_over_the_inflated_bound(tmp_path: Path, fakes: dict[str, Any],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UNIRAG_LOADER_MAX_INFLATED_MB", "2")  # a small bound keeps the test's file small
    corpus = _bomb_corpus(tmp_path, padding_mb=3)
    result = ok("index", corpus, "-w", tmp_path / "ws", "--json")
    assert json.loads(result.stdout)["documents_added"] == 2
    bombs = [line for line in result.stderr.splitlines() if "bomb.docx" in line]
    assert len(bombs) == 1 and "loader.max_inflated_mb (2)" in bombs[0], result.stderr


def test_a_docx_that_lies_about_its_size_is_unreadable_not_inflated(tmp_path: Path) -> None:
    """The central directory says document.xml is 1 KB; its data inflates to 3 MB. zipfile stops
    at the declared size and the CRC fails: the file is skipped as damaged, nothing is inflated."""
    import struct

    path = _bomb_docx(tmp_path / "liar.docx", padding_mb=3)
    data = bytearray(path.read_bytes())
    name = b"word/document.xml"
    at = 0
    while (at := data.find(b"PK\x01\x02", at)) != -1:  # every central directory entry
        name_length = struct.unpack_from("<H", data, at + 28)[0]
        if data[at + 46:at + 46 + name_length] == name:
            struct.pack_into("<I", data, at + 24, 1000)  # uncompressed size
        at += 4
    path.write_bytes(bytes(data))
    (tmp_path / "good.txt").write_text("The quokka lives on Rottnest Island.")
    warnings: list[str] = []
    docs = list(load_documents([path, tmp_path / "good.txt"], loader=LoaderSettings(), warn=warnings.append))
    assert [doc.title for doc in docs] == ["good"]
    assert len(warnings) == 1 and "liar.docx: unreadable DOCX" in warnings[0], warnings


# -- item 10: the same text under two file names ---------------------------------------------------


def test_same_text_under_two_file_names_is_one_document_and_deleting_one_file_keeps_it(
        tmp_path: Path, fakes: dict[str, Any]) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    text = "The quokka lives on Rottnest Island, near Perth."
    (corpus / "quokka.txt").write_text(text)
    (corpus / "copy of quokka.txt").write_text(text + "\n")  # whitespace does not make it new text
    (corpus / "okapi.txt").write_text("The okapi lives in the Congo.")
    ws = tmp_path / "ws"
    report = json.loads(ok("index", corpus, "-w", ws, "--json").stdout)
    assert (report["documents_added"], report["duplicates_skipped"]) == (2, 1)
    docs = json.loads(ok("documents", "-w", ws, "--json").stdout)
    shared = next(doc for doc in docs if len(doc["sources"]) == 2)
    assert sorted(Path(source).name for source in shared["sources"]) == ["copy of quokka.txt", "quokka.txt"]

    again = tmp_path / "later.txt"  # a third copy in a later run is recognised too
    again.write_text(text)
    later = json.loads(ok("index", again, "-w", ws, "--json").stdout)
    assert later["documents_added"] == 0

    removed = json.loads(ok("delete", corpus / "quokka.txt", "-w", ws, "--json").stdout)
    assert removed["documents_removed"] == 0  # the copies still provide the text
    docs = json.loads(ok("documents", "-w", ws, "--json").stdout)
    assert len(docs) == 2
    kept = next(doc for doc in docs if doc["id"] == shared["id"])
    assert sorted(Path(source).name for source in kept["sources"]) == ["copy of quokka.txt", "later.txt"]
    ok("delete", corpus / "copy of quokka.txt", "-w", ws)
    assert json.loads(ok("delete", again, "-w", ws, "--json").stdout)["documents_removed"] == 1
    assert [doc["title"] for doc in json.loads(ok("documents", "-w", ws, "--json").stdout)] == ["okapi"]


def test_a_document_id_deletes_the_text_whatever_provides_it(tmp_path: Path, fakes: dict[str, Any]) -> None:
    for name in ("a.txt", "b.txt"):
        (tmp_path / name).write_text("The okapi lives in the Congo.")
    ws = tmp_path / "ws"
    ok("index", tmp_path / "a.txt", tmp_path / "b.txt", "-w", ws, "-q")
    [doc] = json.loads(ok("documents", "-w", ws, "--json").stdout)
    assert json.loads(ok("delete", doc["id"], "-w", ws, "--json").stdout)["documents_removed"] == 1


def test_a_file_title_is_no_content_but_a_written_title_is(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("Same text.")
    (tmp_path / "b.md").write_text("Same text.")
    (tmp_path / "c.jsonl").write_text('{"title": "A", "text": "Same text."}\n{"title": "B", "text": "Same text."}\n')
    docs = list(load_documents([tmp_path]))
    assert len(docs) == 4 and len({doc.id for doc in docs}) == 3  # a.txt = b.md; titled records differ


def test_http_delete_by_source_keeps_text_another_source_holds(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    from server_harness import running_server, scripted_rag, wait_for_job

    for name in ("a.txt", "b.txt"):
        (tmp_path / name).write_text("The okapi lives in the Congo.")
    with scripted_rag(tmp_path / "ws") as rag:
        rag.index([tmp_path / "a.txt", tmp_path / "b.txt"])
        with running_server(rag) as url, httpx.Client(base_url=url, timeout=60) as client:
            source = str((tmp_path / "a.txt").resolve())
            removed = client.delete(f"/documents/{source}")
            assert removed.status_code == 202, removed.text
            assert wait_for_job(client, removed.json()["job"]["id"])["report"]["documents_removed"] == 0
            [doc] = client.get("/documents").json()
            assert doc["sources"] == [str((tmp_path / "b.txt").resolve())]
