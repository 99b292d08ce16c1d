"""Issue 32 §1: uploads are ingested as ``unirag index`` ingests files, over real HTTP.

Every format the CLI reads is accepted (PDF, DOCX, HTML, CSV built here), read by the same
loaders; each upload records a logical source ``upload:COLLECTION/NAME``, so a changed file
uploaded again replaces its document (old text gone from retrieval), an unchanged one changes
nothing, and ``DELETE /documents/upload:...`` removes it. A mislabelled or hostile upload is a
one-line 4xx and loses nothing; a logical source is never a path (``--sync`` leaves it alone).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fakes import N_DOCUMENTS, small_corpus
from server_harness import running_server, scripted_rag, wait_for_job
from test_document_formats import write_docx, write_pdf
from test_hostile_input import _bomb_docx

from unirag.server.settings import ServerSettings

pytest.importorskip("fastapi")

EIFFEL = b"# Eiffel\n\nThe Eiffel Tower was painted in Venetian red by its builders.\n"
EIFFEL_EDITED = b"# Eiffel\n\nThe Eiffel Tower is now painted in bronze, three shades of it.\n"
EVERYTHING = 100  # the server's max_top_k: retrieval then returns every chunk there is


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[httpx.Client, Any]]:
    """A client of a server on a workspace holding the small corpus (indexed by the CLI's path)."""
    with scripted_rag(tmp_path / "ws") as rag:
        rag.index(small_corpus(tmp_path))
        with running_server(rag, ServerSettings(max_upload_bytes=2_000_000)) as url, \
                httpx.Client(base_url=url, timeout=60) as client:
            yield client, rag


def upload(client: httpx.Client, files: list[tuple[str, bytes]], collection: str | None = None) -> dict[str, Any]:
    """POST the files, wait for the index job; returns the job (done)."""
    data = {"collection": collection} if collection is not None else None
    accepted = client.post("/documents", files=[("files", (name, body, "application/octet-stream"))
                                                for name, body in files], data=data)
    assert accepted.status_code == 202, accepted.text
    job = wait_for_job(client, accepted.json()["job"]["id"])
    assert job["state"] == "done", job
    return job


def uploaded(client: httpx.Client) -> dict[str, dict[str, Any]]:
    """The stored documents with an upload source, by source."""
    return {source: doc for doc in client.get("/documents").json()
            for source in doc["sources"] if source.startswith("upload:")}


def retrieved_text(client: httpx.Client) -> str:
    """Every chunk's text retrieval can return (top_k above the corpus size)."""
    answer = client.post("/query", json={"question": "Which tower, which colour?", "retrieve_only": True,
                                         "top_k": EVERYTHING})
    assert answer.status_code == 200, answer.text
    return "\n".join(item["text"] for item in answer.json()["context"])


def assert_error(response: httpx.Response, status: int, contains: str = "") -> None:
    assert response.status_code == status, response.text
    message = response.json()["error"]["message"]
    assert "\n" not in message and contains in message, message


def test_pdf_docx_html_and_csv_uploads_are_indexed_with_their_sources(served: tuple[httpx.Client, Any],
                                                                      tmp_path: Path) -> None:
    client, _ = served
    write_pdf(tmp_path / "tower.pdf", "The Eiffel Tower stands in Paris.", title="Eiffel Tower")
    write_docx(tmp_path / "curie.docx", "Marie Curie", ["Marie Curie won two Nobel Prizes."])
    files = [("tower.pdf", (tmp_path / "tower.pdf").read_bytes()),
             ("curie.docx", (tmp_path / "curie.docx").read_bytes()),
             ("nile.html", b"<html><head><title>Nile facts</title></head><body><p>The Nile flows north.</p>"
                           b"<script>alert(1)</script></body></html>"),
             ("animals.csv", b"id,title,text\nq1,Quokka,The quokka lives on Rottnest Island.\n"
                             b"q2,Koala,The koala eats eucalyptus leaves.\n")]
    job = upload(client, files, collection="reports/2024")
    assert job["report"]["documents_added"] == 5, job["report"]
    docs = uploaded(client)
    assert sorted(docs) == ["upload:reports/2024/animals.csv#q1", "upload:reports/2024/animals.csv#q2",
                            "upload:reports/2024/curie.docx", "upload:reports/2024/nile.html",
                            "upload:reports/2024/tower.pdf"]
    assert docs["upload:reports/2024/tower.pdf"]["title"] == "Eiffel Tower"
    assert docs["upload:reports/2024/nile.html"]["title"] == "Nile facts"
    text = retrieved_text(client)
    for words in ("The Eiffel Tower stands in Paris.", "Marie Curie won two Nobel Prizes.", "The Nile flows north.",
                  "The quokka lives on Rottnest Island.", "Founded | 1889"):
        assert words in text
    assert "alert(1)" not in text
    # one record of the CSV by FILE#RECORD, then the rest of the collection by its prefix
    removed = client.delete("/documents/upload:reports/2024/animals.csv%23q2")
    assert removed.status_code == 202, removed.text
    assert wait_for_job(client, removed.json()["job"]["id"])["report"]["documents_removed"] == 1
    assert "upload:reports/2024/animals.csv#q2" not in uploaded(client)
    removed = client.delete("/documents/upload:reports")
    assert removed.status_code == 202 and len(removed.json()["documents"]) == 4, removed.text
    assert wait_for_job(client, removed.json()["job"]["id"])["report"]["documents_removed"] == 4
    assert uploaded(client) == {} and len(client.get("/documents").json()) == N_DOCUMENTS
    assert "won two Nobel Prizes" not in retrieved_text(client)


def test_a_changed_upload_replaces_its_document_and_an_unchanged_one_changes_nothing(
        served: tuple[httpx.Client, Any]) -> None:
    client, _ = served
    upload(client, [("eiffel.md", EIFFEL)])
    before = uploaded(client)
    assert list(before) == ["upload:eiffel.md"] and before["upload:eiffel.md"]["title"] == "eiffel"
    assert "Venetian red" in retrieved_text(client)
    stats = client.get("/stats").json()

    again = upload(client, [("eiffel.md", EIFFEL)])["report"]
    assert again["documents_added"] == 0 and again["documents_removed"] == 0 and again["rebuilt"] == []
    assert uploaded(client) == before and client.get("/stats").json() == stats

    edited = upload(client, [("eiffel.md", EIFFEL_EDITED)])["report"]
    assert edited["documents_added"] == 1 and edited["documents_removed"] == 1, edited
    after = uploaded(client)
    assert list(after) == ["upload:eiffel.md"] and after["upload:eiffel.md"]["id"] != before["upload:eiffel.md"]["id"]
    assert len(client.get("/documents").json()) == N_DOCUMENTS + 1  # one eiffel, not two
    text = retrieved_text(client)
    assert "bronze" in text and "Venetian red" not in text

    # the same name in another collection is another source
    upload(client, [("eiffel.md", EIFFEL)], collection="old")
    assert sorted(uploaded(client)) == ["upload:eiffel.md", "upload:old/eiffel.md"]
    removed = client.delete("/documents/upload:eiffel.md")
    assert wait_for_job(client, removed.json()["job"]["id"])["report"]["documents_removed"] == 1
    assert sorted(uploaded(client)) == ["upload:old/eiffel.md"]


def test_json_records_with_a_source_replace_that_source(served: tuple[httpx.Client, Any]) -> None:
    client, _ = served
    records = [{"id": "n1", "text": "The okapi is a relative of the giraffe.", "source": "notes.jsonl"},
               {"id": "n2", "text": "The tapir has a short trunk.", "source": "notes.jsonl"}]
    accepted = client.post("/documents", json=records)
    assert wait_for_job(client, accepted.json()["job"]["id"])["report"]["documents_added"] == 2
    assert sorted(uploaded(client)) == ["upload:notes.jsonl#n1", "upload:notes.jsonl#n2"]
    # the source's records now: n1 changed, n2 gone
    accepted = client.post("/documents", json={"documents": [
        {"id": "n1", "text": "The okapi lives in the Ituri forest.", "source": "notes.jsonl"}]})
    report = wait_for_job(client, accepted.json()["job"]["id"])["report"]
    assert report["documents_added"] == 1 and report["documents_removed"] == 2, report
    assert sorted(uploaded(client)) == ["upload:notes.jsonl#n1"]
    text = retrieved_text(client)
    assert "Ituri" in text and "giraffe" not in text and "short trunk" not in text
    removed = client.delete("/documents/upload:notes.jsonl")  # the file names its records
    assert wait_for_job(client, removed.json()["job"]["id"])["report"]["documents_removed"] == 1


def test_hostile_uploads_are_one_line_4xx_and_lose_nothing(served: tuple[httpx.Client, Any], tmp_path: Path) -> None:
    client, rag = served
    upload(client, [("eiffel.md", EIFFEL)])
    documents = client.get("/documents").json()
    bomb = _bomb_docx(tmp_path / "bomb.docx", padding_mb=5).read_bytes()  # ~5 KB inflating to 5 MB
    refusals = [
        (client.post("/documents", files={"files": ("bomb.docx", bomb)}), 413, "zip bomb"),
        (client.post("/documents", files={"files": ("fake.pdf", b"MZ\x90\x00 an executable")}), 415, "not a PDF"),
        (client.post("/documents", files={"files": ("fake.docx", b"%PDF-1.4 no zip")}), 415, "not a DOCX"),
        (client.post("/documents", files={"files": ("zip.docx", _zip_without_a_document())}), 415, "word/document.xml"),
        (client.post("/documents", files={"files": ("table.csv", "Ünïcode".encode("latin-1"))}), 415, "UTF-8"),
        (client.post("/documents", files={"files": ("../../etc/passwd.md", EIFFEL_EDITED)}), 400, "'..'"),
        (client.post("/documents", files={"files": ("/etc/passwd.md", EIFFEL_EDITED)}), 400, "absolute path"),
        (client.post("/documents", files={"files": ("eiffel.md", EIFFEL_EDITED)}, data={"collection": "../.."}),
         400, "collection"),
        (client.post("/documents", files={"files": ("eiffel.md", EIFFEL_EDITED)}, data={"collection": "/etc"}),
         400, "absolute path"),
        (client.post("/documents", files={"files": ("eiffel.md", EIFFEL_EDITED)}, data={"collection": "a\x01b"}),
         400, "control character"),
        (client.post("/documents", json=[{"text": "x", "source": "a\u2028\nb.md"}]), 400, "control character"),
        (client.post("/documents", files={"files": ("a#b.md", EIFFEL_EDITED)}), 400, "'#'"),
        (client.post("/documents", files={"files": ("x" * 400 + ".md", EIFFEL_EDITED)}), 400, "longer than"),
        (client.post("/documents", files=[("files", ("eiffel.md", EIFFEL_EDITED)), ("files", ("eiffel.md", EIFFEL))]),
         400, "twice"),
        (client.post("/documents", json=[{"text": "x", "source": "../../etc/passwd"}]), 400, "'..'"),
        (client.post("/documents", json=[{"text": "x", "source": "/etc/passwd"}]), 400, "absolute path"),
        (client.post("/documents", json=[{"text": "x", "source": "C:\\Windows\\x.md"}]), 400, "absolute path"),
        (client.post("/documents", json=[{"text": "x", "source": "a\\..\\..\\x.md"}]), 400, "backslash"),
        (client.post("/documents", json=[{"text": "x", "source": 7}]), 400, "'source' must be a string"),
    ]
    for response, status, contains in refusals:
        assert_error(response, status, contains)
    assert client.get("/documents").json() == documents
    assert "Venetian red" in retrieved_text(client)
    assert not list(Path(rag.root).glob(".upload-*"))  # every temporary folder is gone
    # a delete target is compared with the recorded sources as text: a path names no upload
    assert_error(client.delete("/documents/eiffel.md"), 404)
    assert_error(client.delete("/documents/upload:../eiffel.md"), 404)


def _zip_without_a_document() -> bytes:
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("hello.txt", "not a Word document")
    return buffer.getvalue()


def test_cli_sync_never_touches_upload_sources(served: tuple[httpx.Client, Any], tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """``--sync`` deletes documents of files gone from the given directories: an upload's logical
    source is no file under any directory, so it stays, whatever the directory."""
    client, rag = served
    upload(client, [("eiffel.md", EIFFEL)], collection=str(tmp_path / "corpus").lstrip("/"))
    (tmp_path / "corpus" / "tokyo.txt").unlink()
    cwd_upload = tmp_path / "upload:eiffel.md"  # a real file whose name looks like a logical source
    cwd_upload.write_text("A real file named like an upload, about lighthouses.")
    monkeypatch.chdir(tmp_path)
    report = rag.index([tmp_path / "corpus", Path("upload:eiffel.md")], sync=True)
    assert report.to_json()["documents_removed"] == 1  # tokyo.txt, nothing else
    sources = [source for doc in client.get("/documents").json() for source in doc["sources"]]
    assert f"upload:{str(tmp_path / 'corpus').lstrip('/')}/eiffel.md" in sources
    assert str(cwd_upload.resolve()) in sources and "upload:eiffel.md" not in sources
    # ``unirag delete upload:...`` (UniRAG.delete) names the upload, never the file named like it
    assert rag.delete("upload:" + str(tmp_path / "corpus").lstrip("/")).to_json()["documents_removed"] == 1
    sources = [source for doc in client.get("/documents").json() for source in doc["sources"]]
    assert not any(source.startswith("upload:") for source in sources) and str(cwd_upload.resolve()) in sources


def test_formats_endpoint_lists_every_suffix_the_cli_reads(served: tuple[httpx.Client, Any]) -> None:
    from unirag.text.loaders import SUFFIXES

    client, _ = served
    formats = client.get("/documents/formats").json()
    assert set(formats["suffixes"]) == set(SUFFIXES) and {".pdf", ".docx", ".html", ".csv"} <= set(SUFFIXES)
    assert formats["max_upload_bytes"] == 2_000_000
