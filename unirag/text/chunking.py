"""Cut documents into token windows: the retrieval units every method shares.

Windows are counted in the same tokens the models see, so a chunk size means
the same budget for every method being compared. Passages that a dataset
already split (``presplit``) stay whole, as the survey keeps them.
"""

from __future__ import annotations

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


def chunk_document(doc: Document, tokenizer: Tokenizer, size: int, overlap: int) -> list[Chunk]:
    """The chunks of ``doc``: windows of ``size`` tokens sharing ``overlap`` tokens.

    The text is encoded once and each window decoded from those ids, cutting
    at character boundaries (see :meth:`Tokenizer.decode_spans`). A presplit
    document is one chunk however long it is; an empty one has no chunks.
    Chunk ids hash the document id, the index and the text, so re-chunking
    the same document with the same settings gives the same ids.
    """
    if size <= 0:
        raise ValueError(f"chunk size must be positive, got {size}")
    if overlap < 0 or overlap >= size:
        raise ValueError(f"chunk overlap must be in [0, size), got overlap={overlap} for size={size}")
    if not doc.text.strip():
        return []
    doc_id = doc.id
    if doc.presplit:
        texts_counts = [(doc.text, tokenizer.count(doc.text))]
    else:
        ids = tokenizer.encode(doc.text)
        spans = _windows(len(ids), size, size - overlap)
        texts = tokenizer.decode_spans(ids, spans)
        texts_counts = [(text, end - start) for text, (start, end) in zip(texts, spans, strict=True)]
    chunks: list[Chunk] = []
    for text, n_tokens in texts_counts:
        if not text.strip():
            continue  # a window of only whitespace retrieves nothing
        index = len(chunks)
        chunks.append(
            Chunk(
                id=content_id(doc_id, str(index), text, prefix="chunk-"),
                doc_id=doc_id,
                index=index,
                text=text,
                title=doc.title,
                n_tokens=n_tokens,
                source=doc.source,
            )
        )
    return chunks
