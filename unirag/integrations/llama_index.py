"""A LlamaIndex retriever over unirag: any method's context as ``NodeWithScore``\\ s.

    from unirag.integrations.llama_index import UniragRetriever
    retriever = UniragRetriever(rag=UniRAG("ws"), method="hipporag", top_k=5)   # in process
    retriever = UniragRetriever(url="http://127.0.0.1:8080", method="hipporag")  # a unirag serve
    nodes = retriever.retrieve("Where did Marie Curie work?")

Each node is a ``TextNode`` (the item's text, id ``KIND:ID``) with the item's score; its
``metadata`` is :func:`unirag.integrations.source.item_metadata`. Only ``title`` and
``source`` of it go into the text an LLM or an embedder sees (the rest is bookkeeping).
``llama-index-core`` is the ``llama-index`` extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from unirag.errors import import_optional
from unirag.integrations.source import Retrieved, context_source, item_metadata

if TYPE_CHECKING:
    from llama_index.core.schema import NodeWithScore, QueryBundle

    from unirag.api import UniRAG

_PURPOSE = "the LlamaIndex retriever (unirag.integrations.llama_index)"
# The retriever subclasses LlamaIndex's base class, so it is imported with this module:
# a missing llama-index-core is one line naming the extra, here rather than at the first query.
_retrievers = import_optional("llama_index.core.retrievers", "llama-index", _PURPOSE)
_schema = import_optional("llama_index.core.schema", "llama-index", _PURPOSE)

#: The metadata an LLM or embedder sees with a node's text; the rest stays out of prompts.
SHOWN_METADATA = ("title", "source")


def to_nodes(retrieved: Retrieved) -> list[NodeWithScore]:
    """LlamaIndex ``NodeWithScore``\\ s of a query's context items, in the context's order."""
    nodes = []
    for item in retrieved.items:
        metadata = item_metadata(item, retrieved.method)
        hidden = [key for key in metadata if key not in SHOWN_METADATA]
        node = _schema.TextNode(id_=f"{item['kind']}:{item['id']}", text=item["text"], metadata=metadata,
                                excluded_llm_metadata_keys=hidden, excluded_embed_metadata_keys=hidden)
        nodes.append(_schema.NodeWithScore(node=node, score=float(item["score"])))
    return nodes


class UniragRetriever(_retrievers.BaseRetriever):
    """The context of a unirag method as LlamaIndex nodes.

    Give ``rag`` (a :class:`~unirag.api.UniRAG`: queries run in this process, ``aretrieve``
    through ``aquery``) or ``url`` (a running ``unirag serve``: ``POST /query`` with
    ``retrieve_only``, over httpx). ``method``: a method name or alias (``None``: the
    workspace's default); ``top_k``: items per retrieval operator, as ``unirag query
    --top-k`` (a method with several operators returns up to that many from each);
    ``api_key``: the server's key (default: ``UNIRAG_SERVER_API_KEY``), never shown in a
    message; ``timeout``: seconds a remote query may take. Other keywords (``callback_manager``,
    ``verbose``) go to LlamaIndex's ``BaseRetriever``.
    """

    def __init__(self, rag: UniRAG | None = None, *, url: str | None = None, method: str | None = None,
                 top_k: int | None = None, api_key: str | None = None, timeout: float = 300.0,
                 **base: Any) -> None:
        if top_k is not None and top_k < 1:
            raise ValueError(f"top_k must be at least 1, not {top_k}")
        super().__init__(**base)
        self.method = method
        self.top_k = top_k
        self._source = context_source(rag, url, api_key, timeout)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return to_nodes(self._source.retrieve(query_bundle.query_str, self.method, self.top_k))

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return to_nodes(await self._source.aretrieve(query_bundle.query_str, self.method, self.top_k))
