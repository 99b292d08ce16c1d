"""Clients for any OpenAI-compatible server (vLLM, Ollama's ``/v1``, llama.cpp server, OpenAI).

Why these clients are thin: retrying, caching, rate limiting and accounting
are separate layers (:mod:`unirag.llm.layers`). A backend's only job is to turn
one request into one HTTP call and to classify every failure as either
*transient* (:class:`RetryableLLMError`, which the retry layer backs off on) or
*final* (:class:`LLMError`, which a retry would not fix: a bad key, a wrong
model name). Every error message is one line that a user can act on, and it
never carries the API key or request headers, because these messages end up
in logs and terminal output.

Each client object owns one :class:`httpx.Client` for its whole life, so calls
share pooled keep-alive connections instead of paying a TCP (and TLS)
handshake per call.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any, Literal

import httpx
import numpy as np

from unirag.errors import LLMError, RetryableLLMError
from unirag.llm.base import ChatEvent, ChatRequest, ChatResponse, EmbeddingBatch, clean_model_text, normalise_rows
from unirag.llm.streaming import ChunkAssembler, sse_data

JsonMode = Literal["auto", "on", "off"]

_ERROR_SNIPPET = 200  # characters of a server's error message worth showing
_LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "0.0.0.0"})


def _status_reason(status: int) -> str:
    """``429 Too Many Requests``: the status with its standard phrase."""
    from http import HTTPStatus

    try:
        return f"{status} {HTTPStatus(status).phrase}"
    except ValueError:
        return str(status)


def _one_line(text: str) -> str:
    """Collapse whitespace so a message from a server cannot break the one-line rule."""
    return " ".join(text.split())


def _display_url(url: str) -> str:
    """The URL without any ``user:password@`` part, for messages."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        return url
    if parsed.userinfo:
        return str(parsed.copy_with(username=None, password=None))
    return url


def _parse_retry_after(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or HTTP date)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


def _server_message(response: httpx.Response) -> str:
    """The human part of an error body: OpenAI, vLLM and llama.cpp nest it differently."""
    text = response.text
    try:
        body = json.loads(text)
    except ValueError:
        return text
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return error["message"]
        if isinstance(error, str):
            return error
        for key in ("message", "detail"):
            if isinstance(body.get(key), str):
                return body[key]
    return text


