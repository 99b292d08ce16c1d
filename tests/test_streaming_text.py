"""Large files are chunked in a streaming way, with the same chunks as one whole encode.

Issue 17: a 52 MB text file peaked at 2.24 GB (about 43x the file): the whole file as one
token list, its byte pieces and offsets, and every chunk of it held before writing.
"""

from __future__ import annotations

import json
import random
import tracemalloc
from pathlib import Path

import pytest

import unirag.text.chunking as chunking
from unirag.progress import Progress
from unirag.text.chunking import chunk_document, iter_chunks
from unirag.text.tokenizer import get_tokenizer
from unirag.text.types import Document, content_id, normalised_words, streamed_content_id

DATASETS = Path(__file__).parent / "data" / "datasets"
ODD_PIECES = ["東京は日本の首都です。", "emoji 🎉🎉 party ", "café naïve e\u0301 ", "\n\n", "  \t ", "/path/to x",
              "it's They're ", "123456 ", "Ωmega ", "word\r\nword ", "\u00a0nbsp\u3000ideographic "]


def mixed_text(n_passages: int = 300, seed: int = 5) -> str:
    """Real passages with scripts, emoji, combining marks and odd whitespace mixed in."""
    texts: list[str] = []
    for path in sorted(DATASETS.glob("*/*corpus.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        texts += ["".join(v) for v in data.values()] if isinstance(data, dict) else [
            r.get("text") or r.get("paragraph_text", "") for r in data]
    rng = random.Random(seed)
    pieces = texts[:n_passages] + ODD_PIECES * 20
    rng.shuffle(pieces)
    return " ".join(rng.choice([p, p + "\n", p + "  ", p + "\n\n"]) for p in pieces)


@pytest.mark.parametrize("encoding", ["cl100k_base", "o200k_base"])
@pytest.mark.parametrize("block", [37, 700, 5000])
def test_segmented_chunks_equal_one_encode(monkeypatch: pytest.MonkeyPatch, encoding: str, block: int) -> None:
    tokenizer, doc = get_tokenizer(encoding), Document("T", mixed_text(), "s")
    monkeypatch.setattr(chunking, "ENCODE_BLOCK_CHARS", 10**9)
    whole = chunk_document(doc, tokenizer, 120, 20)
    monkeypatch.setattr(chunking, "ENCODE_BLOCK_CHARS", block)
    assert chunk_document(doc, tokenizer, 120, 20) == whole


def test_streamed_document_id_equals_the_joined_one() -> None:
    rng = random.Random(3)
    alphabet = ["a", "b", " ", "\n", "\t", "é", "e\u0301", "\u00a0", "  ", "\u3000", "x"]
    for _ in range(2000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
        block = rng.randint(1, 9)
        assert "".join(normalised_words(text, block)) == " ".join(text.split())
        assert streamed_content_id(["T"], normalised_words(text, block)) == content_id("T", " ".join(text.split()))


def test_chunks_come_before_the_whole_text_is_encoded(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first chunk is made after encoding one segment, not the whole document."""
    tokenizer = get_tokenizer()
    encoded: list[int] = []
    real_encode = tokenizer.encode

    class Counting:
        def __getattr__(self, name: str) -> object:
            return getattr(tokenizer, name)

        def encode(self, text: str) -> list[int]:
            encoded.append(len(text))
            return real_encode(text)

    monkeypatch.setattr(chunking, "ENCODE_BLOCK_CHARS", 20_000)
    text = (mixed_text(600) + "\n") * 4
    chunks = iter_chunks(Document("T", text, "s"), Counting(), 200, 20)  # type: ignore[arg-type]
    next(chunks)
    assert sum(encoded) < len(text) / 4
    rest = list(chunks)
    assert sum(encoded) == len(text) and len(rest) > 10


def _chunking_peak(text: str) -> int:
    """Peak Python memory (tracemalloc) of chunking ``text``, the text itself excluded."""
    doc, tokenizer = Document("T", text, "s"), get_tokenizer()
    tracemalloc.start()
    try:
        n_chunks = sum(1 for _ in iter_chunks(doc, tokenizer, 1200, 100))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert n_chunks > 50
    return peak


def test_chunking_memory_stays_flat_as_the_text_grows() -> None:
    """Chunking 3.4 M characters costs what 0.8 M cost: one segment, not the whole text
    (the whole-text token list alone was ~9x the text)."""
    passage = mixed_text(600) + "\n"
    small, large = passage * 10, passage * 45
    assert len(large) > 3_000_000
    small_peak, large_peak = _chunking_peak(small), _chunking_peak(large)
    assert large_peak < 1.3 * small_peak + 1_000_000, (small_peak, large_peak)


def test_progress_lines_mode_writes_a_line_every_period() -> None:
    """Not a terminal: plain lines at most every ``every`` seconds, and one at the end."""
    now = [0.0]
    lines: list[str] = []
    progress = Progress(enabled=True, lines=True, every=5.0, write=lines.append, clock=lambda: now[0])
    with progress.task("chunking", total=None) as advance:
        for _ in range(30):
            now[0] += 1.0
            advance(10)
    assert lines == ["unirag: chunking: 50 (5 s)", "unirag: chunking: 100 (10 s)", "unirag: chunking: 150 (15 s)",
                     "unirag: chunking: 200 (20 s)", "unirag: chunking: 250 (25 s)",
                     "unirag: chunking: 300 (30 s)", "unirag: chunking: 300 (30 s) done"]


def test_progress_lines_mode_is_silent_for_a_short_step() -> None:
    lines: list[str] = []
    progress = Progress(enabled=True, lines=True, every=5.0, write=lines.append, clock=lambda: 1.0)
    with progress.task("quick") as advance:
        advance(3)
    assert lines == []
