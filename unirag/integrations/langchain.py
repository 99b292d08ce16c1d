"""A LangChain retriever over unirag: any method's context as ``Document``\\ s.

    from unirag.integrations.langchain import UniragRetriever
    retriever = UniragRetriever(rag=UniRAG("ws"), method="hipporag", top_k=5)   # in process
    retriever = UniragRetriever(url="http://127.0.0.1:8080", method="hipporag")  # a unirag serve
    docs = retriever.invoke("Where did Marie Curie work?")

Each document's ``page_content`` is the item's text as generation would see it, and its
``metadata`` is :func:`unirag.integrations.source.item_metadata` (kind, chunk id, source,
title, score, operator, method, provenance). ``langchain-core`` is the ``langchain`` extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import ConfigDict, Field, PrivateAttr, SecretStr

from unirag.errors import import_optional
from unirag.integrations.source import ContextSource, Retrieved, context_source, item_metadata

if TYPE_CHECKING:
    from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
    from langchain_core.documents import Document

    from unirag.api import UniRAG

_PURPOSE = "the LangChain retriever (unirag.integrations.langchain)"
# The retriever subclasses these, so they are imported with this module: a missing
# langchain-core is one line naming the extra, here rather than at the first query.
_retrievers = import_optional("langchain_core.retrievers", "langchain", _PURPOSE)
_documents = import_optional("langchain_core.documents", "langchain", _PURPOSE)


def to_documents(retrieved: Retrieved) -> list[Document]:
    """LangChain ``Document``\\ s of a query's context items, in the context's order."""
    return [_documents.Document(page_content=item["text"], metadata=item_metadata(item, retrieved.method),
                                id=f"{item['kind']}:{item['id']}")
            for item in retrieved.items]


class UniragRetriever(_retrievers.BaseRetriever):
    """The context of a unirag method as LangChain documents.

    Give ``rag`` (a :class:`~unirag.api.UniRAG`: queries run in this process, ``ainvoke``
    through ``aquery``) or ``url`` (a running ``unirag serve``: ``POST /query`` with
    ``retrieve_only``, over httpx). ``method``: a method name or alias (``None``: the
    workspace's default); ``top_k``: items per retrieval operator, as ``unirag query
    --top-k`` (a method with several operators returns up to that many from each);
    ``api_key``: the server's key (default: ``UNIRAG_SERVER_API_KEY``), never shown in a
    ``repr`` or a message; ``timeout``: seconds a remote query may take.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    rag: Any = Field(default=None, exclude=True, repr=False)
    url: str | None = None
    method: str | None = None
    top_k: int | None = Field(default=None, ge=1)
    api_key: SecretStr | None = Field(default=None, exclude=True, repr=False)
    timeout: float = 300.0
    _source: ContextSource = PrivateAttr()

    def __init__(self, rag: UniRAG | None = None, **fields: Any) -> None:
        super().__init__(rag=rag, **fields)

    def model_post_init(self, context: Any, /) -> None:
        key = self.api_key.get_secret_value() if self.api_key else None
        self._source = context_source(self.rag, self.url, key, self.timeout)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return to_documents(self._source.retrieve(query, self.method, self.top_k))

    async def _aget_relevant_documents(self, query: str, *,
                                       run_manager: AsyncCallbackManagerForRetrieverRun) -> list[Document]:
        return to_documents(await self._source.aretrieve(query, self.method, self.top_k))
