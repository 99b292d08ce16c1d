"""Issue 17 conventions: PDF, HTML, DOCX and CSV inputs; unreadable ones skipped with a warning;
file names never become graph entities."""

from __future__ import annotations

from pathlib import Path

from fakes import ScriptedChat, fake_stack, make_settings

from unirag.pipeline import run_index
from unirag.text.loaders import load_documents
from unirag.workspace import Workspace


def write_pdf(path: Path, text: str, title: str = "") -> None:
    """A one-page PDF whose page shows ``text`` in Helvetica (what a text PDF is, built by hand)."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    info = f"<< /Title ({title}) >>" if title else "<< >>"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        info.encode(),
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R /Info 6 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    path.write_bytes(bytes(out))


def write_docx(path: Path, title: str, paragraphs: list[str]) -> None:
    import docx

    document = docx.Document()
    document.core_properties.title = title
    for paragraph in paragraphs:
        document.add_paragraph(paragraph)
    table = document.add_table(rows=1, cols=2)
    table.rows[0].cells[0].text, table.rows[0].cells[1].text = "Founded", "1889"
    document.save(str(path))


def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    root.mkdir()
    write_pdf(root / "tower.pdf", "The Eiffel Tower stands in Paris.", title="Eiffel Tower")
    (root / "page.html").write_text(
        "<html><head><title>Nile facts</title><style>p {color: red}</style></head><body>"
        "<h1>The Nile</h1><p>The Nile flows north through Egypt.</p><script>alert(1)</script></body></html>")
    write_docx(root / "curie.docx", "Marie Curie", ["Marie Curie won two Nobel Prizes."])
    (root / "animals.csv").write_text("id,title,text\nq1,Quokka,The quokka lives on Rottnest Island.\n"
                                      "q2,Koala,The koala eats eucalyptus leaves.\n")
    (root / "broken.pdf").write_bytes(b"%PDF-1.4 this is not really a pdf")
    (root / "broken.docx").write_bytes(b"PK not a zip")
    return root


def test_pdf_html_docx_csv_are_read_and_damaged_files_skipped(tmp_path: Path) -> None:
    warnings: list[str] = []
    docs = {doc.title: doc for doc in load_documents([corpus(tmp_path)], warn=warnings.append)}
    assert set(docs) == {"Eiffel Tower", "Nile facts", "Marie Curie", "Quokka", "Koala"}
    assert "Eiffel Tower stands in Paris" in docs["Eiffel Tower"].text
    assert docs["Nile facts"].text == "The Nile\nThe Nile flows north through Egypt."  # no style, no script
    assert "two Nobel Prizes" in docs["Marie Curie"].text and "Founded | 1889" in docs["Marie Curie"].text
    assert docs["Quokka"].text == "The quokka lives on Rottnest Island." and docs["Quokka"].record_key == "q1"
    assert len(warnings) == 2 and all(w.endswith("skipped") and "\n" not in w for w in warnings)
    assert any("broken.pdf: unreadable PDF" in w for w in warnings)
    assert any("broken.docx: unreadable DOCX" in w for w in warnings)


def test_csv_without_a_text_column_reads_every_column(tmp_path: Path) -> None:
    path = tmp_path / "people.csv"
    path.write_text("name;born\nAda Lovelace;1815\n")
    (doc,) = load_documents([path])
    assert doc.text == "name: Ada Lovelace\nborn: 1815"


def test_file_names_do_not_become_entities(tmp_path: Path) -> None:
    root = tmp_path / "files"
    root.mkdir()
    (root / "Zorblax_Notes.txt").write_text("Paris is the capital of France.\n")
    (root / "facts.jsonl").write_text('{"title": "Quokka", "text": "The Quokka lives on Rottnest Island."}\n')
    settings = make_settings(None, graph__extractor="llm", graph__gleaning=0)
    ws = Workspace.init(tmp_path / "ws")
    chat = ScriptedChat()
    run_index(ws, [root], settings, fake_stack(settings, ws, chat=chat), graphs=["kg"])
    prompts = [ScriptedChat.user_message(r) for r in chat.requests if r.stage == "build.extract"]
    assert prompts and not any("Zorblax" in p for p in prompts)
    assert any("Quokka\nThe Quokka" in p for p in prompts)  # a record's own title is still shown
    names = {row[0] for row in ws.db.execute("SELECT name FROM entities")}
    assert "Paris" in names and not any("zorblax" in name.lower() for name in names)
    ws.close()
