"""Where a framework retriever gets its context: a :class:`~unirag.api.UniRAG` in this
process, or a running ``unirag serve`` over HTTP.

Both answer with the JSON of the query's context items (``QueryResult.to_json()["context"]``),
so the LangChain and LlamaIndex adapters build their documents from one shape whichever
way the context came, and :func:`item_metadata` says once what each document carries.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from unirag.errors import UniragError

if TYPE_CHECKING:
    import httpx

    from unirag.api import UniRAG

#: The environment variable a remote retriever reads its API key from when given none:
#: the one ``unirag serve`` reads its key from, so one variable serves both ends.
API_KEY_ENV = "UNIRAG_SERVER_API_KEY"


class ServerError(UniragError):
    """A ``unirag serve`` refused the query or could not be reached: its one-line message."""


@dataclass(frozen=True)
class Retrieved:
    """A retrieve-only query's context items (their JSON) and the method that ran (its name)."""

    method: str
    items: list[dict[str, Any]]

    @classmethod
    def of(cls, result: dict[str, Any]) -> Retrieved:
        """From a query's JSON (``QueryResult.to_json()``, the server's answer)."""
        return cls(str(result["method"]), list(result["context"]))


class ContextSource(Protocol):
    """The context for one question, one method (``None``: the workspace's) and ``top_k`` per operator."""

    def retrieve(self, question: str, method: str | None, top_k: int | None) -> Retrieved: ...

    async def aretrieve(self, question: str, method: str | None, top_k: int | None) -> Retrieved: ...


@dataclass
class LocalSource:
    """A :class:`UniRAG` in this process: ``query(..., retrieve_only=True)``; ``aquery`` when async."""

    rag: UniRAG

    def retrieve(self, question: str, method: str | None, top_k: int | None) -> Retrieved:
        return Retrieved.of(self.rag.query(question, method, top_k=top_k, retrieve_only=True).to_json())

    async def aretrieve(self, question: str, method: str | None, top_k: int | None) -> Retrieved:
        return Retrieved.of((await self.rag.aquery(question, method, top_k=top_k, retrieve_only=True)).to_json())


@dataclass
class RemoteSource:
    """A running ``unirag serve`` at ``url``: ``POST /query`` with ``retrieve_only``.

    ``api_key``: sent as ``Authorization: Bearer``; ``None`` reads :data:`API_KEY_ENV`. The key
    is kept out of this object's ``repr`` and never put in a message.
    """

    url: str
    api_key: str | None = field(default=None, repr=False)
    timeout: float = 300.0

    def __post_init__(self) -> None:
        self.url = self.url.rstrip("/")
        if self.api_key is None:
            self.api_key = os.environ.get(API_KEY_ENV) or None

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    @staticmethod
    def _body(question: str, method: str | None, top_k: int | None) -> dict[str, Any]:
        body: dict[str, Any] = {"question": question, "retrieve_only": True}
        if method:
            body["method"] = method
        if top_k:
            body["top_k"] = top_k
        return body

    def retrieve(self, question: str, method: str | None, top_k: int | None) -> Retrieved:
        import httpx

        try:
            with httpx.Client(timeout=self.timeout) as client:
                response = client.post(f"{self.url}/query", json=self._body(question, method, top_k),
                                       headers=self._headers())
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from None
        return self._context(response)

    async def aretrieve(self, question: str, method: str | None, top_k: int | None) -> Retrieved:
        import httpx

        try:
            async with httpx.AsyncClient(timeout=self.timeout) as client:
                response = await client.post(f"{self.url}/query", json=self._body(question, method, top_k),
                                             headers=self._headers())
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from None
        return self._context(response)

    def _unreachable(self, exc: httpx.HTTPError) -> ServerError:
        return ServerError(f"unirag server at {self.url} did not answer: {type(exc).__name__}: "
                           f"{(str(exc).splitlines() or [''])[0]}")

    def _context(self, response: httpx.Response) -> Retrieved:
        """The context of a 200 answer; any other status is the server's one-line error."""
        try:
            payload = response.json()
        except ValueError:
            payload = None
        if response.status_code != 200:
            error = payload.get("error") if isinstance(payload, dict) else None
            message = error.get("message") if isinstance(error, dict) else None
            raise ServerError(f"unirag server at {self.url} answered {response.status_code}: "
                              f"{message or response.reason_phrase}")
        if not isinstance(payload, dict) or not isinstance(payload.get("context"), list) or "method" not in payload:
            raise ServerError(f"unirag server at {self.url} sent no context (is it a unirag server?)")
        return Retrieved.of(payload)


def context_source(rag: UniRAG | None, url: str | None, api_key: str | None, timeout: float) -> ContextSource:
    """The one source a retriever was given: a ``rag`` or a server ``url``, not both."""
    if (rag is None) == (url is None):
        raise ValueError("give the retriever either rag=UniRAG(...) (in process) or url='http://...' (a server)")
    if rag is not None:
        return LocalSource(rag)
    return RemoteSource(url, api_key, timeout)


def item_metadata(item: dict[str, Any], method: str) -> dict[str, Any]:
    """What a framework document carries about one context item.

    ``kind`` (chunk / entity / relationship / community / path / ...), ``id``, ``chunk_id``
    (the item's own id when it is a passage, else ``None``), ``chunk_ids`` (the passages it
    came from), ``source`` (a passage's document: the file it was read from; else where
    the context says the item is from: an entity's name, a relationship's two ends, a
    community's hierarchy and level), ``title`` (a passage's document title, else that
    same source), ``score``, ``operator`` (the operator that found it), ``method`` (the method that ran) and the item's
    whole ``provenance``.
    """
    provenance = item.get("provenance") or {}
    is_chunk = item["kind"] == "chunk"
    chunk_ids = [item["id"]] if is_chunk else list(provenance.get("chunk_ids") or [])
    return {
        "kind": item["kind"],
        "id": item["id"],
        "chunk_id": item["id"] if is_chunk else None,
        "chunk_ids": chunk_ids,
        "source": provenance.get("path") or item["source"],
        "title": provenance.get("title") or item["source"],
        "score": item["score"],
        "operator": item.get("operator") or None,
        "method": method,
        "provenance": provenance,
    }
