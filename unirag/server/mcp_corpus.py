"""The MCP tools that change and describe the corpus: ``add_text``, ``add_files``,
``delete_documents``, ``list_documents`` and ``stats`` (registered by
:func:`unirag.server.mcp_tools.build_mcp_server`).

Writes go as the server's do (:mod:`unirag.server.routes_corpus`): one at a time on a
:class:`~unirag.server.jobs.JobQueue`, each on a sibling of the reader
(:func:`unirag.server.writes.written`), so a query of this process keeps answering
from the artifacts as they are, and another process writing the workspace is waited
for, then refused with its one line. A tool call awaits its job and, when the client
asked for progress, sends a notification for each step and count the job reports.

The files rule: ``unirag mcp`` runs as its user, so ``add_files`` reads files, but only
files that resolve (every symlink followed) inside the files root: the directory it was
started in, or ``--files-root DIR``. A relative path is taken from the root. A file is
recorded as ``unirag index`` records it (its resolved path), so adding an edited file
again replaces its document.

No ``from __future__ import annotations`` here: the tools' ``ctx: Context`` annotation
must be the class itself for the ``mcp`` package to see it, and that import is deferred
into :func:`add_corpus_tools` (a cold ``unirag`` never loads ``mcp``).
"""

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from unirag.errors import SourceError, UniragError
from unirag.server.errors import one_line
from unirag.server.jobs import Job, JobQueue
from unirag.server.writes import written

if TYPE_CHECKING:
    from mcp.server.mcpserver import Context, MCPServer

    from unirag.api import UniRAG
    from unirag.api_types import DocumentInfo

#: Seconds between two looks at a running write's progress.
POLL_SECONDS = 0.1
#: The most documents one ``list_documents`` call returns.
MAX_LIST = 1000

Value = TypeVar("Value")


def file_inside(root: Path, given: str) -> Path:
    """The file ``given`` names (relative: from ``root``, the resolved files root), resolved with
    every symlink followed; one line when it lies outside ``root`` or is no file."""
    path = (root / given).resolve()
    if not path.is_relative_to(root):
        raise SourceError(f"{given}: outside the files root {root} (unirag mcp --files-root DIR sets it)")
    if not path.is_file():
        raise SourceError(f"{given}: no such file under {root}" if not path.exists()
                          else f"{given}: not a file (name the files themselves)")
    return path


def delete_target(docs: list["DocumentInfo"], root: Path, target: str) -> str | None:
    """What ``rag.delete`` is given for ``target``: a document id or a recorded source as is, a
    file path (relative: from ``root``) as recorded, the files under a directory; None if unknown."""
    if any(doc.id == target or target in doc.sources for doc in docs):
        return target
    if target.startswith("#"):
        return None
    path = str((root / target).resolve())
    under = path.rstrip("/") + "/"
    for doc in docs:
        if any(source.partition("#")[0] == path or source.startswith(under) for source in doc.sources):
            return path
    return None


def add_corpus_tools(server: "MCPServer", rag: "UniRAG", files_root: Path, jobs: JobQueue) -> None:
    """Register the corpus tools on ``server``; writes go through ``jobs``, files come from ``files_root``."""
    from mcp.server.mcpserver import Context
    from mcp.server.mcpserver.exceptions import ToolError

    root = files_root.resolve()

    async def told(read: Callable[[], Awaitable[Value]]) -> Value:
        """A user's mistake reaches the agent as the tool's one-line error."""
        try:
            return await read()
        except UniragError as exc:
            raise ToolError(one_line(str(exc))) from None

    async def finished(job: Job, ctx: Context) -> dict[str, Any]:
        """The job's report once it is done (its one line if it failed). Progress goes out as a
        count that only grows, with the step and its count as the message."""
        said: dict[str, Any] | None = None
        sent = 0
        running = True
        while running:
            running = job.finished is None
            if running:
                await asyncio.sleep(POLL_SECONDS)
            now = job.progress.to_json()  # once more after the end: even a quick job says its last step
            if now["step"] and now != said:
                said, sent = now, sent + 1
                of = f"/{now['total']}" if now["total"] is not None else ""
                await ctx.report_progress(sent, None, f"{now['step']}: {now['done']}{of}")
        if job.error is not None or job.report is None:
            raise ToolError(job.error or "the write stopped without a report")
        return job.report

    async def indexed(ctx: Context, **request: Any) -> dict[str, Any]:
        job = jobs.submit("index", lambda progress: written(rag, progress, lambda writer: writer.index(**request)))
        return await finished(job, ctx)

    @server.tool()
    async def add_text(text: str, ctx: Context, title: str | None = None, source: str | None = None) -> dict[str, Any]:
        """Add a text to the workspace as a document and index it. ``source``: a name of your choosing;
        adding the same source again replaces its text (list_documents shows it as '#SOURCE').
        Returns the index report: documents added, already indexed, removed (replaced), chunks, model calls."""
        if not text.strip():
            raise ToolError("the text is empty")
        return await indexed(ctx, documents=[{"text": text, "title": title, "id": source or None}])

    @server.tool()
    async def add_files(paths: list[str], ctx: Context) -> dict[str, Any]:
        """Add files (txt, md, pdf, html, docx, csv, json, jsonl) to the workspace and index them. Each path must lie
        inside the files root (relative paths start there); adding an edited file again replaces its document.
        Returns the index report, as add_text."""
        if not paths:
            raise ToolError("name at least one file")
        try:
            files = [file_inside(root, path) for path in paths]
        except SourceError as exc:
            raise ToolError(one_line(str(exc))) from None
        return await indexed(ctx, sources=files)

    @server.tool()
    async def delete_documents(targets: list[str], ctx: Context) -> dict[str, Any]:
        """Delete documents by id or by source as list_documents shows it (a file path, relative ones from
        the files root; '#SOURCE' for add_text's), with everything derived only from them."""
        if not targets:
            raise ToolError("name at least one document id or source")
        docs = await told(lambda: asyncio.to_thread(rag.documents))
        chosen = {target: delete_target(docs, root, target) for target in targets}
        unknown = [target for target, found in chosen.items() if found is None]
        if unknown:
            raise ToolError(f"no document {', '.join(repr(name) for name in unknown)} in this workspace "
                            "(list_documents lists them)")
        named = [found for found in chosen.values() if found is not None]
        job = jobs.submit("delete", lambda progress: written(rag, progress, lambda writer: writer.delete(named)))
        return await finished(job, ctx)

    @server.tool()
    async def list_documents(limit: int = 100, offset: int = 0) -> dict[str, Any]:
        """The workspace's documents in the order added (``limit`` from ``offset``): id, title, sources,
        characters, chunks, when added; ``total``: how many there are."""
        if not 1 <= limit <= MAX_LIST or offset < 0:
            raise ToolError(f"limit must be 1 to {MAX_LIST} and offset 0 or more")
        docs = await told(lambda: asyncio.to_thread(rag.documents))
        return {"total": len(docs), "offset": offset,
                "documents": [doc.to_json() for doc in docs[offset:offset + limit]]}

    @server.tool()
    async def stats() -> dict[str, Any]:
        """The workspace's counts (documents, chunks, entities, relations), graphs, communities,
        built artifacts and model usage (as ``unirag stats --json``)."""
        return await told(lambda: asyncio.to_thread(rag.stats))
