"""Cut documents into token windows: the retrieval units every method shares.

Windows are counted in the same tokens the models see, so a chunk size means
the same budget for every method being compared. Passages that a dataset
already split (``presplit``) stay whole, as the survey keeps them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from unirag.text.tokenizer import Tokenizer
from unirag.text.types import Chunk, Document, content_id


def _windows(n_tokens: int, size: int, step: int) -> list[tuple[int, int]]:
    """``[start, end)`` token windows of ``size`` stepping by ``step``.

    Stops at the first window that reaches the end, so the last window is
    never a mere tail of the one before it.
    """
    spans: list[tuple[int, int]] = []
    start = 0
    while start < n_tokens:
        end = min(start + size, n_tokens)
        spans.append((start, end))
        if end == n_tokens:
            break
        start += step
    return spans


#: Texts longer than this are encoded and windowed segment by segment (see :func:`_token_windows`).
ENCODE_BLOCK_CHARS = 1 << 18
#: Tokens kept before a window's start: a window edge moves back to the start of the
#: character it cuts, at most 3 bytes, so at most 3 one-byte tokens.
_BACK_TOKENS = 4


def chunk_document(doc: Document, tokenizer: Tokenizer, size: int, overlap: int) -> list[Chunk]:
    """The chunks of ``doc`` as a list (see :func:`iter_chunks`)."""
    return list(iter_chunks(doc, tokenizer, size, overlap))


def iter_chunks(doc: Document, tokenizer: Tokenizer, size: int, overlap: int) -> Iterator[Chunk]:
    """The chunks of ``doc``: windows of ``size`` tokens sharing ``overlap`` tokens.

    The text is encoded once and each window decoded from those ids, cutting
    at character boundaries (see :meth:`Tokenizer.decode_spans`). A presplit
    document is one chunk however long it is; an empty one has no chunks.
    Chunk ids hash the document id, the index and the text, so re-chunking
    the same document with the same settings gives the same ids.

    Lazily, and a long text segment by segment: a 50 MB file as one token list
    costs gigabytes; its chunks here cost a segment (the same chunks, see
    :func:`_token_windows`).
    """
    if size <= 0:
        raise ValueError(f"chunk size must be positive, got {size}")
    if overlap < 0 or overlap >= size:
        raise ValueError(f"chunk overlap must be in [0, size), got overlap={overlap} for size={size}")
    return _chunks(doc, tokenizer, size, overlap)


def _chunks(doc: Document, tokenizer: Tokenizer, size: int, overlap: int) -> Iterator[Chunk]:
    if not doc.text or doc.text.isspace():  # not text.strip(): no copy of a long text
        return
    doc_id = doc.id
    if doc.presplit:
        texts_counts: Iterable[tuple[str, int]] = [(doc.text, tokenizer.count(doc.text))]
    else:
        texts_counts = _token_windows(doc.text, tokenizer, size, size - overlap)
    index = 0
    for text, n_tokens in texts_counts:
        if not text.strip():
            continue  # a window of only whitespace retrieves nothing
        yield Chunk(
            id=content_id(doc_id, str(index), text, prefix="chunk-"),
            doc_id=doc_id,
            index=index,
            text=text,
            title=doc.title,
            n_tokens=n_tokens,
            source=doc.source,
        )
        index += 1


def _token_windows(text: str, tokenizer: Tokenizer, size: int, step: int) -> Iterator[tuple[str, int]]:
    """(window text, tokens) of :func:`_windows` over ``text``'s tokens.

    A long text is encoded in segments cut where no token can span the cut (before a
    space between two letters: BPE pre-tokens of both encodings end at the letter and
    restart at the space), so the ids are those of one encode; the windows are decoded
    from a buffer holding one segment and the few tokens before the next window."""
    if len(text) <= ENCODE_BLOCK_CHARS:
        ids = tokenizer.encode(text)
        spans = _windows(len(ids), size, step)
        yield from zip(tokenizer.decode_spans(ids, spans), [end - start for start, end in spans], strict=True)
        return
    buffer: list[int] = []
    base = start = 0  # base: the document index of buffer[0]
    for segment in _segments(text):
        buffer.extend(tokenizer.encode(segment))
        while start + size < base + len(buffer):  # a token follows: not the last window
            yield _window(tokenizer, buffer, base, start, start + size)
            start += step
        drop = start - _BACK_TOKENS - base
        if drop > 0:
            del buffer[:drop]
            base += drop
    n_tokens = base + len(buffer)
    while start < n_tokens:
        end = min(start + size, n_tokens)
        yield _window(tokenizer, buffer, base, start, end)
        if end == n_tokens:
            break
        start += step


def _window(tokenizer: Tokenizer, buffer: list[int], base: int, start: int, end: int) -> tuple[str, int]:
    """Window ``[start, end)`` (document token indices) decoded as :meth:`Tokenizer.decode_spans`
    decodes it from the whole text: with the tokens before it and the one after it."""
    lo = max(0, start - _BACK_TOKENS - base)
    hi = min(len(buffer), end - base + 1)
    text = tokenizer.decode_spans(buffer[lo:hi], [(start - base - lo, end - base - lo)])[0]
    return text, end - start


def _segments(text: str, block: int | None = None) -> Iterator[str]:
    """``text`` in pieces of about ``block`` characters, cut only before a space between
    two letters (the whole rest when there is no such place)."""
    block = block or ENCODE_BLOCK_CHARS
    start = 0
    while start < len(text):
        cut = _cut_at_or_after(text, start + block)
        yield text[start:cut]
        start = cut


def _cut_at_or_after(text: str, position: int) -> int:
    """The first index at or after ``position`` of a space between two letters, else ``len(text)``."""
    index = text.find(" ", max(1, position))
    while index != -1:
        if index + 1 < len(text) and text[index - 1].isalpha() and text[index + 1].isalpha():
            return index
        index = text.find(" ", index + 1)
    return len(text)
