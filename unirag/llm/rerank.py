"""The reranker's layers: retried like the other model clients, charged to a query's ledger.

A reranker is optional (``rerank.base_url``); without one a method that reranks stops at
query start with :func:`missing_reranker`. The HTTP client (:mod:`unirag.llm.rerank_http`)
is imported only when one is configured: it needs httpx, which an offline query never loads.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from unirag.config import Settings
from unirag.errors import ConfigError
from unirag.llm.base import Reranker, RerankScores, UsageLedger
from unirag.llm.layers import RetryPolicy, call_with_retry

RERANK_STAGE = "rerank"
"""The ledger stage every rerank call is charged to (``usage_by_stage.rerank``)."""


class RetryingReranker:
    def __init__(self, inner: Reranker, policy: RetryPolicy, sleep: Callable[[float], None] = time.sleep) -> None:
        self.inner, self.policy, self.sleep, self.name = inner, policy, sleep, inner.name

    def rerank(self, query: str, documents: list[str], top_n: int) -> RerankScores:
        return call_with_retry(f"reranker {self.name}", lambda: self.inner.rerank(query, documents, top_n),
                               self.policy, self.sleep)


class AccountedReranker:
    """Charges each rerank to ``ledger`` (stage ``rerank``): calls, documents, tokens, seconds."""

    def __init__(self, inner: Reranker, ledger: UsageLedger) -> None:
        self.inner, self.ledger, self.name = inner, ledger, inner.name

    def rerank(self, query: str, documents: list[str], top_n: int) -> RerankScores:
        start = time.perf_counter()
        scored = self.inner.rerank(query, documents, top_n)
        self.ledger.record(RERANK_STAGE, rerank_calls=scored.calls, reranked_documents=len(documents),
                           rerank_tokens=scored.tokens, seconds=time.perf_counter() - start)
        return scored


def backend_reranker(settings: Settings) -> Reranker | None:
    """The configured rerank endpoint, or None when ``rerank.base_url`` is unset."""
    section = settings.rerank
    if not section.base_url:
        return None
    from unirag.llm.rerank_http import HttpReranker  # deferred: httpx only when a reranker is configured

    key = section.api_key.get_secret_value() if section.api_key else None
    return HttpReranker(section.base_url, section.model, section.api, key, section.timeout, section.batch_size)


def missing_reranker(method: str) -> ConfigError:
    """The one line for a method that reranks in a workspace with no reranker configured."""
    return ConfigError(
        f"method {method} reranks its context, but no reranker is configured: set rerank.base_url "
        "(UNIRAG_RERANK_BASE_URL) to a TEI, vLLM, Jina or Cohere rerank endpoint, or pick a method without it"
    )
