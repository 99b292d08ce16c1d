"""Ingest sources into the workspace: load, de-duplicate, chunk, append, replace.

Documents are committed in batches, each document together with its chunks,
so a killed run resumes where it stopped: documents already stored are
recognised by their content-hash id and skipped.

A document is identified by its content *and* its origin (the file it came
from, plus the record id inside a JSON/JSONL file). Re-indexing a file makes
the workspace hold exactly what the file holds now: documents it no longer
yields lose that origin, and a document left with no origin is deleted with
its chunks and extractions (:func:`remove_documents`). Replacements run after
the new versions are stored, so a killed run never loses a document; the rerun
finds the new versions stored and finishes the replacement. A record given in
memory with an id and no file (``{"text", "id"}``: the MCP ``add_text`` source, the
server's JSON records) is replaced the same way when its id comes again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from unirag.config import Settings
from unirag.corpus import target_origin
from unirag.errors import WorkspaceError
from unirag.executors import Executor, executor_for, in_order
from unirag.executors.base import batched
from unirag.graph.graph_store import GraphStore
from unirag.progress import Progress
from unirag.text.chunking import iter_chunks
from unirag.text.clean import ReplacedCharacters
from unirag.text.loaders import load_documents
from unirag.text.tokenizer import get_tokenizer
from unirag.text.types import Chunk, Document, is_logical_source
from unirag.workspace import Workspace

BATCH_DOCUMENTS = 256


@dataclass
class IngestReport:
    documents_seen: int = 0
    documents_added: int = 0
    chunks_added: int = 0
    duplicates: int = 0
    already_indexed: int = 0
    documents_removed: int = 0  # old versions replaced, and documents of origins gone (--sync)
    chunks_removed: int = 0
    warnings: list[str] = field(default_factory=list)


def chunking_config(settings: Settings) -> dict[str, object]:
    c = settings.chunking
    return {"size": c.size, "overlap": c.overlap, "encoding": c.encoding}


def check_chunking_config(workspace: Workspace, settings: Settings) -> None:
    """Refuse to mix chunkings in one workspace (ids and indices would disagree)."""
    entry = workspace.manifest.entry("chunks")
    wanted = chunking_config(settings)
    if entry and entry.get("config") != wanted and workspace.corpus.counts()["chunks"]:
        have = entry.get("config", {})
        raise WorkspaceError(
            f"{workspace.root} was chunked with size={have.get('size')} overlap={have.get('overlap')}, "
            f"not size={wanted['size']} overlap={wanted['overlap']}: pass --rebuild to re-chunk (caches are kept)"
        )


def incoming_chunks(
    workspace: Workspace | None,
    sources: Sequence[str | Path],
    settings: Settings,
    fmt: str = "auto",
    rebuild: bool = False,
) -> list[tuple[str, int]]:
    """(chunk id, tokens) of every chunk :func:`ingest` would add, made in memory and never
    stored: what the cost estimate plans from before anything is written (``--dry-run``).

    Load warnings are left to the ingest that follows (it says each once); an unreadable
    file adds no chunk here either. ``workspace`` None: one not created yet."""
    tokenizer = get_tokenizer(settings.chunking.encoding)
    known = set() if rebuild or workspace is None else workspace.corpus.document_ids()
    sizes: list[tuple[str, int]] = []
    for doc in load_documents(sources, fmt, settings.loader, presplit=settings.chunking.presplit,
                              warn=_said_by_ingest):
        if doc.id in known:
            continue
        known.add(doc.id)
        sizes += [(chunk.id, chunk.n_tokens)
                  for chunk in iter_chunks(doc, tokenizer, settings.chunking.size, settings.chunking.overlap)]
    return sizes


def _cleaned(documents: Iterable[Document], warn: Callable[[str], None]) -> Iterator[Document]:
    """Documents handed over in memory (API records, uploads, a benchmark's corpus) made
    storable as the loaders make files' documents: lone surrogates become U+FFFD, said once."""
    replaced = ReplacedCharacters()
    for doc in documents:
        yield replaced.clean(doc)
    said = replaced.summary()
    if said:
        warn(said)


def _said_by_ingest(message: str) -> None:
    """A load warning met while estimating: the ingest that follows loads the same file and says it."""


@dataclass(frozen=True)
class ChunkDocuments:
    """One executor task: the chunks of a batch of documents (the worker's tokenizer is
    loaded once per process, :func:`~unirag.text.tokenizer.get_tokenizer`)."""

    size: int
    overlap: int
    encoding: str

    def __call__(self, docs: list[Document]) -> list[list[Chunk]]:
        tokenizer = get_tokenizer(self.encoding)
        return [list(iter_chunks(doc, tokenizer, self.size, self.overlap)) for doc in docs]


def chunked_by(executor: Executor, docs: Iterable[Document], settings: Settings,
               ) -> Iterator[tuple[list[Document], list[list[Chunk]]]]:
    """``(documents, their chunks)`` per batch of ``ray.batch_size`` documents, chunked by the
    executor's tasks and handed back in reading order (so chunk ids list the same way on
    every executor); the documents of the batches in flight wait here, not in the tasks' replies."""
    c = settings.chunking
    sent: dict[int, list[Document]] = {}

    def remembered() -> Iterator[list[Document]]:
        for index, batch in enumerate(batched(docs, settings.ray.batch_size)):
            sent[index] = batch
            yield batch

    task = ChunkDocuments(c.size, c.overlap, c.encoding)
    results = executor.map(task, remembered(), retries=settings.ray.max_retries, desc="chunk documents")
    for index, chunk_lists in enumerate(in_order(results)):
        yield sent.pop(index), chunk_lists


def remove_documents(workspace: Workspace, doc_ids: Iterable[str]) -> list[str]:
    """Delete documents, their chunks and every extraction of those chunks; returns the
    deleted chunk ids. Derived artifacts go stale and are refreshed by the caller."""
    chunk_ids = workspace.corpus.delete_documents(doc_ids)
    if chunk_ids:
        GraphStore(workspace).forget_chunks(chunk_ids)
    return chunk_ids


def release_sources(workspace: Workspace, targets: Sequence[str], doc_ids: set[str]) -> set[str]:
    """Of ``doc_ids`` (what ``targets`` name), those a delete removes; the others lose only the
    origins the targets name.

    The rule (one document per text, any number of origins): a target naming a document
    id removes that document; a target naming a file, a directory or ``FILE#RECORD``
    withdraws those origins, and a document goes only when no other origin still provides
    it. So deleting ``a.txt`` never deletes the text that ``copy.txt`` still holds, as
    re-indexing a changed ``a.txt`` never does either (:func:`_replace_and_sync`)."""
    named_ids = {target for target in targets if target in doc_ids}
    covered = [_covers(target) for target in targets if target not in named_ids]
    removed: set[str] = set(named_ids)
    withdrawn: dict[str, set[str]] = {}  # origin -> documents that keep other origins
    for row in workspace.corpus.documents():
        doc_id = row["id"]
        if doc_id not in doc_ids or doc_id in removed:
            continue
        mine = [source for source in row["sources"] if any(cover(source) for cover in covered)]
        if len(mine) == len(row["sources"]):
            removed.add(doc_id)
            continue
        for source in mine:
            withdrawn.setdefault(source.partition("#")[0], set()).add(doc_id)
    for origin, kept_elsewhere in withdrawn.items():
        workspace.corpus.detach_origin(origin, keep=workspace.corpus.documents_of_origin(origin) - kept_elsewhere)
    return removed


def _covers(target: str) -> Callable[[str], bool]:
    """Whether a recorded source (``origin`` or ``origin#record``) is one ``target`` names,
    as :meth:`unirag.corpus.Corpus.find_documents` reads it."""
    path, _, key = target.partition("#")
    origin = target_origin(path) if path else ""
    if key:
        return lambda source: source == f"{origin}#{key}"
    prefix = origin.rstrip("/") + "/"
    return lambda source: source.partition("#")[0] in (origin, target) or source.startswith(prefix)


def _replaced_origins(loaded: dict[str, set[str]], given: bool) -> dict[str, set[str]]:
    """The origins whose documents this run replaces: every file read, and of documents given
    in memory only uploads (logical origins). An upload is a whole file, as a file read is; other
    given documents may be a partial view of their file, so they only add."""
    return {origin: ids for origin, ids in loaded.items() if not given or is_logical_source(origin)}


def _replace_and_sync(
    workspace: Workspace, loaded: dict[str, set[str]], sources: Sequence[str | Path], sync: bool,
    report: IngestReport,
) -> None:
    """Drop what re-indexed origins no longer hold and, with ``sync``, the origins under
    the given directories that are gone; delete documents left with no origin."""
    orphans: set[str] = set()
    for origin, doc_ids in loaded.items():
        if origin:
            orphans |= workspace.corpus.detach_origin(origin, keep=doc_ids)
    if sync:
        roots = [str(Path(source).resolve()).rstrip("/") + "/" for source in sources if Path(source).is_dir()]
        for origin in workspace.corpus.origins():
            # an upload's logical origin names no file: never gone from a directory
            under = not is_logical_source(origin) and any(origin.startswith(root) for root in roots)
            if origin not in loaded and under:
                orphans |= workspace.corpus.detach_origin(origin)
    if orphans:
        report.documents_removed += len(orphans)
        report.chunks_removed += len(remove_documents(workspace, orphans))


def _replace_records(workspace: Workspace, loaded: dict[str, set[str]], report: IngestReport) -> None:
    """A record given in memory with an id (no file) is the newest version of that id: the
    documents an earlier version left under it lose it, and go when nothing else holds them."""
    orphans: set[str] = set()
    for key, doc_ids in loaded.items():
        orphans |= workspace.corpus.detach_record(key, keep=doc_ids)
    if orphans:
        report.documents_removed += len(orphans)
        report.chunks_removed += len(remove_documents(workspace, orphans))


def ingest(
    workspace: Workspace,
    sources: Sequence[str | Path],
    settings: Settings,
    fmt: str = "auto",
    progress: Progress | None = None,
    warn: Callable[[str], None] | None = None,
    rebuild: bool = False,
    documents: Iterable[Document] | None = None,
    sync: bool = False,
) -> IngestReport:
    """Append the sources' new documents and replace the old versions of re-indexed
    origins; ``rebuild`` replaces the corpus instead.

    ``documents`` are already-loaded passages (a benchmark's corpus from
    :meth:`unirag.eval.datasets.Dataset.documents`) taken instead of ``sources``.
    ``sync`` also deletes the documents of files under the given directories that
    are gone. An origin that yields no document at all (unreadable, or emptied) keeps
    its old documents: a broken file never wipes what was indexed from it.

    With ``rebuild`` the old corpus is cleared just before the first batch is
    written, so sources that yield nothing leave it untouched.
    """
    progress = progress or Progress()
    report = IngestReport()

    def on_warning(message: str) -> None:
        report.warnings.append(message)
        if warn:
            warn(message)

    if not rebuild:
        check_chunking_config(workspace, settings)
    tokenizer = get_tokenizer(settings.chunking.encoding)
    stored = set() if rebuild else workspace.corpus.document_ids()
    must_clear = rebuild
    seen: set[str] = set()
    pending: list[tuple[Document, Iterable[Chunk]]] = []
    known_again: list[Document] = []
    by_origin: dict[str, set[str]] = {}
    by_record: dict[str, set[str]] = {}  # in-memory records with an id (no file): key -> their documents

    def flush() -> None:
        nonlocal must_clear
        if not pending:
            return
        if must_clear:
            workspace.corpus.clear()
            must_clear = False
        docs, chunks = workspace.corpus.add_documents(pending)
        report.documents_added += docs
        report.chunks_added += chunks
        pending.clear()

    def counted(chunks: Iterable[Chunk], advance: Callable[[int], None]) -> Iterator[Chunk]:
        for chunk in chunks:
            advance(1)
            yield chunk

    def new_documents(loaded: Iterable[Document]) -> Iterator[Document]:
        """The documents to add: neither stored nor seen earlier in this run."""
        for doc in loaded:
            report.documents_seen += 1
            doc_id = doc.id
            by_origin.setdefault(doc.origin, set()).add(doc_id)
            if not doc.origin and doc.record_key:
                by_record.setdefault(doc.record_key, set()).add(doc_id)
            if doc_id in seen:
                report.duplicates += 1
                known_again.append(doc)
                continue
            seen.add(doc_id)
            if doc_id in stored:
                report.already_indexed += 1
                known_again.append(doc)
                continue
            yield doc

    # Chunks are made lazily, as the store writes them: a large file never has all its
    # chunks (or tokens) in memory at once; progress counts them as they are made.
    executor = executor_for(settings)
    with progress.task("loading and chunking documents (chunks made)") as advance:
        loaded = _cleaned(documents, on_warning) if documents is not None else load_documents(
            sources, fmt, settings.loader, presplit=settings.chunking.presplit, warn=on_warning
        )
        if executor.remote:
            for docs, chunk_lists in chunked_by(executor, new_documents(loaded), settings):
                pending.extend(zip(docs, chunk_lists, strict=True))
                advance(sum(len(chunks) for chunks in chunk_lists))
                if len(pending) >= BATCH_DOCUMENTS:
                    flush()
        else:
            for doc in new_documents(loaded):
                chunks = iter_chunks(doc, tokenizer, settings.chunking.size, settings.chunking.overlap)
                pending.append((doc, counted(chunks, advance)))
                if len(pending) >= BATCH_DOCUMENTS:
                    flush()
        flush()
    if known_again:
        workspace.corpus.add_sources(known_again)
    if not rebuild:
        given = documents is not None  # then ``sources`` were not read: nothing is gone from them
        _replace_and_sync(workspace, _replaced_origins(by_origin, given), sources, sync and not given, report)
    if not rebuild and by_record:
        _replace_records(workspace, by_record, report)
    counts = workspace.corpus.counts()
    chunks = {"config": chunking_config(settings), "count": counts["chunks"], "documents": counts["documents"]}
    had = workspace.manifest.entry("chunks") or {}
    # unchanged input is a no-op: the entry (and its build time) moves only with the corpus
    moved = had.get("corpus_version") != workspace.corpus.version()
    if moved or any(had.get(key) != value for key, value in chunks.items()):
        workspace.manifest.set_entry("chunks", chunks)
    return report
