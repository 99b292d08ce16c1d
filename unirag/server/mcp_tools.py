"""The MCP server (``unirag mcp``): a workspace as an agent's memory, over stdio.

Tools: ``query`` (an answer with a summary of its sources), ``retrieve`` (the
context only, no generation) and ``list_methods``; a method is a shipped name or
alias (no tool argument names a file). The corpus tools (:mod:`unirag.server.mcp_corpus`):
``add_text``, ``add_files`` (files inside the files root only), ``delete_documents``,
``list_documents`` and ``stats``. Each calls the Python API on one shared
:class:`~unirag.api.UniRAG` (writes on a sibling of it, one at a time).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from unirag import package_version
from unirag.errors import UniragError
from unirag.server.catalog import MethodCatalog
from unirag.server.errors import ApiError, one_line
from unirag.server.jobs import JobQueue
from unirag.server.mcp_corpus import add_corpus_tools

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from unirag.api import UniRAG
    from unirag.methods.runner import QueryResult

#: Characters of each context item's text a tool result carries.
SNIPPET = 400


def context_summary(result: QueryResult) -> list[dict[str, Any]]:
    """Each context item: kind, source, score and the start of its text."""
    return [{"kind": item["kind"], "source": item["source"], "score": item["score"],
             "text": item["text"][:SNIPPET]} for item in result.to_json()["context"]]


@contextmanager
def told_to_the_agent() -> Iterator[None]:
    """A user's mistake (unknown method, a workspace not ready) reaches the agent as the
    tool's error text; anything else stays a crash the MCP server logs."""
    from mcp.server.mcpserver.exceptions import ToolError

    try:
        yield
    except (ApiError, UniragError) as exc:
        raise ToolError(one_line(str(exc))) from None


def build_mcp_server(rag: UniRAG, top_k: int | None = None, files_root: Path | None = None,
                     jobs: JobQueue | None = None) -> MCPServer:
    """An MCP server whose tools ask ``rag``; ``top_k`` caps the items per retrieval operator,
    ``add_files`` reads files inside ``files_root`` only (default: the working directory),
    writes run on ``jobs`` (the caller shuts it down: its accepted writes finish first)."""
    from mcp.server.mcpserver import MCPServer

    methods = MethodCatalog()
    server = MCPServer(name="unirag", version=package_version(), instructions=(
        f"Graph RAG over the document workspace '{rag.root.name}'. Use 'query' for an answer grounded in "
        "its documents, 'retrieve' for the passages and graph facts alone, 'list_methods' to choose a method; "
        "'add_text', 'add_files', 'delete_documents' change the documents, 'list_documents' and 'stats' show them."))

    def limited(wanted: int | None) -> int | None:
        return min(wanted, top_k) if wanted and top_k else wanted or top_k

    @server.tool()
    async def query(question: str, method: str = "vanilla", top_k: int | None = None) -> dict[str, Any]:
        """Answer a question from the workspace's documents with a retrieval method; returns the
        answer, a summary of the context it was drawn from, and that context as numbered
        citations (``index`` N is the ``[N]`` the answer may cite)."""
        with told_to_the_agent():
            result = await rag.aquery(question, methods.resolve(method), top_k=limited(top_k))
        return {"answer": result.answer, "method": result.method, "context": context_summary(result),
                "citations": result.citations(SNIPPET)}

    @server.tool()
    async def retrieve(question: str, method: str = "vanilla", top_k: int | None = None) -> dict[str, Any]:
        """Retrieve the context a method would answer from (passages, entities, relations,
        community summaries), without generating an answer."""
        with told_to_the_agent():
            result = await rag.aquery(question, methods.resolve(method), top_k=limited(top_k), retrieve_only=True)
        return {"method": result.method, "context": context_summary(result)}

    @server.tool()
    async def list_methods() -> list[dict[str, Any]]:
        """The retrieval methods a query can name, with what each does."""
        return [{"name": info.name, "title": info.title, "description": info.description, "aliases": info.aliases}
                for info in rag.methods()]

    add_corpus_tools(server, rag, files_root or Path.cwd(), jobs or JobQueue())
    return server


def serve_stdio(rag: UniRAG, files_root: Path | None = None) -> None:
    """Serve ``rag``'s tools on stdin/stdout until the client closes them; ``add_files`` reads
    files inside ``files_root`` only (default: the working directory)."""
    jobs = JobQueue()
    try:
        build_mcp_server(rag, files_root=files_root, jobs=jobs).run("stdio")
    finally:
        jobs.shutdown()