class _Endpoint:
    """One base URL, one pooled HTTP client, one way of classifying failures.

    Shared by the chat and embedding clients so both report errors identically.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        kind: str,
        section: str,
        api_key: str | None,
        timeout: float,
        client: httpx.Client | None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.kind = kind  # "chat model" / "embedding model", for messages
        self.section = section  # settings section that holds the key: "chat" / "embedding"
        self.timeout = timeout
        self._api_key = api_key or None
        self._headers = {"Content-Type": "application/json"}
        if self._api_key:
            self._headers["Authorization"] = f"Bearer {self._api_key}"
        # A caller-supplied client (tests, custom transports) stays the caller's to close.
        self._owns_client = client is None
        self._client = client if client is not None else httpx.Client(timeout=timeout)

    def _redact(self, text: str) -> str:
        """Some servers echo the key back in their 401 text; never pass it on."""
        if self._api_key:
            text = text.replace(self._api_key, "***")
        return _one_line(text)

    def post(self, path: str, payload: dict[str, Any]) -> httpx.Response:
        """POST ``payload``; transport failures become one-line errors.

        The HTTP status is *not* checked here, so a caller can inspect a 400
        before deciding (the JSON-mode fallback needs that).
        """
        url = f"{self.base_url}{path}"
        try:
            return self._client.post(url, json=payload, headers=self.headers, timeout=self.timeout)
        except (httpx.TransportError, httpx.InvalidURL) as exc:
            raise self.transport_error(exc, url) from None

    @contextmanager
    def stream_lines(self, path: str, payload: dict[str, Any]) -> Iterator[tuple[httpx.Response, Iterator[str]]]:
        """POST ``payload`` and read the answer line by line as it arrives (server-sent events).

        Yields the response (status unchecked, as :meth:`post`) and its lines; a
        connection that drops or stalls mid-stream is a retryable one-line error.
        """
        url = f"{self.base_url}{path}"
        try:
            with self._client.stream("POST", url, json=payload, headers=self.headers, timeout=self.timeout) as response:
                yield response, self._guarded(response.iter_lines(), url)
        except (httpx.TransportError, httpx.InvalidURL) as exc:
            raise self.transport_error(exc, url) from None

    def _guarded(self, lines: Iterator[str], url: str) -> Iterator[str]:
        try:
            yield from lines
        except httpx.TransportError as exc:
            raise self.transport_error(exc, url, mid_stream=True) from None

    @property
    def headers(self) -> dict[str, str]:
        return self._headers

    @property
    def host(self) -> str:
        """``host:port`` of the base URL, for retry lines (no path, no credentials)."""
        try:
            parsed = httpx.URL(self.base_url)
        except httpx.InvalidURL:
            return ""
        return f"{parsed.host}:{parsed.port}" if parsed.port else parsed.host

    def _is_local(self) -> bool:
        try:
            return httpx.URL(self.base_url).host in _LOCAL_HOSTS
        except httpx.InvalidURL:
            return False

    def transport_error(self, exc: Exception, url: str, mid_stream: bool = False) -> LLMError:
        """The one-line error for a failure below HTTP: retryable unless the URL can never work.

        A refused connection to this machine means no server runs there: it is retried
        once (a server that is just starting), not five times with backoff."""
        shown = _display_url(url)
        cut = "the reply stream was cut: " if mid_stream else ""
        if isinstance(exc, httpx.TimeoutException):
            return RetryableLLMError(f"{self.kind} {self.model}: {cut}timed out after {self.timeout:g}s at {shown}",
                                     reason="timeout", endpoint=self.host)
        if isinstance(exc, httpx.UnsupportedProtocol):
            # A base_url without http:// or https:// will never work; retrying it is pointless.
            return LLMError(
                f"{self.kind} {self.model}: base_url {self.base_url!r} must start with http:// or https://"
            )
        if isinstance(exc, httpx.InvalidURL):
            return LLMError(f"{self.kind} {self.model}: invalid base_url {self.base_url!r} ({exc})")
        reason = self._redact(str(exc) or type(exc).__name__)
        if mid_stream:
            return RetryableLLMError(f"{self.kind} {self.model}: {cut}{reason} ({shown})",
                                     reason="reply stream cut", endpoint=self.host)
        if isinstance(exc, httpx.ConnectError) and "refused" in reason.lower() and self._is_local():
            return RetryableLLMError(
                f"cannot reach {shown}: connection refused; start the server or fix {self.section}.base_url "
                f"(UNIRAG_{self.section.upper()}_BASE_URL)",
                reason="connection refused", endpoint=self.host, max_retries=1,
            )
        return RetryableLLMError(f"cannot reach {shown}: {reason}", reason=reason[:120], endpoint=self.host)

    def check(self, response: httpx.Response) -> None:
        """Raise the right error for a non-2xx response; return quietly otherwise."""
        status = response.status_code
        if 200 <= status < 300:
            return
        url = _display_url(str(response.request.url))
        message = self._redact(_server_message(response))[:_ERROR_SNIPPET]
        if status == 429:
            retry_after = _parse_retry_after(response.headers.get("Retry-After"))
            raise RetryableLLMError(f"{self.kind} {self.model}: rate limited (429) at {url}", retry_after,
                                    reason=_status_reason(status), endpoint=self.host)
        if status >= 500 or status == 408:
            raise RetryableLLMError(f"{self.kind} {self.model}: server error {status} at {url}: {message}",
                                    reason=_status_reason(status), endpoint=self.host)
        if status in (401, 403):
            raise LLMError(
                f"{self.kind} {self.model}: {_display_url(self.base_url)} rejected the API key ({status}); "
                f"check {self.section}.api_key / UNIRAG_{self.section.upper()}_API_KEY"
            )
        if status == 404:
            raise LLMError(
                f"{self.kind} {self.model}: not found (404) at {url}; "
                f"check that base_url is right (usually ends in /v1) and that the server serves model {self.model!r}"
            )
        raise LLMError(f"{self.kind} {self.model}: server answered {status} at {url}: {message}")

    def json_body(self, response: httpx.Response) -> dict[str, Any]:
        """The body of a 2xx response as a JSON object.

        Garbage in a 200 is retryable: overloaded servers and proxies emit
        truncated or HTML bodies that a second attempt usually fixes.
        """
        try:
            body = response.json()
        except ValueError:
            raise RetryableLLMError(
                f"{self.kind} {self.model}: malformed response from {_display_url(str(response.request.url))} "
                "(not JSON)"
            ) from None
        if not isinstance(body, dict):
            raise RetryableLLMError(f"{self.kind} {self.model}: malformed response (not a JSON object)")
        return body

    def close(self) -> None:
        if self._owns_client:
            self._client.close()


def _usage(body: dict[str, Any], key: str) -> int:
    usage = body.get("usage")
    if not isinstance(usage, dict):
        return 0
    value = usage.get(key)
    return int(value) if isinstance(value, (int, float)) else 0


def _mentions_json_mode(response: httpx.Response) -> bool:
    """Does a 400/422 complain about ``response_format``? (Some servers reject it.)"""
    if response.status_code not in (400, 422):
        return False
    text = response.text.lower()
    return "response_format" in text or "json" in text


class OpenAIChat:
    """Chat completions against ``{base_url}/chat/completions``.

    ``json_mode`` decides whether a request's ``json_mode`` is forwarded as
    ``response_format: json_object``: ``"on"`` always, ``"off"`` never,
    ``"auto"`` until the server rejects it once, after which this instance
    stops sending it (prompts still ask for JSON, and the parser repairs it).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = 120.0,
        json_mode: JsonMode = "auto",
        client: httpx.Client | None = None,
    ) -> None:
        if json_mode not in ("auto", "on", "off"):
            raise ValueError(f"json_mode must be 'auto', 'on' or 'off', not {json_mode!r}")
        self.name = model
        self.model = model
        self.json_mode: JsonMode = json_mode
        self._endpoint = _Endpoint(base_url, model, "chat model", "chat", api_key, timeout, client)
        self.base_url = self._endpoint.base_url
        # Learned once per instance, read by many threads: guard the flag.
        self._json_lock = threading.Lock()
        self._json_rejected = False

    @property
    def _client(self) -> httpx.Client:
        return self._endpoint._client

    def _send_response_format(self, request: ChatRequest) -> bool:
        if not request.json_mode or self.json_mode == "off":
            return False
        if self.json_mode == "on":
            return True
        with self._json_lock:
            return not self._json_rejected

    def payload(self, request: ChatRequest) -> tuple[dict[str, Any], bool]:
        """The request body, and whether it asks for JSON output (``response_format``)."""
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(message) for message in request.messages],
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
        }
        with_format = self._send_response_format(request)
        if with_format:
            payload["response_format"] = {"type": "json_object"}
        return payload, with_format

    def rejected_json_mode(self, with_format: bool, response: httpx.Response) -> bool:
        """A 400/422 about ``response_format`` under ``json_mode: auto``: stop sending it (once per instance)."""
        if with_format and self.json_mode == "auto" and _mentions_json_mode(response):
            with self._json_lock:
                self._json_rejected = True
            return True
        return False

    def complete(self, request: ChatRequest) -> ChatResponse:
        payload, with_format = self.payload(request)
        response = self._endpoint.post("/chat/completions", payload)
        if self.rejected_json_mode(with_format, response):
            del payload["response_format"]
            response = self._endpoint.post("/chat/completions", payload)
        self._endpoint.check(response)
        return self._parse(self._endpoint.json_body(response))

    def stream(self, request: ChatRequest) -> Iterator[ChatEvent]:
        """The reply as it is generated (``stream: true``), then the whole :class:`ChatResponse`.

        Usage comes from the last chunk (``stream_options.include_usage``); a server
        that sends none gets its tokens counted by our tokenizer, marked
        ``usage_estimated``. A stream that ends before a finish reason is a
        retryable error, so nothing half-received is ever taken for a reply.
        """
        payload, with_format = self.payload(request)
        payload.update(stream=True, stream_options={"include_usage": True})
        assembler = ChunkAssembler(f"chat model {self.model}")
        with self._endpoint.stream_lines("/chat/completions", payload) as (response, lines):
            if not 200 <= response.status_code < 300:
                response.read()
                if self.rejected_json_mode(with_format, response):
                    yield from self.stream(request)
                    return
                self._endpoint.check(response)
            for chunk in sse_data(lines):
                text = assembler.feed(chunk)
                if text:
                    yield text
        yield assembler.response(request)

    def _parse(self, body: dict[str, Any]) -> ChatResponse:
        choices = body.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise RetryableLLMError(f"chat model {self.model}: malformed response (no choices)")
        choice = choices[0]
        message = choice.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if content is None:
            text = ""
        elif isinstance(content, str):
            text = content
        else:
            raise RetryableLLMError(f"chat model {self.model}: malformed response (content is not text)")
        text, sanitised = clean_model_text(text)
        return ChatResponse(
            text=text,
            sanitised=sanitised,
            prompt_tokens=_usage(body, "prompt_tokens"),
            completion_tokens=_usage(body, "completion_tokens"),
            finish_reason=str(choice.get("finish_reason") or "stop"),
        )

    def close(self) -> None:
        self._endpoint.close()


