"""A cross-encoder behind the common rerank HTTP API (TEI, vLLM, Jina, Cohere).

Two shapes exist in the wild, both POSTed to ``{base_url}/rerank``:

* ``cohere`` (Cohere, Jina, vLLM, TEI's ``/v1/rerank``): ``{"model", "query", "documents": [str],
  "top_n"}`` -> ``{"results": [{"index", "relevance_score"}], "usage"?: {"total_tokens"}}``;
* ``tei`` (text-embeddings-inference's own route): ``{"query", "texts": [str]}`` ->
  ``[{"index", "score"}]``.

Failures are classified exactly as the chat and embedding clients classify theirs (the shared
:class:`~unirag.llm.openai_compat._Endpoint`): a 5xx, a timeout or a malformed reply is
retryable, a 4xx is final, every message is one line and never carries the key.
"""

from __future__ import annotations

from typing import Any, Literal

import httpx

from unirag.errors import RetryableLLMError
from unirag.llm.base import RerankScores
from unirag.llm.openai_compat import _display_url, _Endpoint

RerankApi = Literal["cohere", "tei"]


class HttpReranker:
    """One rerank endpoint; ``batch_size`` documents per call (a long list takes several)."""

    def __init__(self, base_url: str, model: str = "", api: RerankApi = "cohere", api_key: str | None = None,
                 timeout: float = 30.0, batch_size: int = 64, client: httpx.Client | None = None) -> None:
        if api not in ("cohere", "tei"):
            raise ValueError(f"rerank api must be 'cohere' or 'tei', not {api!r}")
        self.model = model
        self.name = model or "reranker"
        self.api = api
        self.batch_size = max(1, batch_size)
        self._endpoint = _Endpoint(base_url, self.name, "reranker", "rerank", api_key, timeout, client)

    def rerank(self, query: str, documents: list[str], top_n: int) -> RerankScores:
        """Scores in input order; a document the server left out of its top_n scores ``-inf``."""
        scores: list[float] = []
        calls = tokens = 0
        for start in range(0, len(documents), self.batch_size):
            batch = documents[start:start + self.batch_size]
            # One batch: the server may cut to top_n itself. Several: every score is needed to merge them.
            wanted = min(top_n, len(batch)) if top_n and len(batch) == len(documents) else len(batch)
            batch_scores, batch_tokens = self._call(query, batch, wanted)
            scores += batch_scores
            calls += 1
            tokens += batch_tokens
        return RerankScores(tuple(scores), calls, tokens)

    def _call(self, query: str, documents: list[str], top_n: int) -> tuple[list[float], int]:
        if self.api == "tei":
            payload: dict[str, Any] = {"query": query, "texts": documents}
        else:
            payload = {"query": query, "documents": documents, "top_n": top_n}
            if self.model:
                payload["model"] = self.model
        response = self._endpoint.post("/rerank", payload)
        self._endpoint.check(response)
        try:
            body = response.json()
        except ValueError:
            raise self._malformed(f"not JSON, from {_display_url(str(response.request.url))}") from None
        rows = body if self.api == "tei" else (body.get("results") if isinstance(body, dict) else None)
        key = "score" if self.api == "tei" else "relevance_score"
        if not isinstance(rows, list):
            expected = "a JSON list" if self.api == "tei" else "a 'results' list"
            raise self._malformed(f"expected {expected}; check rerank.api (cohere or tei)")
        scores = [float("-inf")] * len(documents)
        for row in rows:
            try:
                index, score = int(row["index"]), float(row[key])
            except (KeyError, TypeError, ValueError):
                raise self._malformed(f"a result without 'index' and '{key}'; check rerank.api") from None
            if not 0 <= index < len(documents):
                raise self._malformed(f"index {index} for {len(documents)} documents")
            scores[index] = score
        return scores, _tokens(body)

    def _malformed(self, why: str) -> RetryableLLMError:
        return RetryableLLMError(f"reranker {self.name}: malformed response ({why})", reason="malformed response",
                                 endpoint=self._endpoint.host)

    def close(self) -> None:
        self._endpoint.close()


def _tokens(body: Any) -> int:
    """Tokens the server reports (Jina and vLLM: ``usage.total_tokens``), else 0."""
    usage = body.get("usage") if isinstance(body, dict) else None
    if not isinstance(usage, dict):
        return 0
    value = usage.get("total_tokens", usage.get("prompt_tokens", 0))
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0