class OpenAIEmbedder:
    """Embeddings against ``{base_url}/embeddings``; one HTTP call per batch."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = 60.0,
        client: httpx.Client | None = None,
    ) -> None:
        self.name = model
        self.model = model
        self.dim = 0  # known after the first call
        self._endpoint = _Endpoint(base_url, model, "embedding model", "embedding", api_key, timeout, client)
        self.base_url = self._endpoint.base_url

    @property
    def _client(self) -> httpx.Client:
        return self._endpoint._client

    def embed(self, texts: list[str], stage: str = "embed") -> EmbeddingBatch:
        """Vectors in input order, L2-normalised. ``stage`` is for accounting layers only."""
        if not texts:
            return EmbeddingBatch(np.zeros((0, self.dim), dtype=np.float32), prompt_tokens=0, calls=0)
        response = self._endpoint.post("/embeddings", {"model": self.model, "input": list(texts)})
        self._endpoint.check(response)
        body = self._endpoint.json_body(response)
        data = body.get("data")
        if not isinstance(data, list) or len(data) != len(texts):
            got = len(data) if isinstance(data, list) else "no"
            raise RetryableLLMError(
                f"embedding model {self.model}: malformed response ({got} vectors for {len(texts)} texts)"
            )
        try:
            # Servers may answer out of order; "index" says which input each vector is for.
            rows = sorted(data, key=lambda item: int(item.get("index", 0)))
            vectors = np.asarray([row["embedding"] for row in rows], dtype=np.float32)
        except (AttributeError, KeyError, TypeError, ValueError):
            raise RetryableLLMError(f"embedding model {self.model}: malformed response (bad embedding data)") from None
        if vectors.ndim != 2:
            raise RetryableLLMError(f"embedding model {self.model}: malformed response (ragged vectors)")
        self.dim = int(vectors.shape[1])
        return EmbeddingBatch(normalise_rows(vectors), prompt_tokens=_usage(body, "prompt_tokens"), calls=1)

    def close(self) -> None:
        self._endpoint.close()
